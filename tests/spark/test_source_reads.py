"""What format("odradek") reads is what Kafka's consumer delivers: batches a real client compressed with each codec,
transactions under read_committed and read_uncommitted, a compacted topic's survivors, LogAppendTime, and the
failOnDataLoss rules. A task's own errors and retries (an unknown topic, a broker that is down or restarts in the
middle of a range, many Fetch answers per range) are driven through read_range directly, where they can be staged.

The reference for "what Kafka's consumer delivers" is confluent-kafka's Consumer reading the same partition.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.embedded import BrokerProcess, wait_until
from odradek.records.batch import whole_batches
from odradek.spark import fetcher
from odradek.spark.fetcher import read_range
from odradek.spark.kafka_io import BrokerUnavailableError, OffsetRange, TopicNotFoundError

from .helpers import create_topic, produce_transactions, read

CLEANER_SETTINGS = {"log.cleaner.backoff.ms": 100, "log.cleaner.min.cleanable.ratio": 0.01,
                    "group.initial.rebalance.delay.ms": 0}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]  # in attribute-bit order
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker whose cleaner runs every 100 ms, so that compacted topics really get compacted during the module."""
    with BrokerProcess(tmp_path_factory.mktemp("reads") / "data", settings=CLEANER_SETTINGS) as process:
        yield process


def consumed(broker, topic: str, start: int = 0, isolation: str = "read_committed") -> list[tuple]:
    """(offset, key, value, headers) of every record confluent-kafka's Consumer delivers from `start` to the end."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "reference",
                         "enable.partition.eof": True, "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, start)])
    rows = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of partition within 10 s"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return rows
            rows.append((message.offset(), message.key(), message.value(), message.headers()))
    finally:
        consumer.close()


def spark_rows(df) -> list[tuple]:
    """(offset, key, value, headers) of each row; headers None when not read or absent."""
    rows = [row.asDict() for row in df.collect()]
    return sorted((r["offset"], r["key"], r["value"], r.get("headers") and [(h.key, h.value) for h in r["headers"]])
                  for r in rows)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_batches_a_real_client_compressed(spark, broker, topic_name, codec):
    create_topic(broker, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "batch.size": 4096,
                         "linger.ms": 20})
    for i in range(500):
        producer.produce(topic_name, key=None if i % 3 == 0 else b"k%d" % i, value=None if i % 7 == 0 else
                         b"value-%d-" % i * (i % 40), headers=[("i", str(i).encode()), ("none", None)][:i % 3])
    assert producer.flush(30) == 0
    log = b"".join(path.read_bytes() for path in sorted((broker.data_dir / f"{topic_name}-0").glob("*.log")))
    compressions = [header.compression for header, _ in whole_batches(log)]  # librdkafka leaves a batch as it is
    assert compressions.count(CODECS.index(codec)) > len(compressions) / 2  # when compressing it would not pay
    expected = [(offset, key, value, headers and [(k, v) for k, v in headers])
                for offset, key, value, headers in consumed(broker, topic_name)]
    assert len(expected) == 500
    assert spark_rows(read(spark, broker, subscribe=topic_name, includeHeaders="true")) == expected


def test_transactions_all_records_by_default_and_committed_only_when_asked(spark, broker, topic_name):
    """Markers at offsets 5, 11 and 17 never reach the reader; the aborted records 6-10 only under read_uncommitted,
    Spark's default."""
    create_topic(broker, topic_name, 1)
    produce_transactions(broker, topic_name, [("commit", "commit"), ("abort", "abort"), ("commit-again", "commit")],
                         records=5)
    committed = [(o, None, v, None) for o, _, v, _ in consumed(broker, topic_name)]
    assert [row[0] for row in committed] == [0, 1, 2, 3, 4, 12, 13, 14, 15, 16]
    everything = [(o, None, v, None) for o, _, v, _ in consumed(broker, topic_name, isolation="read_uncommitted")]
    assert len(everything) == 15

    assert spark_rows(read(spark, broker, subscribe=topic_name)) == everything  # Spark's default: read_uncommitted
    committed_only = read(spark, broker, subscribe=topic_name, **{"kafka.isolation.level": "read_committed"})
    assert spark_rows(committed_only) == committed
    from_marker = {"startingOffsets": json.dumps({topic_name: {"0": 5}}),
                   "endingOffsets": json.dumps({topic_name: {"0": 13}})}
    assert [row[0] for row in spark_rows(read(spark, broker, subscribe=topic_name, **from_marker, **{
        "kafka.isolation.level": "read_committed"}))] == [12]
    assert [row[0] for row in spark_rows(read(spark, broker, subscribe=topic_name, **from_marker))] == [
        6, 7, 8, 9, 10, 12]


def test_compacted_topic_reads_the_survivors_from_any_offset(spark, broker, topic_name):
    create_topic(broker, topic_name, 1, COMPACTED)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "batch.size": 4096})
    for i in range(3000):
        producer.produce(topic_name, key=b"k%d" % (i % 10), value=b"v%d-" % i * 10)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert wait_until(lambda: len(consumed(broker, topic_name)) < 1500, timeout=30), "the cleaner did not run"
    survivors = consumed(broker, topic_name)
    assert spark_rows(read(spark, broker, subscribe=topic_name)) == survivors
    kept = {offset for offset, *_ in survivors}
    gaps = [offset for offset in range(survivors[-1][0]) if offset not in kept]
    in_a_gap = gaps[len(gaps) // 2]
    from_gap = read(spark, broker, subscribe=topic_name, startingOffsets=json.dumps({topic_name: {"0": in_a_gap}}))
    assert spark_rows(from_gap) == [row for row in survivors if row[0] >= in_a_gap]


def test_log_append_time_topics_report_the_broker_time(spark, broker, topic_name):
    create_topic(broker, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    before_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        producer.produce(topic_name, b"x", timestamp=1_000_000 + i)
    assert producer.flush(30) == 0
    rows = read(spark, broker, subscribe=topic_name).collect()
    assert len(rows) == 20 and {r.timestampType for r in rows} == {1}
    assert all(before_ms - 1000 <= r.timestamp.timestamp() * 1000 <= time.time() * 1000 for r in rows)


def test_deleted_and_missing_offsets_are_data_loss_unless_allowed(spark, broker, topic_name):
    create_topic(broker, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(100):
        producer.produce(topic_name, b"%d" % i)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_records([TopicPartition(topic_name, 0, 50)])[TopicPartition(topic_name, 0, 50)].result(10)

    from_deleted = {"startingOffsets": json.dumps({topic_name: {"0": 10}})}
    with pytest.raises(Exception, match=f"failOnDataLoss: offsets 10..49 of {topic_name}-0 were deleted"):
        read(spark, broker, subscribe=topic_name, **from_deleted).collect()
    allowed = read(spark, broker, subscribe=topic_name, failOnDataLoss="false", **from_deleted)
    assert [row[0] for row in spark_rows(allowed)] == list(range(50, 100))

    past_end = {"endingOffsets": json.dumps({topic_name: {"0": 150}})}
    with pytest.raises(Exception, match=f"failOnDataLoss: {topic_name}-0 ends at 100, before the planned end 150"):
        read(spark, broker, subscribe=topic_name, **past_end).collect()
    allowed = read(spark, broker, subscribe=topic_name, failOnDataLoss="false", **past_end)
    assert [row[0] for row in spark_rows(allowed)] == list(range(50, 100))


def read_directly(bootstrap: str, offset_range: OffsetRange, poll_timeout_s: float = 10) -> list[tuple]:
    return [(offset, value) for batch in read_range({"bootstrap.servers": bootstrap}, offset_range,
                                                     include_headers=False, fail_on_data_loss=True,
                                                     poll_timeout_s=poll_timeout_s)
            for offset, value in zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist())]


def test_many_fetch_answers_per_range_and_a_broker_restart_in_the_middle(tmp_path, monkeypatch):
    """Small answers (a few batches each, the next always in flight) and a restart that drops the connection and
    the request in flight: the task reconnects and the range still comes out whole, once."""
    monkeypatch.setattr(fetcher, "FETCH_BYTES", 4096)
    with BrokerProcess(tmp_path / "data") as own_broker:
        admin = AdminClient({"bootstrap.servers": own_broker.bootstrap_servers})
        from confluent_kafka.admin import NewTopic
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
        producer = Producer({"bootstrap.servers": own_broker.bootstrap_servers, "linger.ms": 5, "batch.size": 2000})
        for i in range(3000):
            producer.produce("t", b"value-%d" % i)
            producer.poll(0)
        assert producer.flush(30) == 0
        expected = [(offset, b"value-%d" % offset) for offset in range(17, 2990)]
        assert read_directly(own_broker.bootstrap_servers, OffsetRange("t", 0, 17, 2990)) == expected

        batches = read_range({"bootstrap.servers": own_broker.bootstrap_servers}, OffsetRange("t", 0, 17, 2990),
                             include_headers=False, fail_on_data_loss=True, poll_timeout_s=30)
        first = next(batches)
        assert 0 < first.num_rows < 2990 - 17
        own_broker.restart()
        rows = [first] + list(batches)
        assert [(o, v) for b in rows for o, v in zip(b.column("offset").to_pylist(), b.column("value").to_pylist())] \
            == expected


def test_task_errors_name_the_problem(broker, topic_name, tmp_path):
    with pytest.raises(TopicNotFoundError, match=f"{topic_name}-0: no such partition"):
        read_directly(broker.bootstrap_servers, OffsetRange(topic_name, 0, 0, 10))
    create_topic(broker, topic_name, 1)
    with pytest.raises(TopicNotFoundError, match=f"{topic_name}-3: no such partition"):
        read_directly(broker.bootstrap_servers, OffsetRange(topic_name, 3, 0, 10))
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match=r"kafkaConsumer.pollTimeoutMs: no records from .*-0 at offset 0 "
                                                     r"for 1s \(kafka.bootstrap.servers=127.0.0.1:1; last: cannot "
                                                     r"connect"):
        read_directly("127.0.0.1:1", OffsetRange(topic_name, 0, 0, 10), poll_timeout_s=1)
    assert time.monotonic() - started < 5
