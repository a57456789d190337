"""Produce requests that real clients rarely send: each gets Kafka's error code for that partition only."""

from __future__ import annotations

import struct
import time
import zlib

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol import api
from odradek.records.batch import Record, decode_batch, encode_batch
from odradek.records.compression import MAX_DECOMPRESSED_BYTES, ZSTD

from .raw_client import RawClient

Produce = api("Produce").request
Fetch = api("Fetch").request


@pytest.fixture
def client(broker):
    raw = RawClient(broker.port)
    yield raw
    raw.close()


def create(broker, name: str, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(10)


def produce(client, topic: str, records: bytes, version: int = 9, acks: int = -1):
    answer = client.call("Produce", version, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)])])
    return answer.responses[0].partition_responses[0]


def fetch_batches(client, topic: str, offset: int = 0) -> list:
    answer = client.call("Fetch", 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(
                             topic=topic, partitions=[Fetch.FetchPartition(
                                 partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                         forgotten_topics_data=[], rack_id="")
    data = bytes(answer.responses[0].partitions[0].records)
    batches, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        batches.append(decode_batch(data[pos:pos + 12 + length]))
        pos += 12 + length
    return batches


def batch(*values: bytes, timestamp: int = 1_700_000_000_000) -> bytes:
    return encode_batch([Record(i, timestamp, None, v) for i, v in enumerate(values)])


def test_two_batches_for_one_partition_are_an_invalid_record(broker, client, topic_name):
    create(broker, topic_name)
    answer = produce(client, topic_name, batch(b"a") + batch(b"b"))
    assert answer.error_code == 87  # INVALID_RECORD
    assert produce(client, topic_name, batch(b"ok")).error_code == 0


def test_a_flipped_bit_is_a_corrupt_message(broker, client, topic_name):
    create(broker, topic_name)
    data = bytearray(batch(b"payload"))
    data[-3] ^= 0x01
    assert produce(client, topic_name, bytes(data)).error_code == 2  # CORRUPT_MESSAGE
    assert fetch_batches(client, topic_name) == []


def test_invalid_acks_and_unknown_partition(broker, client, topic_name):
    create(broker, topic_name)
    assert produce(client, topic_name, batch(b"x"), acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
    answer = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic_name, partition_data=[
            Produce.PartitionProduceData(index=7, records=batch(b"x"))])])
    assert answer.responses[0].partition_responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_old_message_format_v1_is_converted(broker, client, topic_name):
    create(broker, topic_name)
    # one magic-1 message: offset, size, crc, magic, attributes, timestamp, key, value
    body = struct.pack(">bbq", 1, 0, 1_650_000_000_000) + struct.pack(">i", 1) + b"k" + struct.pack(">i", 2) + b"v1"
    message = struct.pack(">I", zlib.crc32(body)) + body
    message_set = struct.pack(">qi", 0, len(message)) + message
    assert produce(client, topic_name, message_set, version=2).error_code == 0
    [(header, records)] = fetch_batches(client, topic_name)
    assert header.magic == 2
    assert [(r.key, r.value, r.timestamp) for r in records] == [(b"k", b"v1", 1_650_000_000_000)]


def test_log_append_time_topic_stamps_broker_time(broker, client, topic_name):
    create(broker, topic_name, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    answer = produce(client, topic_name, batch(b"a", b"b", timestamp=1))
    after = int(time.time() * 1000)
    assert answer.error_code == 0 and before <= answer.log_append_time_ms <= after
    [(header, records)] = fetch_batches(client, topic_name)
    assert header.timestamp_type == 1 and header.max_timestamp == answer.log_append_time_ms


def test_clients_cannot_append_to_internal_topics(broker, client, topic_name):
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic_name})
    consumer.subscribe([topic_name])  # makes the group coordinator create __consumer_offsets
    consumer.poll(1.0)
    consumer.close()
    answer = produce(client, "__consumer_offsets", batch(b"forged"))
    assert answer.error_code == 17  # INVALID_TOPIC_EXCEPTION


def test_a_decompression_bomb_is_refused_without_harm(broker, client, topic_name):
    """A compacted topic must decode a batch to check its keys; a few KB of zstd that inflate past the cap are a
    CORRUPT_MESSAGE for that partition, and the broker goes on serving."""
    create(broker, topic_name, {"cleanup.policy": "compact"})
    bomb = encode_batch([Record(0, 1_700_000_000_000, b"key", bytes(MAX_DECOMPRESSED_BYTES))], compression=ZSTD)
    assert len(bomb) < 100_000
    answer = produce(client, topic_name, bomb)
    assert answer.error_code == 2  # CORRUPT_MESSAGE
    assert "decompresses to more than" in answer.error_message
    good = encode_batch([Record(0, 1_700_000_000_000, b"key", b"value")], compression=ZSTD)
    assert produce(client, topic_name, good).error_code == 0
    [(header, records)] = fetch_batches(client, topic_name)
    assert [(r.key, r.value) for r in records] == [(b"key", b"value")]
