"""A pipelining producer's requests of one receive are written together (the log's DeferredWrites window): what it
is told was written is in the file, whatever comes next: a fetch behind them in the same send, segments rolling in
between, kill -9, a disk that refuses the write. Large writes land in disk space reserved ahead of the segment's end,
which a clean stop gives back."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess
from odradek.protocol import RequestHeader, api, decode_response, encode_request
from odradek.records.batch import Record, decode_batch, encode_batch, whole_batches
from odradek.storage.segment import RESERVE_CHUNK_BYTES

from .raw_client import RawClient, read_frame
from .test_confluent_kafka import consume

Produce = api("Produce")
Fetch = api("Fetch")
ListOffsets = api("ListOffsets")
TS = 1_700_000_000_000


@pytest.fixture
def own_broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", settings={"log.segment.bytes": 16 * 1024})
    process.start()
    yield process
    process.close()


def create(broker, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(10)


# Large records: one Produce of one makes a window the log manager's writer thread writes (WRITER_THREAD_MIN_BYTES);
# their topic has 1 MiB segments (rolling every third record, with writes in flight) and 4 KiB indexes (preallocated
# below the file size limit the refusal test sets).
LARGE_VALUE = 300_000
LARGE_TOPIC = {"segment.bytes": str(1 << 20), "segment.index.bytes": "4096"}


def produce_frame(correlation_id: int, topic: str, partition: int, value: bytes) -> bytes:
    records = encode_batch([Record(0, TS, None, value)])
    header = RequestHeader(api_key=Produce.key, api_version=9, correlation_id=correlation_id, client_id="raw-test")
    return encode_request(header, Produce.request(
        transactional_id=None, acks=1, timeout_ms=5000, topic_data=[Produce.request.TopicProduceData(
            name=topic, partition_data=[Produce.request.PartitionProduceData(index=partition, records=records)])]))


def fetch_frame(correlation_id: int, topic: str, partition: int, offset: int, max_wait_ms: int = 0,
                min_bytes: int = 0) -> bytes:
    header = RequestHeader(api_key=Fetch.key, api_version=11, correlation_id=correlation_id, client_id="raw-test")
    return encode_request(header, Fetch.request(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=8 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[Fetch.request.FetchTopic(topic=topic, partitions=[Fetch.request.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=8 << 20)])],
        forgotten_topics_data=[], rack_id=""))


def read_back(broker, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record's value, per partition, from the start to the end."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    try:
        for _ in range(200):
            for message in consumer.consume(1000, 0.2):
                if message.error():
                    assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                    at_end.add(message.partition())
                else:
                    values[message.partition()].append(message.value())
            if len(at_end) == partitions:
                break
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("values, configs, fetch_from", [
    pytest.param([(index // 30 % 2, b"v%04d-" % index + b"x" * 290) for index in range(300)], None, 145,
                 id="300-bytes-in-16KiB-segments"),
    pytest.param([(index // 2 % 2, b"v%04d-" % index + b"x" * LARGE_VALUE) for index in range(16)], LARGE_TOPIC, 6,
                 id="300KB-by-the-writer-thread"),
])
def test_pipelined_appends_a_fetch_behind_them_and_kill_9(own_broker, values, configs, fetch_from):
    """One-record Produce requests to two partitions in runs (as a sticky partitioner sends them), and a Fetch of
    partition 1's last records right behind them, all in one send: 300 of 300 bytes, so that segments of 16 KiB
    roll inside one receive, or 16 of 300 KB, each written by the writer thread while the next are received and
    segments roll. Every append answered in order with dense offsets, the fetch gets those records (its read writes
    what the log holds first, or waits for the writer thread), and after kill -9 right after the answers all of
    them are there."""
    create(own_broker, "together", 2, configs)
    frames = [produce_frame(index + 1, "together", partition, value) for index, (partition, value) in enumerate(values)]
    frames.append(fetch_frame(len(values) + 1, "together", 1, fetch_from))
    client = RawClient(own_broker.port)
    client.sock.sendall(b"".join(frames))
    offsets = {0: [], 1: []}
    for index, (partition, _) in enumerate(values):
        correlation_id, answer = decode_response(Produce.key, 9, read_frame(client.sock))
        assert correlation_id == index + 1
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0
        offsets[partition].append(result.base_offset)
    correlation_id, fetched = decode_response(Fetch.key, 11, read_frame(client.sock))
    assert correlation_id == len(values) + 1
    records = bytes(fetched.responses[0].partitions[0].records)
    fetched_values = [record.value for _, batch in whole_batches(records) for record in decode_batch(batch)[1]]
    expected = {p: [value for partition, value in values if partition == p] for p in (0, 1)}
    assert offsets == {p: list(range(len(expected[p]))) for p in (0, 1)}
    assert fetched_values == expected[1][fetch_from:]
    client.close()
    own_broker.kill()
    own_broker.start()
    assert read_back(own_broker, "together", 2) == expected


def test_a_consumer_waiting_at_the_log_end_gets_records_once_the_writer_thread_has_written_them(own_broker):
    """A consumer's long poll at the log end is woken by a producer's 900 KB record, which the writer thread writes
    while the event loop goes on: the Fetch reads what is in the file without waiting for the write, and is answered
    as soon as the write is done, not at the end of its max_wait_ms."""
    create(own_broker, "tailed", 1, {"segment.bytes": str(8 << 20)})
    producer, consumer = RawClient(own_broker.port), RawClient(own_broker.port)
    for offset in range(8):
        value = b"t%02d-" % offset + b"x" * 900_000
        consumer.sock.sendall(fetch_frame(offset + 1, "tailed", 0, offset, max_wait_ms=20_000, min_bytes=1))
        time.sleep(0.1)  # the fetch waits at the log end
        started = time.monotonic()
        producer.sock.sendall(produce_frame(offset + 1, "tailed", 0, value))
        _, produced = decode_response(Produce.key, 9, read_frame(producer.sock))
        assert produced.responses[0].partition_responses[0].base_offset == offset
        correlation_id, fetched = decode_response(Fetch.key, 11, read_frame(consumer.sock))
        assert time.monotonic() - started < 5
        records = bytes(fetched.responses[0].partitions[0].records)
        assert [record.value for _, batch in whole_batches(records) for record in decode_batch(batch)[1]] == [value]
    producer.close()
    consumer.close()


@pytest.mark.parametrize("values, configs, room", [
    pytest.param([b"refused-%03d-" % index + b"r" * 480 for index in range(30)], None, 2000, id="500-bytes"),
    pytest.param([b"refused-%03d-" % index + b"r" * LARGE_VALUE for index in range(8)], LARGE_TOPIC,
                 LARGE_VALUE * 5 // 2, id="300KB-by-the-writer-thread"),
])
def test_a_disk_refusing_the_write_acknowledges_nothing_it_did_not_write(own_broker, values, configs, room):
    """The broker's file size limit (RLIMIT_FSIZE, set with prlimit: the kernel refuses writes past it with
    EFBIG) stops pipelined requests' writes part way: one receive's of 30 small records, or the writer thread's of
    8 large ones. Whatever was answered as written must be in the log after
    kill -9, taken while the limit still holds (bytes the broker still held in memory die with it). Meanwhile a
    Fetch of that partition, whose read must first write what the log holds and cannot, answers KAFKA_STORAGE_ERROR
    for it (the connection stays open), and the same Fetch's other partition its records; so does a ListOffsets
    search by timestamp."""
    create(own_broker, "refused", 2, configs)
    client = RawClient(own_broker.port)
    client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        Produce.request.TopicProduceData(name="refused", partition_data=[Produce.request.PartitionProduceData(
            index=1, records=encode_batch([Record(0, TS, None, b"other")]))])])
    first = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        Produce.request.TopicProduceData(name="refused", partition_data=[Produce.request.PartitionProduceData(
            index=0, records=encode_batch([Record(0, TS, None, b"first-" + b"f" * 8000)]))])])
    assert first.responses[0].partition_responses[0].error_code == 0
    segment = sorted((own_broker.data_dir / "refused-0").glob("*.log"))[-1]
    limit = segment.stat().st_size + room
    pid = own_broker.process.pid
    subprocess.run(["prlimit", f"--pid={pid}", f"--fsize={limit}:"], check=True)
    client.sock.sendall(b"".join(produce_frame(index + 100, "refused", 0, value) for index, value in enumerate(values)))
    acknowledged = []
    try:
        for value in values:
            _, answer = decode_response(Produce.key, 9, read_frame(client.sock))
            if answer.responses[0].partition_responses[0].error_code == 0:
                acknowledged.append(value)
    except (ConnectionError, OSError):
        pass  # closed without the answers it could not stand behind
    client.close()
    assert len(acknowledged) < len(values)  # the limit did refuse some
    reader = RawClient(own_broker.port)
    fetched = reader.call("Fetch", 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20,
                          isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                          topics=[Fetch.request.FetchTopic(topic="refused", partitions=[
                              Fetch.request.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                              for p in (0, 1)])])
    answers = {answer.partition_index: answer for answer in fetched.responses[0].partitions}
    assert answers[0].error_code == 56  # KAFKA_STORAGE_ERROR
    assert answers[1].error_code == 0
    assert [record.value for _, batch in whole_batches(bytes(answers[1].records))
            for record in decode_batch(batch)[1]] == [b"other"]
    listed = reader.call("ListOffsets", 7, replica_id=-1, isolation_level=0, topics=[
        ListOffsets.request.ListOffsetsTopic(name="refused", partitions=[
            ListOffsets.request.ListOffsetsPartition(partition_index=p, timestamp=TS) for p in (0, 1)])])
    assert [(answer.error_code, answer.offset) for answer in listed.topics[0].partitions] == [(56, -1), (0, 0)]
    reader.close()
    own_broker.kill()
    own_broker.start()
    stored = read_back(own_broker, "refused", 1)[0]
    assert stored[0].startswith(b"first-")
    assert [value for value in stored[1:] if value in acknowledged] == acknowledged
    assert set(acknowledged) <= set(stored)


def test_a_lone_request_the_disk_refuses_is_answered_kafka_storage_error_and_the_connection_stays(own_broker):
    """A request alone in its receive (one in flight) appends with its own write, outside any window: when the disk
    refuses that write, its partition is answered KAFKA_STORAGE_ERROR (retriable) on a connection that stays open,
    nothing of it is stored, and once the disk takes writes again the next request is written after the records
    acknowledged before, the refused bytes left in the file overwritten."""
    create(own_broker, "lone", 1)
    client = RawClient(own_broker.port)

    def produce(value: bytes) -> int:
        answer = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            Produce.request.TopicProduceData(name="lone", partition_data=[Produce.request.PartitionProduceData(
                index=0, records=encode_batch([Record(0, TS, None, value)]))])])
        return answer.responses[0].partition_responses[0].error_code

    assert produce(b"before") == 0
    segment = sorted((own_broker.data_dir / "lone-0").glob("*.log"))[-1]
    pid = own_broker.process.pid
    subprocess.run(["prlimit", f"--pid={pid}", f"--fsize={segment.stat().st_size + 100}:"], check=True)
    assert produce(b"refused-" + b"r" * 8000) == 56  # KAFKA_STORAGE_ERROR, answered: not a closed connection
    assert produce(b"refused-" + b"r" * 8000) == 56
    subprocess.run(["prlimit", f"--pid={pid}", "--fsize=unlimited:"], check=True)
    assert produce(b"after") == 0
    client.close()
    assert read_back(own_broker, "lone", 1)[0] == [b"before", b"after"]
    own_broker.kill()
    own_broker.start()
    assert read_back(own_broker, "lone", 1)[0] == [b"before", b"after"]


def test_large_writes_land_in_space_reserved_ahead_which_a_clean_stop_gives_back(tmp_path):
    """A batching producer's large writes reserve the active segment's disk blocks ahead of its end (cheaper writes,
    Segment.write) without the file's size showing them, and every acknowledged record reads back; the clean stop
    frees what the segment did not fill."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create(broker, "reserved", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 20,
                             "batch.size": 1_000_000})
        acknowledged = []
        report = lambda error, message: acknowledged.append(message.offset()) if error is None else None
        values = [b"%07d" % index + b"x" * 93 for index in range(60_000)] + [b"last".ljust(500_000, b"x")]
        for value in values:  # the last one, alone in its write, is a large write
            while True:
                try:
                    producer.produce("reserved", value, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(30) == 0
        assert len(acknowledged) == len(values)
        segment = tmp_path / "data" / "reserved-0" / "00000000000000000000.log"
        size = os.path.getsize(segment)
        assert os.stat(segment).st_blocks * 512 >= (size // RESERVE_CHUNK_BYTES + 1) * RESERVE_CHUNK_BYTES
        assert [message.value() for message in consume(broker, "reserved", 1, len(values), 30)] == values
    finally:
        exit_code = broker.stop()
    assert exit_code == 0
    assert os.path.getsize(segment) == size
    assert os.stat(segment).st_blocks * 512 < size + 64 * 1024
