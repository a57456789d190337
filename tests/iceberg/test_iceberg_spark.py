"""format("odradek") with startingOffsets=iceberg against a real broker, in the Spark session the Spark tests share
(tests/spark/conftest.py): the table's snapshot and then the log's tail after it, one read with every record once,
including records the log no longer has (deleted from its start) and those the table does not have yet; as a batch
read, and as a streaming query whose first micro-batch takes the snapshot and whose later ones, after a restart
from its checkpoint too, take the log alone."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.embedded import BrokerProcess

from .conftest import admin, create_topic, produce, wait_committed

pytest.importorskip("pyspark")
from tests.spark.conftest import spark  # noqa: E402,F401  the shared session


@pytest.fixture
def broker(tmp_path):
    """A broker per test with a long commit interval: the writer's first round commits at once, the next is 30 s
    away."""
    process = BrokerProcess(tmp_path / "data", settings={"iceberg.commit.interval.ms": 30_000})
    process.start()
    yield process
    process.stop()


def table_then_more(broker, topic: str) -> None:
    """Offsets 0 to 49 of both partitions of `topic` in its table (values a0..a99, key and header on each), 50 to 69
    in the log alone (b0..b39, no key), 0 to 29 deleted from the log: the table alone has them."""
    create_topic(broker, topic, 2)
    produce(broker, topic, [(i % 2, f"k{i}".encode(), f"a{i}".encode(), [("n", b"1")]) for i in range(100)])
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("odradek.iceberg.mode", "key_value", incremental_operation=AlterConfigOpType.SET)])
    client = admin(broker)
    client.incremental_alter_configs([resource])[resource].result(10)
    wait_committed(broker.data_dir, topic, {0: 50, 1: 50})
    produce(broker, topic, [(i % 2, None, f"b{i}".encode(), None) for i in range(40)])
    deleted = client.delete_records([TopicPartition(topic, 0, 30), TopicPartition(topic, 1, 30)])
    for future in deleted.values():
        future.result(10)


def test_snapshot_then_tail_is_one_read(broker, spark, topic_name):
    table_then_more(broker, topic_name)

    def read(starting: str):
        return spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers) \
            .option("subscribe", topic_name).option("startingOffsets", starting).option("includeHeaders", "true") \
            .load().orderBy("partition", "offset").collect()

    rows = read("iceberg")
    assert [(row.partition, row.offset) for row in rows] == \
        [(0, offset) for offset in range(70)] + [(1, offset) for offset in range(70)]
    assert sorted(row.value for row in rows) == sorted(
        [f"a{i}".encode() for i in range(100)] + [f"b{i}".encode() for i in range(40)])
    first = rows[0]
    assert (first.key, first.topic, [tuple(h) for h in first.headers]) == (b"k0", topic_name, [("n", b"1")])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "marks"})
    try:  # the log alone starts at 30: offsets 0 to 29 came from the table only
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (30, 70)
    finally:
        consumer.close()


def test_streaming_query_starts_with_the_snapshot(broker, spark, topic_name, tmp_path):
    table_then_more(broker, topic_name)
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(**trigger):
        return (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                .option("subscribe", topic_name).option("startingOffsets", "iceberg").option("includeHeaders", "true")
                .load().selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition",
                                   "offset", "headers[0].key AS header")
                .writeStream.format("json").option("path", output).option("checkpointLocation", checkpoint)
                .trigger(**trigger).start())

    query = start(processingTime="0 seconds")
    try:
        query.processAllAvailable()
        produce(broker, topic_name, [(i % 2, None, f"c{i}".encode(), None) for i in range(10)])
        query.processAllAvailable()
        batches = [(progress.batchId, progress.numInputRows) for progress in query.recentProgress
                   if progress.numInputRows]
    finally:
        query.stop()
    # the first batch: 100 rows of the table and the log's 40 after them; then the 10 new records, from the log
    assert batches[0] == (0, 140) and sum(rows for _, rows in batches[1:]) == 10
    produce(broker, topic_name, [(i % 2, None, f"d{i}".encode(), None) for i in range(10)])
    query = start(availableNow=True)  # again from its checkpoint: the log after it, not the table again
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()

    rows = spark.read.json(output).orderBy("partition", "offset").collect()
    assert [(row.partition, row.offset) for row in rows] == \
        [(0, offset) for offset in range(80)] + [(1, offset) for offset in range(80)]
    assert sorted(row.value for row in rows) == sorted(
        [f"a{i}" for i in range(100)] + [f"{letter}{i}" for letter, count in (("b", 40), ("c", 10), ("d", 10))
                                          for i in range(count)])
    assert all((row.key, row.header) == (f"k{row.value[1:]}", "n") for row in rows if row.value.startswith("a"))
