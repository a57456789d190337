"""Produce and consume throughput of 100-byte records: one producer, 1 and 8 partitions, acks=1 and acks=all.

The repetitions interleave (round r on every broker before round r+1), so a burst of load from elsewhere falls on
all of them alike, and every round gets a freshly started broker with nothing else of the suite running, so that
no broker pays for another's background work or its own earlier rounds. Each configuration produces into a fresh
topic and then consumes that same data from offset 0. Beside records per second, the broker's CPU time per record
is recorded, and the client's (this process: librdkafka's threads and the Python loop): with one client on two shared
cores the client is usually the bottleneck, and the broker's CPU per record is the figure that still tells the
brokers apart.
"""

from __future__ import annotations

import itertools
import time

from bench import client, peers
from bench.measure import Results

WORKLOAD = "throughput"
PARTITIONS = (1, 8)
ACKS = ("1", "all")


def run(results: Results, brokers: list[str], sizes) -> None:
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        for partitions, acks in itertools.product(PARTITIONS, ACKS):
            one_round(results, broker, f"t{round_number}-p{partitions}-a{acks}", partitions, acks, sizes.records)


def one_round(results: Results, broker: peers.Broker, topic: str, partitions: int, acks: str, records: int) -> None:
    plural = "s" * (partitions > 1)
    produce_metric = f"produce, {partitions} partition{plural}, acks={acks}"
    consume_metric = f"consume, {partitions} partition{plural}"
    try:
        client.create_topic(broker.bootstrap, topic, partitions)
        producer = client.producer(broker.bootstrap, acks=acks, **client.THROUGHPUT_PRODUCER)
        clocks = cpu_clocks(broker)
        results.add(WORKLOAD, produce_metric, broker.name, client.produce(producer, topic, records, partitions),
                    unit="records/s")
        add_cpu_per_record(results, broker, produce_metric, records, clocks)
        del producer
        clocks = cpu_clocks(broker)
        results.add(WORKLOAD, consume_metric, broker.name, client.consume(broker.bootstrap, topic, partitions, records),
                    unit="records/s")
        add_cpu_per_record(results, broker, consume_metric, records, clocks)
    except Exception as exc:  # one failed round is a recorded error, not the end of the suite
        results.error(WORKLOAD, produce_metric, broker.name, repr(exc), unit="records/s")


def cpu_clocks(broker: peers.Broker) -> tuple[float, float]:
    """CPU seconds used so far by the broker process and by this one (the client: librdkafka's threads and the
    Python loop)."""
    return broker.cpu_seconds(), time.process_time()


def add_cpu_per_record(results: Results, broker: peers.Broker, metric: str, records: int,
                       before: tuple[float, float]) -> None:
    for side, used in zip(("broker", "client"), (b - a for a, b in zip(before, cpu_clocks(broker)))):
        results.add(WORKLOAD, f"{side} CPU per record, {metric}", broker.name, used / records * 1e6, unit="us",
                    better="lower")
