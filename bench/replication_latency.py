"""End-to-end latency against the rate, at RF 1 and RF 3, beside each broker's CPU: where a replicated partition's
latency goes.

A three-broker cluster; for each rate and replication factor a new one-partition topic (min.insync.replicas=2 at
RF 3) and the C load generator's paced producer (acks=all, linger.ms=0: one record per request) and consumer
(bench/loadgen latency mode), beside the CPU each broker process used over the point (/proc, bench.peers.cpu_seconds)
as cores busy, busiest first: a leader near one core (a Python process runs on one) is the bottleneck, and latency
past it is queueing. Run: `python -m bench.replication_latency [--rates 2000,5000,10000] [--seconds 5]` (needs
`make loadgen`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench import loadgen
from bench.client import create_topic
from bench.peers import cpu_seconds
from odradek.embedded import Cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="2000,5000,10000", help="records/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="per point")
    args = parser.parse_args()
    print("rate      RF  p50 ms  p99 ms  max ms  cores busy per broker (busiest first) load")
    with tempfile.TemporaryDirectory(prefix="replication-latency-") as scratch, \
            Cluster(3, data_dir=Path(scratch)) as cluster:
        bootstrap = cluster.bootstrap_servers
        pids = {broker.node_id: broker.process.pid for broker in cluster.brokers}
        for rate in (int(rate) for rate in args.rates.split(",")):
            for replication_factor in (1, 3):
                topic = f"latency-rf{replication_factor}-{rate}"
                create_topic(bootstrap, topic, 1, replication_factor,
                             {"min.insync.replicas": "2"} if replication_factor > 1 else None)
                time.sleep(1)  # the followers take the partition up
                before, started = {node: cpu_seconds(pid) for node, pid in pids.items()}, time.monotonic()
                figures = loadgen.latency(bootstrap, topic, rate, args.seconds,
                                          config={"acks": "all", "linger.ms": 0})
                elapsed = time.monotonic() - started
                busy = sorted(((cpu_seconds(pid) - before[node]) / elapsed for node, pid in pids.items()),
                              reverse=True)
                verdict = "" if figures.valid else f"  NOT VALID: {figures.verdict()}"
                print(f"{rate:<9} {replication_factor:<3} {figures.p50:<7.1f} {figures.p99:<7.1f} {figures.max:<7.1f} "
                      f"{', '.join(f'{core:.2f}' for core in busy):<37} {os.getloadavg()[0]:.1f}{verdict}", flush=True)


if __name__ == "__main__":
    main()
