"""What the topic catalogue costs as it grows (issues 15 and 18).

`cluster`: on a three-broker ZooKeeper cluster (its own ZooKeeper), the time from sending CreateTopics for one topic
of N partitions at replication factor 3 until all three brokers answer Metadata with every partition led: what a
client waits before the topic is usable wherever its metadata requests land.
`single`: on one single-node broker, the time to create T topics of one partition with one CreateTopics request
each (the catalogue is persisted at every create), and the time until the broker lists them all after kill -9.
Everything goes over the raw protocol (tests/broker/raw_client.py).
Run: `python bench/catalogue_bench.py cluster --partitions 500 2000` or
`python bench/catalogue_bench.py single --topics 10000`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odradek.embedded import BrokerProcess, Cluster  # noqa: E402
from odradek.protocol import api  # noqa: E402
from tests.broker.raw_client import RawClient  # noqa: E402

CreateTopics = api("CreateTopics").request
Metadata = api("Metadata").request


def create(client: RawClient, name: str, partitions: int, replication_factor: int, timeout_ms: int) -> None:
    answer = client.call("CreateTopics", 5, timeout_ms=timeout_ms, validate_only=False, topics=[
        CreateTopics.CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication_factor)])
    errors = [topic.error_code for topic in answer.topics  # timeout_ms=0: REQUEST_TIMED_OUT, as Kafka answers
              if topic.error_code and not (timeout_ms == 0 and topic.error_code == 7)]
    assert not errors, errors


def led_partitions(client: RawClient, names: list[str] | None) -> int:
    """How many partitions of `names` (None: of every topic) this broker's Metadata shows with a leader."""
    answer = client.call("Metadata", 12, topics=None if names is None else [Metadata.MetadataRequestTopic(name=name)
                                                                        for name in names],
                         allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return sum(1 for topic in answer.topics if topic.error_code == 0
               for partition in topic.partitions if partition.leader_id >= 0)


def create_to_usable(cluster: Cluster, name: str, partitions: int) -> float:
    clients = [RawClient(broker.port) for broker in cluster.brokers]
    for client in clients:
        client.sock.settimeout(600)
    try:
        started = time.perf_counter()
        create(clients[0], name, partitions, 3, timeout_ms=0)  # answered at once: the wait is measured below
        pending = list(clients)
        while pending:
            pending = [client for client in pending if led_partitions(client, [name]) < partitions]
            if pending:
                time.sleep(0.02)
        return time.perf_counter() - started
    finally:
        for client in clients:
            client.close()


def measure_cluster(counts: list[int], workdir: Path) -> list[dict]:
    with Cluster(3, data_dir=workdir / "cluster", settings={"auto.create.topics.enable": "false"}) as cluster:
        rows = []
        for count in counts:
            rows.append({"partitions": count, "create_to_usable_s": create_to_usable(cluster, f"wide-{count}", count)})
            print(rows[-1], file=sys.stderr, flush=True)
        return rows


def measure_single(topics: int, workdir: Path) -> dict:
    broker = BrokerProcess(workdir / "single", settings={"auto.create.topics.enable": "false"}).start()
    try:
        client = RawClient(broker.port)
        client.sock.settimeout(600)
        started = time.perf_counter()
        for index in range(topics):
            create(client, f"t-{index:05d}", 1, 1, timeout_ms=30_000)
        row = {"topics": topics, "create_one_by_one_s": time.perf_counter() - started}
        client.close()
        broker.kill()
        started = time.perf_counter()
        broker.start(timeout=600)
        client = RawClient(broker.port)
        while led_partitions(client, None) < topics:
            time.sleep(0.05)
        row["ready_after_kill9_s"] = time.perf_counter() - started
        client.close()
        return row
    finally:
        broker.stop(timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["cluster", "single"])
    parser.add_argument("--partitions", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--topics", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-catalogue-bench-") as workdir:
        if args.mode == "cluster":
            rows = measure_cluster(args.partitions, Path(workdir))
        else:
            rows = [measure_single(args.topics, Path(workdir))]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
