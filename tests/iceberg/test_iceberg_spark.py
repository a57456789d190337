"""format("odradek") with startingOffsets=iceberg against a real broker, in the Spark session the Spark tests share
(tests/spark/conftest.py): the table's snapshot and then the log's tail after it, one read with every record once,
including records the log no longer has (deleted from its start) and those the table does not have yet."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.embedded import BrokerProcess

from .conftest import admin, create_topic, produce, wait_committed

pytest.importorskip("pyspark")
from tests.spark.conftest import spark  # noqa: E402,F401  the shared session


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A long commit interval: the writer's first round commits at once, the next is 30 s away."""
    process = BrokerProcess(tmp_path_factory.mktemp("iceberg-spark") / "data",
                            settings={"iceberg.commit.interval.ms": 30_000})
    process.start()
    yield process
    process.stop()


def test_snapshot_then_tail_is_one_read(broker, spark, topic_name):
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, [(i % 2, f"k{i}".encode(), f"a{i}".encode(), [("n", b"1")]) for i in range(100)])
    resource = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("odradek.iceberg.mode", "key_value", incremental_operation=AlterConfigOpType.SET)])
    client = admin(broker)
    client.incremental_alter_configs([resource])[resource].result(10)
    wait_committed(broker.data_dir, topic_name, {0: 50, 1: 50})
    produce(broker, topic_name, [(i % 2, None, f"b{i}".encode(), None) for i in range(40)])
    deleted = client.delete_records([TopicPartition(topic_name, 0, 30), TopicPartition(topic_name, 1, 30)])
    for future in deleted.values():
        future.result(10)

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
