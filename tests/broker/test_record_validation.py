"""Every record of a produced batch is checked, fast and off the event loop (issues 12 and 13), against a real broker:
malformed records behind a valid CRC are refused and the log goes on at the right offset, a decompression bomb of
millions of keyed records does not stall other connections, pipelined appends to one partition keep their order
while their records are checked in a worker process, and keyless records on a compacted topic are named to the
client one by one (record_errors), as real clients expect them."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.handlers.produce import INLINE_RECORDS
from odradek.embedded import BrokerProcess
from odradek.protocol import api
from odradek.records.batch import Record, encode_batch
from odradek.records.compression import ZSTD

from records.test_validation import record_bytes, with_body  # tests/ is on sys.path (rootdir packages)
from .raw_client import RawClient
from .test_confluent_kafka import consume
from .test_produce_validation import create, fetch_batches, produce

INVALID_RECORD = 87
TS = 1_700_000_000_000


@pytest.fixture
def client(broker):
    raw = RawClient(broker.port)
    yield raw
    raw.close()


@pytest.mark.parametrize("codec", [0, ZSTD])
def test_records_that_disagree_with_their_header_are_refused_and_the_log_goes_on(broker, client, topic_name, codec):
    """The outside tester's batches: a valid CRC over an unterminated varint, a count of 0x7FFFFFFF over two records
    (the next batch landed at offset 2,147,483,656), out-of-order offset deltas. Each is INVALID_RECORD and the
    next good batch lands at offset 0."""
    create(broker, topic_name)
    for body, count in [(record_bytes(0) + b"\xff\xff\xff", 2), (record_bytes(0) + record_bytes(1), 0x7FFFFFFF),
                        (record_bytes(1) + record_bytes(0), 2)]:
        answer = produce(client, topic_name, with_body(body, count, compression=codec))
        assert answer.error_code == INVALID_RECORD, answer
    answer = produce(client, topic_name, encode_batch([Record(0, TS, b"k", b"good")], compression=codec))
    assert (answer.error_code, answer.base_offset) == (0, 0)
    [(header, records)] = fetch_batches(client, topic_name)
    assert header.base_offset == 0 and [r.value for r in records] == [b"good"]


def test_size_limits_come_before_the_records_are_walked(broker, client, topic_name):
    """Kafka checks max.message.bytes before its LogValidator: an oversized batch is MESSAGE_TOO_LARGE whatever
    its records hold, and the broker does not walk them first."""
    create(broker, topic_name, {"max.message.bytes": "10000"})
    oversized = with_body(record_bytes(0) * 2000, 0x7FFFFFFF)
    assert produce(client, topic_name, oversized).error_code == 10  # MESSAGE_TOO_LARGE


def test_each_record_timestamp_is_checked(broker, client, topic_name):
    """message.timestamp.{before,after}.max.ms apply to every record, as in Kafka: a record older than its batch's
    first one (which the batch header alone does not show) or ahead of now by more than allowed is INVALID_TIMESTAMP,
    named in record_errors, and nothing of the batch is written; one within both bounds is."""
    create(broker, topic_name, {"message.timestamp.before.max.ms": "3600000",
                                "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    batch = encode_batch([Record(0, now, b"k", b"a"), Record(1, now - 7_200_000, b"k", b"b"),
                          Record(2, now + 600_000, b"k", b"c")])
    answer = produce(client, topic_name, batch)
    assert answer.error_code == 32  # INVALID_TIMESTAMP
    assert [e.batch_index for e in answer.record_errors] == [1, 2]
    assert answer.record_errors[0].batch_index_error_message.startswith(f"Timestamp {now - 7_200_000} of message")
    assert answer.record_errors[1].batch_index_error_message.startswith(f"Timestamp {now + 600_000} of message")
    answer = produce(client, topic_name, encode_batch([Record(0, now - 60_000, b"k", b"d")]))
    assert answer.error_code == 0 and answer.base_offset == 0


@pytest.mark.parametrize("topic_type", ["CreateTime", "LogAppendTime"])
def test_a_producer_cannot_set_log_append_time(broker, client, topic_name, topic_type):
    """Only the broker stamps LogAppendTime: a produced batch that says so is INVALID_TIMESTAMP for every record,
    as Kafka answers, and nothing is appended (else a CreateTime topic would keep the producer's claimed times)."""
    create(broker, topic_name, {"message.timestamp.type": topic_type})
    now = int(time.time() * 1000)
    batch = encode_batch([Record(0, now, b"k", b"a"), Record(1, now, b"k", b"b")], timestamp_type=1)
    answer = produce(client, topic_name, batch)
    assert answer.error_code == 32  # INVALID_TIMESTAMP
    assert [e.batch_index for e in answer.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in answer.record_errors[0].batch_index_error_message
    assert fetch_batches(client, topic_name) == []


def many_keyed_records(count: int) -> bytes:
    """`count` records of 12 bytes (key b"k", null value; offset deltas as 5-byte varints so every record has one
    size), built with numpy; the last one has no key."""
    records = np.zeros((count, 12), np.uint8)
    records[:, 0] = 22  # length 11, zigzag
    doubled = np.arange(count, dtype=np.uint64) * np.uint64(2)  # zigzag offset deltas
    for byte in range(5):
        records[:, 3 + byte] = ((doubled >> np.uint64(7 * byte)) & np.uint64(0x7F)).astype(np.uint8)
        records[:, 3 + byte] |= 0x80 if byte < 4 else 0
    records[:, 8:12] = (2, ord("k"), 1, 0)  # key length 1, key, value length -1, no headers
    body = records.tobytes()
    return body[:-12] + bytes([20, 0, 0]) + body[-9:-4] + bytes([1, 1, 0])  # the last: key length -1


def test_a_bomb_of_keyed_records_does_not_stall_other_connections(broker, client, topic_name):
    """2.2 MB of zstd inflating to 32 MB, 2.8 million keyed records, one without a key, sent to a compacted topic:
    refused with that record named, while ApiVersions on another connection keeps answering in under 50 ms."""
    create(broker, topic_name, {"cleanup.policy": "compact", "max.message.bytes": str(8 << 20)})
    count = (32 << 20) // 12
    batch = with_body(many_keyed_records(count), count, compression=ZSTD)
    assert len(batch) < (8 << 20)
    latencies = []
    answered = threading.Event()

    def ask_api_versions():
        other = RawClient(broker.port)
        while not answered.is_set():
            started = time.perf_counter()
            other.call("ApiVersions", 3, client_software_name="t", client_software_version="1")
            latencies.append(time.perf_counter() - started)
            time.sleep(0.005)
        other.close()

    asker = threading.Thread(target=ask_api_versions)
    asker.start()
    time.sleep(0.1)
    started = time.perf_counter()
    answer = produce(client, topic_name, batch)
    refused_after = time.perf_counter() - started
    answered.set()
    asker.join()
    assert answer.error_code == INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (count - 1, f"Compacted topic cannot accept message without key in topic partition {topic_name}-0")]
    assert refused_after > 0.1, "the check was too quick to tell whether the loop kept serving"
    assert len(latencies) >= 5 and max(latencies) < 0.05, (refused_after, sorted(latencies)[-5:])


def test_a_request_checks_only_so_many_records_on_the_event_loop(broker, client, topic_name):
    """One Produce request for 4 partitions, each a batch of INLINE_RECORDS tiny records of scattered sizes: only as
    many records as one request may have checked on the event loop are (one partition's), the rest go to the worker
    processes, so that a request's partitions cannot add up to a long stall of every other connection. (Timed from
    outside, that stall is shorter than what the loop loses to its own busy workers on a loaded two-core machine,
    and the workers' CPU for 3 walks is below what /proc counts, so the test counts the bytes the workers read:
    the other 3 partitions' batches.) Every partition is appended."""
    partitions = 4
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    # a batch of INLINE_RECORDS records is past the default max.message.bytes (1 MB)
    admin.create_topics([NewTopic(topic_name, partitions, 1, config={"max.message.bytes": str(8 << 20)})]
                        )[topic_name].result(10)
    sizes = np.random.default_rng(7).integers(0, 4, INLINE_RECORDS)
    batch = encode_batch([Record(i, TS, b"", b"x" * int(size)) for i, size in enumerate(sizes)])
    request = api("Produce").request

    def produce_to_every_partition():
        answer = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            request.TopicProduceData(name=topic_name, partition_data=[
                request.PartitionProduceData(index=index, records=batch) for index in range(partitions)])])
        assert [p.error_code for p in answer.responses[0].partition_responses] == [0] * partitions

    produce_to_every_partition()  # starts the workers (an interpreter's start reads files too)
    wait_until_workers_idle(broker)
    before = worker_bytes_read(broker)
    produce_to_every_partition()
    read = sum(worker_bytes_read(broker).values()) - sum(before.values())
    assert (partitions - 1) * len(batch) <= read < partitions * len(batch), (read, len(batch))


def test_pipelined_appends_to_one_partition_keep_their_order(broker, client, topic_name):
    """An idempotent producer pipelines: a large compressed batch (checked in a worker process) and a small plain
    one right behind it (checked inline) on one connection. The small one must not be appended first: both
    succeed, in order, and the producer's sequence numbers stay in order."""
    create(broker, topic_name)
    answer = client.call("InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000,
                         producer_id=-1, producer_epoch=-1)
    producer_id, epoch = answer.producer_id, answer.producer_epoch
    large_count = 300_000
    large = encode_batch([Record(i, TS, b"k", b"v" * 20) for i in range(large_count)], compression=ZSTD,
                         producer_id=producer_id, producer_epoch=epoch, base_sequence=0)
    small = encode_batch([Record(0, TS, b"k", b"last")], producer_id=producer_id, producer_epoch=epoch,
                         base_sequence=large_count)
    answers = client.pipeline("Produce", 9, [
        dict(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[produce_data(topic_name, records)])
        for records in (large, small)])
    results = [answer.responses[0].partition_responses[0] for answer in answers]
    assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, large_count)]


def produce_data(topic: str, records: bytes):
    request = api("Produce").request
    return request.TopicProduceData(name=topic, partition_data=[request.PartitionProduceData(index=0,
                                                                                             records=records)])


class ClientLog(logging.Logger):
    """A logger for confluent-kafka's `logger` setting that keeps librdkafka's lines."""

    def __init__(self):
        super().__init__("librdkafka", logging.DEBUG)
        self.lines: list[str] = []

    def handle(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_idempotent_producer_with_mixed_batches_keeps_every_record_in_order(broker, topic_name):
    """confluent-kafka, enable.idempotence with max.in.flight=5, zstd: bursts of 10,000 records in 100 KB batches,
    each followed by one record alone, to one partition; no
    OUT_OF_ORDER_SEQUENCE, every record once and in order. (librdkafka did not pipeline these tightly enough to
    catch appends out of order here; test_pipelined_appends_to_one_partition_keep_their_order does.)"""
    create(broker, topic_name)
    client_log = ClientLog()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "max.in.flight.requests.per.connection": 5, "linger.ms": 0, "compression.type": "zstd",
                         "queue.buffering.max.messages": 1_000_000, "batch.size": 100_000,
                         "debug": "eos,msg"},
                        logger=client_log)
    errors = []
    sent = []

    def send(value: bytes) -> None:
        sent.append(value)
        producer.produce(topic_name, value, partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)

    for burst in range(10):
        for index in range(10_000):
            send(b"%02d-%04d" % (burst, index) + b"x" * 100)
        producer.poll(0)
        time.sleep(0.002)
        send(b"%02d-alone" % burst)
        producer.poll(0)
        time.sleep(0.002)
    assert producer.flush(60) == 0
    assert errors == []
    # librdkafka retries a batch refused as out of order (the earlier one may yet land), so only its log tells
    assert not [line for line in client_log.lines if "OUT_OF_ORDER" in line.upper().replace(" ", "_")]
    assert [message.value() for message in consume(broker, topic_name, 1, len(sent), 30)] == sent


def worker_cpu_seconds(broker) -> dict[int, float]:
    """CPU seconds used so far by each of the broker's running child processes (its validation workers)."""
    pid = broker.process.pid
    used = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in open(f"/proc/{pid}/task/{task}/children").read().split():
            fields = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()
            used[int(child)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def worker_bytes_read(broker) -> dict[int, int]:
    """Bytes read so far by each of the broker's running child processes (its validation workers: their requests)."""
    pid = broker.process.pid
    read = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in open(f"/proc/{pid}/task/{task}/children").read().split():
            fields = dict(line.split(": ") for line in open(f"/proc/{child}/io").read().splitlines())
            read[int(child)] = int(fields["rchar"])
    return read


def wait_until_workers_idle(broker) -> None:
    """Until the workers (started by the first batch that needs one) have loaded and sit idle: their CPU time stops
    growing."""
    deadline = time.monotonic() + 10
    used = worker_cpu_seconds(broker)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        used, before = worker_cpu_seconds(broker), used
        if used and used == before:
            return


def test_client_sized_batches_are_checked_without_a_worker(tmp_path, topic_name):
    """A client's 1 MB batches (8,000 keyed 100-byte records, plain and zstd) are checked by the broker itself: a
    hop to a worker process cost more CPU (pickling and piping every byte) than the check. A broker that sees only
    such batches starts no worker process at all (each costs an interpreter's start and 24 MB; they were started at
    the first Produce, 0.11 s of CPU that a short run's CPU per record showed); the records are still checked (one
    keyless record is refused)."""
    with BrokerProcess(tmp_path / "data") as fresh:
        client = RawClient(fresh.port)
        try:
            create(fresh, topic_name, {"cleanup.policy": "compact"})
            plain = encode_batch([Record(i, TS, b"key-%05d" % i, b"v" * 100) for i in range(8_000)])
            packed = encode_batch([Record(i, TS, b"key-%05d" % i, b"v" * 100) for i in range(8_000)],
                                  compression=ZSTD)
            assert 900_000 < len(plain) < 1_000_000
            for _ in range(10):
                assert produce(client, topic_name, plain).error_code == 0
                assert produce(client, topic_name, packed).error_code == 0
            keyless = encode_batch([Record(i, TS, None if i == 7_999 else b"k", b"v" * 100) for i in range(8_000)])
            assert produce(client, topic_name, keyless).error_code == INVALID_RECORD
            assert worker_cpu_seconds(fresh) == {}
        finally:
            client.close()


def test_a_worker_that_died_while_idle_is_replaced(broker, client, topic_name):
    """A validation worker killed between requests (the OOM killer, an operator) costs no request an error: the
    next batch that needs a worker gets a fresh one."""
    create(broker, topic_name)
    large = encode_batch([Record(i, TS, b"k", b"v" * 20) for i in range(20_000)], compression=ZSTD)
    assert produce(client, topic_name, large).error_code == 0
    pid = broker.process.pid
    workers = [int(child) for task in os.listdir(f"/proc/{pid}/task")
               for child in open(f"/proc/{pid}/task/{task}/children").read().split()]
    assert workers
    for worker in workers:
        os.kill(worker, signal.SIGKILL)
    time.sleep(0.5)
    answer = produce(client, topic_name, large)
    assert (answer.error_code, answer.base_offset) == (0, 20_000)


def test_keyless_records_on_a_compacted_topic_are_failed_one_by_one(broker, topic_name):
    """Produce v8+ carries record_errors: kafka-python (as Java's producer) fails the keyless record with the
    broker's message for it and the keyed records of the same batch as collateral of it."""
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError, KafkaError as PythonClientError

    create(broker, topic_name, {"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=500, retries=0)
    futures = [producer.send(topic_name, b"v%d" % index, key=key, partition=0)
               for index, key in enumerate([b"a", None, b"c"])]
    producer.flush(30)
    producer.close()
    errors = [future.exception for future in futures]
    assert type(errors[1]) is InvalidRecordError
    assert str(errors[1]) == ("[Error 87] InvalidRecordError: Compacted topic cannot accept message without key "
                              f"in topic partition {topic_name}-0")
    for collateral in (errors[0], errors[2]):
        assert type(collateral) is PythonClientError
        assert "part of a batch which had one more more invalid records" in str(collateral)
