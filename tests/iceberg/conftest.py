"""The Iceberg tests' shared pieces: topics made, altered and records produced with confluent-kafka, the log's end
offsets, and a topic's table read with pyiceberg from the broker's catalog, waited for until its last commit covers
offsets or its partition spec is the one wanted.
Skipped as a whole without the iceberg extra (pyiceberg)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402
from pyiceberg.exceptions import NoSuchTableError  # noqa: E402

from odradek.iceberg.table import committed_offsets, open_catalog  # noqa: E402


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(broker, name: str, partitions: int = 1, replication_factor: int = 1, **configs: str) -> None:
    client = admin(broker)
    client.create_topics([NewTopic(name, partitions, replication_factor, config=configs)])[name].result(30)


def alter(broker, topic: str, **configs: str) -> None:
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()])
    client = admin(broker)  # kept until the result: a client collected meanwhile fails it
    client.incremental_alter_configs([resource])[resource].result(10)


def wait_spec(broker, topic: str, names: list[str], timeout: float = 20.0, catalog: dict[str, str] | None = None):
    """The table once its default partition spec has these fields (the writer evolves it at its next round)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        table = table_of(broker.data_dir, topic, catalog)
        if [field.name for field in table.spec().fields] == names:
            return table
        time.sleep(0.05)
    pytest.fail(f"{topic}: the table's spec is {table.spec()}, not {names}")


def produce(broker, topic: str, records, **settings) -> None:
    """(partition, key, value, headers) each, acks=all."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **settings})
    for partition, key, value, headers in records:
        producer.produce(topic, value, key, partition=partition, headers=headers)
    assert producer.flush(30) == 0


def end_offsets(broker, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "ends"})
    try:
        return {index: consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=10)[1]
                for index in range(partitions)}
    finally:
        consumer.close()


def table_of(data_dir: Path, topic: str, catalog: dict[str, str] | None = None):
    """The topic's table in the catalog of a broker with data in `data_dir` (its default one unless given)."""
    settings = catalog or {"iceberg.catalog.uri": "", "iceberg.warehouse": ""}
    return open_catalog(settings, data_dir).load_table(("odradek", topic))


def wait_committed(data_dir: Path, topic: str, wanted: dict[int, int], timeout: float = 20.0,
                   catalog: dict[str, str] | None = None):
    """The table once its last commit covers `wanted` ({partition: next offset}), or a failure saying where it is."""
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            table = table_of(data_dir, topic, catalog)
            seen = committed_offsets(table)
            if all(seen.get(index, 0) >= offset for index, offset in wanted.items()):
                return table
        except NoSuchTableError:
            pass
        time.sleep(0.05)
    pytest.fail(f"{topic}: the table covers {seen}, not {wanted}")


def rows(table) -> list[dict]:
    """Every row of the table, by partition and offset (in a schema mode's table, those of its `kafka` column)."""
    return sorted(table.scan().to_arrow().to_pylist(),
                  key=lambda row: (row.get("kafka", row)["partition"], row.get("kafka", row)["offset"]))
