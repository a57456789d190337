"""Many partitions (1,000 and 10,000 by default): how long creating them takes, how fast Metadata for all of them
answers, the broker's RSS holding them, and produce into 1,000 of them.

The partitions are created as topics of 1,000 (one CreateTopics each, timed together until every partition has a leader
that answers, bench.client.create_topic): Kafka's KRaft controller refuses a request that makes more than 10,000
metadata records at once, so one topic of 10,000 partitions cannot be created there. Metadata is timed through the
client (`list_topics` of every topic, the median of several calls per round), so every broker pays the same client
overhead; produce sends the throughput workload's 100-byte records round-robin over the first topic's partitions with
one producer and acks=1, so each request carries many small batches, while the broker holds every partition. A Kafka is
measured as started, not warmed up (bench/peers.py).
"""

from __future__ import annotations

import statistics
import time

from confluent_kafka.admin import AdminClient

from bench import client, peers
from bench.measure import Results

WORKLOAD = "partitions"
PER_TOPIC = 1000
METADATA_CALLS = 20
MIB = 1 << 20


def one_round(results: Results, broker, prefix: str, partitions: int, records: int) -> None:
    topics = [f"{prefix}-{i}" for i in range(max(1, partitions // PER_TOPIC))]
    per_topic = min(partitions, PER_TOPIC)
    created = sum(client.create_topic(broker.bootstrap, topic, per_topic) for topic in topics)
    results.add(WORKLOAD, f"create {partitions} partitions", broker.name, created, unit="s", better="lower")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    times = []
    for _ in range(METADATA_CALLS):
        started = time.perf_counter()
        admin.list_topics(timeout=60)
        times.append((time.perf_counter() - started) * 1000)
    results.add(WORKLOAD, f"metadata of {partitions} partitions", broker.name, statistics.median(times), unit="ms",
                better="lower")
    results.add(WORKLOAD, f"RSS with {partitions} partitions", broker.name, broker.rss_bytes() / MIB, unit="MiB",
                better="lower")
    producer = client.producer(broker.bootstrap, acks="1", **client.THROUGHPUT_PRODUCER)
    results.add(WORKLOAD, f"produce into {per_topic} partitions of {partitions}, acks=1", broker.name,
                client.produce(producer, topics[0], records, per_topic), unit="records/s")


def run(results: Results, brokers: list[str], sizes) -> None:
    for partitions in sizes.partition_counts:
        for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat, warm=False):
            try:
                one_round(results, broker, f"wide{round_number}", partitions, sizes.records)
            except Exception as exc:
                results.error(WORKLOAD, f"create {partitions} partitions", broker.name, repr(exc), unit="s",
                              better="lower")
