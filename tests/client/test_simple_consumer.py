"""The seeds' low-level SimpleConsumer against a real broker: multifetch (several partitions of several topics in one
Fetch request, each answered alone), fetch(FetchRequest), and getOffsetsBefore's old-style offsets (ListOffsets v0),
raw (kafka-python's own v0 encoding) and through the client."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from odradek.broker.handlers.offsets import old_style_offsets
from odradek.client import Admin, Producer, SimpleConsumer
from odradek.client.simple import EARLIEST_TIME, LATEST_TIME, FetchRequest
from odradek.client.connection import server_address


def _fill(broker, topic: str, partitions: int, per_partition: int) -> None:
    Admin(broker.bootstrap_servers).create_topic(topic, partitions)
    with Producer(broker.bootstrap_servers) as producer:
        for partition in range(partitions):
            for i in range(per_partition):
                producer.send(topic, f"{topic}/{partition}/{i}", f"k{i}", partition=partition,
                              headers=[("i", str(i))])


def test_multifetch_reads_several_partitions_of_two_topics_in_one_request(broker, topic_name):
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    _fill(broker, first, 2, 10)
    _fill(broker, second, 1, 10)
    requests = [FetchRequest(first, 0, 3), FetchRequest(second, 0, 7), FetchRequest(first, 1, 0, max_bytes=4096),
                FetchRequest(first, 5, 0)]
    with SimpleConsumer(broker.bootstrap_servers, first) as consumer:
        answers = consumer.multifetch(requests)
        assert [answer.request for answer in answers] == requests
        assert [[(m.topic, m.partition, m.offset, m.value) for m in answer.messages] for answer in answers[:3]] == [
            [(first, 0, i, f"{first}/0/{i}".encode()) for i in range(3, 10)],
            [(second, 0, i, f"{second}/0/{i}".encode()) for i in range(7, 10)],
            [(first, 1, i, f"{first}/1/{i}".encode()) for i in range(10)]]
        assert [answer.error for answer in answers[:3]] == [None, None, None]
        assert [answer.high_watermark for answer in answers[:3]] == [10, 10, 10]
        unknown = answers[3]
        assert (unknown.messages, unknown.error.name) == ([], "UNKNOWN_TOPIC_OR_PARTITION")
        assert consumer.multifetch([]) == []
        with pytest.raises(ValueError):
            consumer.multifetch([FetchRequest(second, 0, 1), FetchRequest(second, 0, 2)])
        [message] = consumer.fetch(FetchRequest(second, 0, 9))
        assert (message.key, message.headers, message.timestamp_ms is not None) == (b"k9", [("i", b"9")], True)
        assert [m.offset for m in consumer.fetch(3, max_messages=2, timeout=10)] == [3, 4]  # the old signature still works


def _one_record_segments(broker, topic: str, count: int) -> list[float]:
    """`count` records, each alone in its segment, written ~150 ms apart; the time (ms) between each and the next."""
    Admin(broker.bootstrap_servers).create_topic(topic, 1, configs={"segment.bytes": "1000"})
    between = []
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(count):
            producer.send_sync(topic, b"x" * 600)
            time.sleep(0.075)
            between.append(time.time() * 1000)
            time.sleep(0.075)
    return between


def test_offsets_before_a_time_are_segment_base_offsets_descending(broker, topic_name):
    between = _one_record_segments(broker, topic_name, 4)  # segments at 0, 1, 2, 3; log end 4
    with SimpleConsumer(broker.bootstrap_servers, topic_name) as consumer:
        assert consumer.get_offsets_before(topic_name, 0, LATEST_TIME, 10) == [4, 3, 2, 1, 0]
        assert consumer.get_offsets_before(topic_name, 0, LATEST_TIME, 2) == [4, 3]
        assert consumer.get_offsets_before(topic_name, 0, EARLIEST_TIME, 10) == [0]
        assert consumer.get_offsets_before(topic_name, 0, int(between[1]), 10) == [1, 0]
        assert consumer.get_offsets_before(topic_name, 0, int(between[2]), 2) == [2, 1]
        assert consumer.get_offsets_before(topic_name, 0, int(between[0]) - 60_000, 10) == []
        assert consumer.get_offsets_before(topic_name, 0, int(time.time() * 1000) + 1000, 10) == [4, 3, 2, 1, 0]
        assert [m.offset for m in consumer.fetch(FetchRequest(topic_name, 0, 2))] == [2]  # one segment per answer


def _list_offsets_v0_by_kafka_python(bootstrap_servers: str, topic: str, queries: list[tuple[int, int, int]]):
    """kafka-python's own ListOffsets v0 encoding and decoding over a plain socket: [(partition, error code,
    old-style offsets)] for [(partition, time, max_num_offsets)]."""
    from kafka.protocol.old.list_offsets import ListOffsetsRequest_v0, ListOffsetsResponse_v0

    body = ListOffsetsRequest_v0(replica_id=-1, topics=[(topic, queries)]).encode()
    client_id = b"kafka-python"
    header = struct.pack(">hhih", 2, 0, 7, len(client_id)) + client_id
    with socket.create_connection(server_address(bootstrap_servers), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        reader = sock.makefile("rb")
        (size,) = struct.unpack(">i", reader.read(4))
        frame = reader.read(size)
    assert struct.unpack(">i", frame[:4]) == (7,)
    [(name, partitions)] = ListOffsetsResponse_v0.decode(frame[4:]).topics
    assert name == topic
    return [tuple(partition) for partition in partitions]


def test_raw_list_offsets_v0_answers_old_style_offsets(broker, topic_name):
    _one_record_segments(broker, topic_name, 3)
    assert _list_offsets_v0_by_kafka_python(broker.bootstrap_servers, topic_name, [
        (0, LATEST_TIME, 5), (0, EARLIEST_TIME, 5), (0, LATEST_TIME, 1), (1, LATEST_TIME, 5), (0, -3, 5)]) == [
        (0, 0, [3, 2, 1, 0]), (0, 0, [0]), (0, 0, [3]),
        (1, 3, []), (0, 35, [])]  # UNKNOWN_TOPIC_OR_PARTITION; UNSUPPORTED_VERSION below -2 in v0


def test_old_style_offsets_stop_at_the_high_watermark_for_consumers():
    """Kafka's ReplicaManager: offsets above the high watermark are replaced by it for a consumer, not a replica."""
    points = [(0, 1000), (10, 2000), (20, 3000), (30, 4000)]  # base offsets 0, 10, 20; log end 30
    assert old_style_offsets(points, LATEST_TIME, 10, high_watermark=None) == [30, 20, 10, 0]
    assert old_style_offsets(points, LATEST_TIME, 10, high_watermark=25) == [25, 20, 10, 0]
    assert old_style_offsets(points, LATEST_TIME, 3, high_watermark=15) == [15, 10]
    assert old_style_offsets(points, 2500, 10, high_watermark=30) == [10, 0]
    assert old_style_offsets(points, 999, 10, high_watermark=30) == []
    assert old_style_offsets(points, EARLIEST_TIME, 10, high_watermark=30) == [0]
