"""Helpers of the Spark tests: topics, records, a batch read with the broker's address filled in, and the streaming
query of a topic into JSON files that the connector tests kill and resume."""

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


def produce_transactions(broker, topic: str, transactions: list[tuple[str, str | None]], records: int) -> Producer:
    """One transactional producer writes `records` values "<label>-<i>" to partition 0 per (label, ending) in
    `transactions`, ending each with "commit", "abort" or None (left open: the caller may end it later)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": topic})
    producer.init_transactions(30)
    for label, ending in transactions:
        producer.begin_transaction()
        for i in range(records):
            producer.produce(topic, f"{label}-{i}".encode(), partition=0)
        assert producer.flush(30) == 0  # an abort would otherwise drop the records before they reach the log
        if ending == "commit":
            producer.commit_transaction(30)
        elif ending == "abort":
            producer.abort_transaction(30)
    return producer


def read(spark, broker, **options):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream_to_json_files(spark, bootstrap: str, topic: str, output: str, checkpoint: str, *, source: str = "kafka",
                         max_offsets_per_trigger: int | None = None, available_now: bool = False):
    """Start a query of `topic` from earliest into JSON files (key, value, partition, offset) under `output`, with
    its checkpoint; micro-batches back to back, or what is there now when `available_now`."""
    reader = (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    writer = (reader.load().selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition",
                                       "offset")
              .writeStream.format("json").option("path", output).option("checkpointLocation", checkpoint))
    return (writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="0 seconds")).start()
