"""Helpers of the Spark tests: topics, records, and a batch read with the broker's address filled in."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(broker, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # alive until the future resolves
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(10)


def produce(broker, topic: str, records: list[dict]) -> None:
    """records: dicts of produce() arguments (value, key, partition, timestamp, headers)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "acks": "all"})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(30) == 0


def read(spark, broker, **options):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
