"""Produce throughput per compression codec, on an ordinary and on a compacted topic: what validating every record
of every batch (decompressing compressed ones, checking keys on compacted topics) costs the broker.

One producer, one partition, acks=1, 100-byte values with a per-record key (compaction needs keys; the keys also
keep values from being identical, so the codecs have something to do). Records per second is bounded by the one
client on shared cores, so the broker's CPU time per record (from /proc/<pid>/stat) is the figure that shows the
validation's cost. Run: `python -m bench.suite --only codecs --brokers odradek`.
"""

from __future__ import annotations

import itertools
import os

from confluent_kafka.admin import AdminClient, NewTopic

from bench import client, peers
from bench.measure import Results
from bench.workloads.throughput import add_cpu_per_record, cpu_clocks

WORKLOAD = "codecs"
CODECS = ("none", "lz4", "zstd")
POLICIES = ("delete", "compact")


def run(results: Results, brokers: list[str], sizes) -> None:
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        for codec, policy in itertools.product(CODECS, POLICIES):
            one_round(results, broker, f"c{round_number}-{codec}-{policy}", codec, policy, sizes.records)


def one_round(results: Results, broker: peers.Broker, topic: str, codec: str, policy: str, records: int) -> None:
    metric = f"produce, {codec}, cleanup.policy={policy}"
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": policy})])[topic].result(60)
        producer = client.producer(broker.bootstrap, acks="1", **client.THROUGHPUT_PRODUCER,
                                   **{"compression.type": codec})
        clocks = cpu_clocks(broker)
        results.add(WORKLOAD, metric, broker.name, produce_keyed(producer, topic, records), unit="records/s")
        add_cpu_per_record(results, broker, metric, records, clocks)
    except Exception as exc:  # one failed round is a recorded error, not the end of the suite
        results.error(WORKLOAD, metric, broker.name, repr(exc), unit="records/s")


def produce_keyed(producer, topic: str, records: int) -> float:
    """client.produce with a key on every record (10,000 distinct keys) and values that differ in their first
    bytes, like real payloads rather than one repeated byte."""
    chunk = [{"key": b"key-%05d" % i, "value": os.urandom(8).hex().encode() + b"x" * (client.RECORD_SIZE - 16)}
             for i in range(client.CHUNK)]
    return client.produce(producer, topic, records, 1, messages=chunk)
