"""Produce and consume throughput of 100-byte records: one producer, 1 and 8 partitions, acks=1 and acks=all.

The repetitions interleave (round r on every broker before round r+1), so a burst of load from elsewhere falls on
all of them alike, and every round gets a freshly started broker with nothing else of the suite running, so that
no broker pays for another's background work or its own earlier rounds. Each configuration produces into a fresh
topic and then consumes that same data from offset 0. Beside records per second, the broker's own CPU time per record is
recorded: with one Python client on two shared cores the client is usually the bottleneck, and CPU per record is
the figure that still tells the brokers apart.
"""

from __future__ import annotations

import itertools

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
    produce_metric = f"produce, {partitions} partition{'s' * (partitions > 1)}, acks={acks}"
    consume_metric = f"consume, {partitions} partition{'s' * (partitions > 1)}"
    try:
        client.create_topic(broker.bootstrap, topic, partitions)
        producer = client.producer(broker.bootstrap, acks=acks, **client.THROUGHPUT_PRODUCER)
        cpu = broker.cpu_seconds()
        rate = client.produce(producer, topic, records, partitions)
        produce_cpu = broker.cpu_seconds() - cpu
        del producer
        results.add(WORKLOAD, produce_metric, broker.name, rate, unit="records/s")
        results.add(WORKLOAD, f"broker CPU per record, {produce_metric}", broker.name,
                    produce_cpu / records * 1e6, unit="us", better="lower")
        cpu = broker.cpu_seconds()
        rate = client.consume(broker.bootstrap, topic, partitions, records)
        consume_cpu = broker.cpu_seconds() - cpu
        results.add(WORKLOAD, consume_metric, broker.name, rate, unit="records/s")
        results.add(WORKLOAD, f"broker CPU per record, {consume_metric}", broker.name,
                    consume_cpu / records * 1e6, unit="us", better="lower")
    except Exception as exc:  # one failed round is a recorded error, not the end of the suite
        results.error(WORKLOAD, produce_metric, broker.name, repr(exc), unit="records/s")
