"""Produce rate with replication: RF 3 with acks=all and acks=1 beside RF 1, on one three-broker ZooKeeper cluster
in the same run, and a single-node broker for reference.

One confluent-kafka client (bench/client.py's producer: 100-byte records, produce_batch), one topic of 6
partitions per case (two led by each broker), min.insync.replicas=2 on the RF 3 topics. All brokers and ZooKeeper
share the machine's cores, so each broker set first takes a quarter of the records unmeasured (a first run was
0.3-0.6x the later ones: brokers just started), and followers copying every batch compete with the leaders for CPU: the figures show what
replication costs here, not on three machines.
Run: `python -m bench.replication_bench [--records 300000]`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.client import THROUGHPUT_PRODUCER, create_topic, produce, producer
from odradek.embedded import BrokerProcess, Cluster

PARTITIONS = 6


def rate(bootstrap: str, topic: str, records: int, replication_factor: int, acks: str) -> float:
    create_topic(bootstrap, topic, PARTITIONS, replication_factor,
                 {"min.insync.replicas": "2"} if replication_factor > 1 else None)
    client = producer(bootstrap, acks=acks, **THROUGHPUT_PRODUCER)
    return produce(client, topic, records, PARTITIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-replication-bench-") as scratch:
        with BrokerProcess(Path(scratch) / "single") as single:
            rate(single.bootstrap_servers, "warm-up", args.records // 4, 1, "all")
            single_rate = rate(single.bootstrap_servers, "single", args.records, 1, "all")
        with Cluster(3, data_dir=Path(scratch) / "cluster") as cluster:
            rate(cluster.bootstrap_servers, "warm-up", args.records // 4, 3, "all")
            figures = [(f"3 brokers, RF {rf}, acks={acks}:", rate(cluster.bootstrap_servers, f"rf{rf}-{acks}",
                                                                  args.records, rf, acks))
                       for rf, acks in ((3, "all"), (3, "1"), (1, "all"))]
    print(f"{'single node, acks=all:':<28}{single_rate:>12,.0f} records/s")
    for label, figure in figures:
        print(f"{label:<28}{figure:>12,.0f} records/s  ({figure / single_rate:.2f}x)")


if __name__ == "__main__":
    main()
