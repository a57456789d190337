"""Produce rate of one confluent-kafka client across a three-broker ZooKeeper cluster beside a single-node broker.

Both in the same run, on the same machine, with bench/client.py's producer (100-byte records, produce_batch, acks
all): one topic of 6 partitions, led by the three brokers two each in the cluster, all six by the one broker
otherwise. All brokers share the machine's cores, so the cluster's figure is what spreading leaders costs or gains
in client-side fan-out, not what three machines would do.
Run: `python -m bench.cluster_bench [--records 1000000]`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.client import THROUGHPUT_PRODUCER, create_topic, produce, producer
from odradek.embedded import BrokerProcess, Cluster

PARTITIONS = 6


def rate(bootstrap: str, records: int) -> float:
    create_topic(bootstrap, "bench", PARTITIONS)
    client = producer(bootstrap, acks="all", **THROUGHPUT_PRODUCER)
    return produce(client, "bench", records, PARTITIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-cluster-bench-") as scratch:
        with BrokerProcess(Path(scratch) / "single") as single:
            single_rate = rate(single.bootstrap_servers, args.records)
        with Cluster(3, data_dir=Path(scratch) / "cluster") as cluster:
            cluster_rate = rate(cluster.bootstrap_servers, args.records)
    print(f"single node:          {single_rate:>12,.0f} records/s")
    print(f"3 brokers, ZooKeeper: {cluster_rate:>12,.0f} records/s  ({cluster_rate / single_rate:.2f}x)")


if __name__ == "__main__":
    main()
