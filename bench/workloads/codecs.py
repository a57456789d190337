"""Produce and consume per compression codec (none, gzip, snappy, lz4, zstd), on an ordinary and on a compacted
topic, driven by the C load generator: what validating every record of every batch (decompressing compressed ones,
checking keys on compacted topics) and compressing fetches' answers costs each broker.

2 C producer processes, one partition, acks=1, 100-byte values (16 random hex digits, then padding) with 10,000
distinct keys (compaction needs keys; identical for both policies so they differ only in what the broker checks);
the ordinary topic is then read back by one C consumer. The broker's CPU time per record (from /proc/<pid>/stat)
is the figure that shows the validation's cost; the client's (getrusage) is beside it, since compressing on two
shared cores can be what limits the rate. Run: `python -m bench.suite --only codecs`.
"""

from __future__ import annotations

import itertools

from bench import client, loadgen, peers
from bench.measure import Results
from bench.workloads.loadgen import add_run, built

WORKLOAD = "codecs"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
POLICIES = ("delete", "compact")
PRODUCERS = 2
KEYS = 10_000


def run(results: Results, brokers: list[str], sizes) -> None:
    if not built(results, WORKLOAD):
        return
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        for codec, policy in itertools.product(CODECS, POLICIES):
            one_round(results, broker, f"c{round_number}-{codec}-{policy}", codec, policy, sizes.codec_records)


def one_round(results: Results, broker: peers.Broker, topic: str, codec: str, policy: str, records: int) -> None:
    metric = f"produce, {codec}, cleanup.policy={policy}"
    try:
        client.create_topic(broker.bootstrap, topic, 1, configs={"cleanup.policy": policy})
        before = broker.cpu_seconds()
        produced = loadgen.produce(broker.bootstrap, topic, records, processes=PRODUCERS, keys=KEYS,
                                   config={"acks": "1", **client.THROUGHPUT_PRODUCER, "compression.codec": codec})
        add_run(results, WORKLOAD, metric, broker.name, produced, broker.cpu_seconds() - before)
        if policy == "delete":
            metric = f"consume, {codec}"
            before = broker.cpu_seconds()
            consumed = loadgen.consume(broker.bootstrap, topic, produced.partition_records, config=client.CONSUMER)
            add_run(results, WORKLOAD, metric, broker.name, consumed, broker.cpu_seconds() - before)
    except Exception as exc:  # one failed round is a recorded error, not the end of the suite
        results.error(WORKLOAD, metric, broker.name, repr(exc), unit="records/s")
