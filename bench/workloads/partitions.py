"""A topic of 1000 partitions: how long creating it takes, how fast Metadata for it answers, and produce into it.

Metadata is timed through the client (`list_topics` of that one topic, the median of several calls per round), so
every broker pays the same client overhead; produce sends the throughput workload's 100-byte records round-robin
over every partition with one producer and acks=1, so each request carries many small batches.
"""

from __future__ import annotations

import statistics
import time

from confluent_kafka.admin import AdminClient

from bench import client, peers
from bench.measure import Results

WORKLOAD = "1000 partitions"
METADATA_CALLS = 20


def one_round(results: Results, broker: peers.Broker, topic: str, partitions: int, records: int) -> None:
    results.add(WORKLOAD, "create topic", broker.name, client.create_topic(broker.bootstrap, topic, partitions),
                unit="s", better="lower")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    times = []
    for _ in range(METADATA_CALLS):
        started = time.perf_counter()
        admin.list_topics(topic, timeout=30)
        times.append((time.perf_counter() - started) * 1000)
    results.add(WORKLOAD, "metadata of the topic", broker.name, statistics.median(times), unit="ms", better="lower")
    producer = client.producer(broker.bootstrap, acks="1", **client.THROUGHPUT_PRODUCER)
    results.add(WORKLOAD, "produce, acks=1", broker.name, client.produce(producer, topic, records, partitions),
                unit="records/s")


def run(results: Results, brokers: list[str], sizes) -> None:
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        try:
            one_round(results, broker, f"wide-{round_number}", sizes.many_partitions, sizes.records)
        except Exception as exc:
            results.error(WORKLOAD, "create topic", broker.name, repr(exc), unit="s", better="lower")
