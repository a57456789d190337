"""The log compaction guarantees of Kafka's design, against a real broker process and a real client (confluent-kafka).

The broker runs the cleaner every 100 ms and the topics make it run at once (tiny segments, a 1% dirty ratio), so
each guarantee is watched while compaction really happens: a consumer at the head sees every message; order and
offsets never change; a consumer from the start sees every key's final value and, within delete.retention.ms, the
delete markers; a broker killed in the middle of a cleaning comes back consistent; keyless records are refused;
__consumer_offsets stays small under many commits.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess, wait_until

CLEANER_SETTINGS = {
    "log.cleaner.backoff.ms": 100,
    "log.cleaner.min.cleanable.ratio": 0.01,
    "log.segment.delete.delay.ms": 1000,
    "log.retention.check.interval.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.segment.bytes": 16384,
}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("compaction") / "data", settings=CLEANER_SETTINGS)
    process.start()
    yield process
    process.stop()


def create_topic(broker, name: str, **config) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    client.create_topics([NewTopic(name, 1, 1, config={**COMPACTED, **config})])[name].result(10)


def produce(broker, topic: str, pairs) -> dict[int, tuple]:
    """Send (key, value) pairs in order; {offset: (key, value)} as the broker acknowledged them."""
    acknowledged = {}

    def on_delivery(error, message):
        assert error is None, error
        acknowledged[message.offset()] = (message.key(), message.value())

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True, "batch.size": 8192})  # batches well under segment.bytes
    for key, value in pairs:
        producer.produce(topic, value, key, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acknowledged


def read_all(broker, topic: str, timeout: float = 20.0,
             isolation: str = "read_committed") -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from the start to the high watermark, at the given isolation level."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "readers",
                         "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= high:
                        return records
                    continue
                raise AssertionError(message.error())
            records.append((message.offset(), message.key(), message.value()))
        raise AssertionError(f"read {len(records)} records of {topic} before the timeout")
    finally:
        consumer.close()


def final_values(acknowledged: dict[int, tuple]) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of its last acknowledged record."""
    return {key: (offset, value) for offset, (key, value) in sorted(acknowledged.items())}


def assert_compacted_view(records, acknowledged) -> None:
    """Offsets increase and are the ones the broker acknowledged for these very records, and every key's final
    value is there, as the last record of that key."""
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    assert all(acknowledged[offset] == (key, value) for offset, key, value in records)
    seen_last = {key: (offset, value) for offset, key, value in records}
    for key, (offset, value) in final_values(acknowledged).items():
        if value is not None:
            assert seen_last[key] == (offset, value)


def updates(rounds: int, keys: int, tag: str = "v", value_size: int = 60):
    return [(b"key-%d" % index, f"{tag}{round_}-{index}".encode().ljust(value_size, b"."))
            for round_ in range(rounds) for index in range(keys)]


def test_head_consumer_sees_everything_and_a_consumer_from_the_start_the_final_values(broker, topic_name):
    create_topic(broker, topic_name, **{"min.compaction.lag.ms": "10000"})
    head: list = []
    stop = threading.Event()

    def consume_at_head():
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "head",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        while not stop.is_set():
            for message in consumer.consume(1000, 0.2):
                assert not message.error(), message.error()
                head.append((message.offset(), message.key(), message.value()))
        consumer.close()

    reader = threading.Thread(target=consume_at_head)
    reader.start()
    try:
        acknowledged = produce(broker, topic_name, updates(rounds=30, keys=300))
        assert wait_until(lambda: len(head) >= len(acknowledged), timeout=20)
    finally:
        stop.set()
        reader.join()
    assert [offset for offset, _, _ in head] == list(range(len(acknowledged)))  # every message, in order
    assert all(acknowledged[offset] == (key, value) for offset, key, value in head)
    compacted = wait_until(lambda: (records := read_all(broker, topic_name)) and len(records) < 3000 and records,
                           timeout=40)
    assert compacted, "the topic was not compacted"
    assert_compacted_view(compacted, acknowledged)


def test_delete_markers_are_seen_within_delete_retention_and_then_go(broker, topic_name):
    create_topic(broker, topic_name, **{"delete.retention.ms": "5000"})
    acknowledged = produce(broker, topic_name, updates(rounds=2, keys=100))
    acknowledged.update(produce(broker, topic_name, [(b"key-%d" % index, None) for index in range(50)]))
    acknowledged.update(produce(broker, topic_name, [(b"filler-%d" % index, b"x" * 100) for index in range(400)]))
    deleted = {b"key-%d" % index for index in range(50)}

    def cleaned_with_markers():
        records = read_all(broker, topic_name)
        values_of_deleted = [value for _, key, value in records if key in deleted]
        return records if values_of_deleted and all(value is None for value in values_of_deleted) else None

    records = wait_until(cleaned_with_markers, timeout=30, interval=0.2)
    seen_markers_at = time.monotonic()
    assert records, "the old values of deleted keys were not compacted away"
    assert {key for _, key, value in records if value is None} == deleted  # every marker, within the retention
    assert_compacted_view(records, acknowledged)
    assert wait_until(lambda: not [key for _, key, _ in read_all(broker, topic_name) if key in deleted],
                      timeout=30, interval=0.5), "delete markers outlived delete.retention.ms"
    assert time.monotonic() - seen_markers_at > 2  # they went with their horizon, not at the first cleaning
    records = read_all(broker, topic_name)
    assert_compacted_view(records, acknowledged)
    assert {key for _, key, _ in records if key.startswith(b"key-")} == {b"key-%d" % i for i in range(50, 100)}


def test_a_keyless_record_is_refused_by_a_compacted_topic(broker, topic_name):
    create_topic(broker, topic_name)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
    producer.produce(topic_name, b"no key", on_delivery=lambda error, message: errors.append(error))
    assert producer.flush(10) == 0
    producer.produce(topic_name, b"value", b"key", on_delivery=lambda error, message: errors.append(error))
    assert producer.flush(10) == 0
    assert errors[0].code() == KafkaError.INVALID_RECORD and errors[1] is None


def test_consumer_offsets_stay_small_under_many_commits(broker, topic_name):
    create_topic(broker, topic_name, **{"cleanup.policy": "delete"})
    produce(broker, topic_name, [(b"k", b"v")])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"committer-{topic_name}",
                         "enable.auto.commit": False})
    try:
        for offset in range(3000):
            consumer.commit(offsets=[TopicPartition(topic_name, 0, offset)], asynchronous=False)
        offsets_dir = broker.data_dir / "__consumer_offsets-0"

        def log_bytes():
            total = 0
            for path in offsets_dir.glob("*.log"):
                try:
                    total += path.stat().st_size
                except FileNotFoundError:  # swapped out by the cleaner between the listing and the stat
                    pass
            return total

        # 3000 commit records are several hundred KB; compacted, the partition is its active segment and a little
        assert wait_until(lambda: log_bytes() < 40_000, timeout=30, interval=0.5), log_bytes()
        assert consumer.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == 2999
    finally:
        consumer.close()


def test_a_broker_killed_while_cleaning_recovers_a_consistent_log(tmp_path, topic_name):
    # throttled so that a cleaning of this log takes a second or two, and a kill lands inside it
    broker = BrokerProcess(tmp_path / "data", settings={**CLEANER_SETTINGS, "log.cleaner.backoff.ms": 50,
                                                        "log.cleaner.io.max.bytes.per.second": 1_000_000})
    broker.start()
    acknowledged = {}
    kills_during_cleaning = 0
    rng = random.Random(5)
    try:
        create_topic(broker, topic_name, **{"segment.bytes": "262144"})
        for round_ in range(5):
            started_cleanings = broker.log_tail(10_000).count("cleaning ")
            acknowledged.update(produce(broker, topic_name, updates(rounds=4, keys=2000, tag=f"r{round_}-")))
            wait_until(lambda: broker.log_tail(10_000).count("cleaning ") > started_cleanings, timeout=10)
            time.sleep(rng.uniform(0, 0.4))
            lines = broker.log_tail(10_000).splitlines()
            last_start = max((n for n, line in enumerate(lines) if "cleaning " in line), default=-1)
            last_end = max((n for n, line in enumerate(lines) if "cleaned " in line), default=-1)
            broker.kill()
            kills_during_cleaning += last_start > last_end
            broker.start()
        partition_dir = broker.data_dir / f"{topic_name}-0"
        assert not [path.name for path in partition_dir.iterdir() if path.suffix in (".cleaned", ".swap")]
        assert_compacted_view(read_all(broker, topic_name, timeout=60), acknowledged)
        assert wait_until(lambda: len(read_all(broker, topic_name, timeout=60)) < 10_000, timeout=60, interval=1)
        assert_compacted_view(read_all(broker, topic_name, timeout=60), acknowledged)
    finally:
        broker.stop()
    assert kills_during_cleaning >= 2, kills_during_cleaning
