"""What replication costs and how fast producing resumes when a leader goes (issue 15), on one three-broker ZooKeeper
cluster of Odradek and on a three-node KRaft cluster of each Kafka configuration (bench/peers.py's KafkaBroker with
nodes=3), one after the other in the same run (the other peers have no replication to compare: Tansu here keeps
everything in one process's memory, noida-db is a single node).

Three measurements, each repeated `sizes.repeat` times: the produce rate of bench/replication_bench.py with RF 3
acks=all and acks=1 beside RF 1 on the same cluster (a quarter of `sizes.records` per point, after one unmeasured
warm-up; notes give RF 3 as a share of RF 1 beside Kafka's 2014 figures, 0.96 async and 0.51 sync); end-to-end
latency at `sizes.latency_rate` with acks=all and min.insync.replicas=2 (producer timestamp to the consumer's
receipt, which waits for the high watermark and so for the ISR), on RF 1 and RF 3 with the C load generator
(latency.c_client: a client that keeps the schedule, so the figure is the brokers'; runs whose producer fell behind
are errors, not figures); then, on Odradek alone, RF 3 with bench/workloads/latency.py's Python clients (what a
Python user sees) and the time producing stands still after the leader of an RF 3 partition is stopped by SIGTERM
(controlled shutdown, goal under a second) or killed -9 (bounded below by zookeeper.session.timeout.ms, the
cluster's 6 s), from bench/failover_bench.py. The failovers come last, as they stop and restart brokers. Every
cluster's nodes share this machine's cores.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench import peers
from bench.failover_bench import pause_after, session_timeout_s
from bench.measure import Results, percentile
from bench.replication_bench import rate
from bench.workloads.latency import c_client, measure
from odradek.embedded import Cluster

WORKLOAD = "replication"
SUBJECT = "odradek"
CASES = ((1, "all"), (3, "all"), (3, "1"))  # (replication factor, acks)
KAFKA_2014 = {"all": 0.51, "1": 0.96}  # Kafka's RF 3 produce rate as a share of RF 1, sync and async


def produce_metric(replication_factor: int, acks: str) -> str:
    return f"produce, 6 partitions, RF {replication_factor}, acks={acks}"


def end_to_end(results: Results, subject: str, bootstrap: str, replication_factor: int, rate: int, seconds: float,
               round_number: int) -> None:
    """latency.c_client with acks=all: p50, p99, p99.9 and max on one partition of RF `replication_factor`."""
    c_client(results, WORKLOAD, subject, bootstrap, f"e2e-rf{replication_factor}-{round_number}",
             f"{rate} records/s, RF {replication_factor}, acks=all, C client", rate, seconds,
             replication_factor=replication_factor, acks="all")


def rates_and_latency(results: Results, subject: str, bootstrap: str, sizes) -> None:
    """The produce rates of CASES after a warm-up, RF 3's shares of RF 1 (notes) and the C client's end-to-end
    latency on RF 1 and RF 3, each `sizes.repeat` times."""
    records = max(10_000, sizes.records // 4)
    rate(bootstrap, f"warm-up-{subject}", records // 4, 3, "all")
    for round_number in range(sizes.repeat):
        for replication_factor, acks in CASES:
            metric = produce_metric(replication_factor, acks)
            try:
                results.add(WORKLOAD, metric, subject, rate(bootstrap, f"rf{replication_factor}-acks{acks}-"
                            f"{round_number}", records, replication_factor, acks), unit="records/s")
            except Exception as exc:
                results.error(WORKLOAD, metric, subject, repr(exc), unit="records/s")
    single = results.median(WORKLOAD, produce_metric(1, "all"), subject)
    for acks, kafka in KAFKA_2014.items():
        replicated = results.median(WORKLOAD, produce_metric(3, acks), subject)
        if single and replicated:
            results.note(WORKLOAD, produce_metric(3, acks), f"{subject}: {replicated / single:.2f} of RF 1 (Kafka "
                         f"2014: {kafka}); all brokers share this machine's CPUs", unit="records/s")
    for round_number in range(sizes.repeat):
        for replication_factor in (1, 3):
            end_to_end(results, subject, bootstrap, replication_factor, sizes.latency_rate, sizes.latency_seconds,
                       round_number)


def run(results: Results, brokers: list[str], sizes) -> None:
    for name in brokers:
        if name not in peers.KAFKAS:
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-replication-{name}-") as scratch:
            try:
                kafka = peers.KafkaBroker(name, Path(scratch), nodes=3)
                kafka.start()
            except (peers.Unavailable, RuntimeError) as exc:
                results.note(WORKLOAD, "skipped", f"{name}: {exc}")
                continue
            try:
                rates_and_latency(results, name, kafka.bootstrap, sizes)
            finally:
                kafka.stop()
    if SUBJECT not in brokers:
        return
    with tempfile.TemporaryDirectory(prefix="bench-replication-") as scratch, \
            Cluster(3, data_dir=Path(scratch)) as cluster:
        bootstrap = cluster.bootstrap_servers
        rates_and_latency(results, SUBJECT, bootstrap, sizes)
        latency_rate = sizes.latency_rate
        for round_number in range(sizes.repeat):
            try:
                latencies = measure(bootstrap, f"latency-rf3-{round_number}", latency_rate, sizes.latency_seconds,
                                    replication_factor=3, acks="all")
            except Exception as exc:
                results.error(WORKLOAD, f"p99 at {latency_rate} records/s, RF 3, acks=all", SUBJECT, repr(exc),
                              unit="ms", better="lower")
                continue
            for label, fraction in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
                results.add(WORKLOAD, f"{label} at {latency_rate} records/s, RF 3, acks=all", SUBJECT,
                            percentile(latencies, fraction), unit="ms", better="lower")

        session_s = session_timeout_s(cluster)
        for how, metric in (("SIGTERM", "resume producing after SIGTERM of the leader"),
                            ("kill -9", f"resume producing after kill -9 of the leader, {session_s:.0f} s session")):
            for round_number in range(sizes.repeat):
                try:
                    results.add(WORKLOAD, metric, SUBJECT, pause_after(cluster, how, round_number), unit="s",
                                better="lower")
                except Exception as exc:
                    results.error(WORKLOAD, metric, SUBJECT, repr(exc), unit="s", better="lower")
