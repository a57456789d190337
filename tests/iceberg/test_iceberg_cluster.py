"""An Iceberg topic on three brokers of a ZooKeeper cluster sharing one catalog: each partition's leader writes it,
and when the leader of a partition is killed with SIGKILL the broker elected in its place goes on from the table's
recorded offsets: every record acknowledged to acks=all producers is in the table once."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient

from odradek.embedded import Cluster, wait_until

from .conftest import create_topic, produce, rows, wait_committed


def leader_of(broker, topic: str, partition: int) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def test_a_new_leader_resumes_from_the_table(odradek_zookeeper, tmp_path):
    shared = tmp_path / "shared"
    catalog = {"iceberg.catalog.uri": f"sqlite:///{shared}/catalog.db", "iceberg.warehouse": str(shared / "warehouse")}
    shared.mkdir()
    topic = f"iceberg-{uuid.uuid4().hex[:8]}"
    with Cluster(3, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}", data_dir=tmp_path,
                 settings={"iceberg.commit.interval.ms": 200, **catalog}) as cluster:
        first = cluster.brokers[0]
        create_topic(first, topic, 2, 3, **{"odradek.iceberg.mode": "key_value", "min.insync.replicas": "2"})
        produce(cluster, topic, [(i % 2, None, f"a{i}".encode(), None) for i in range(100)], acks="all")
        wait_committed(tmp_path, topic, {0: 50, 1: 50}, catalog=catalog)

        old = leader_of(first, topic, 0)
        cluster.broker(old).kill()
        survivor = next(broker for broker in cluster.brokers if broker.node_id != old)
        new = wait_until(lambda: (leader := leader_of(survivor, topic, 0)) not in (old, -1) and leader, timeout=20)
        assert new, "no new leader of partition 0"
        produce(survivor, topic, [(i % 2, None, f"b{i}".encode(), None) for i in range(100)], acks="all")
        table = wait_committed(tmp_path, topic, {0: 100, 1: 100}, catalog=catalog, timeout=30)

        written = rows(table)
        assert [(row["partition"], row["offset"]) for row in written] == \
            [(0, offset) for offset in range(100)] + [(1, offset) for offset in range(100)]
        assert sorted(row["value"] for row in written) == sorted(
            [f"a{i}".encode() for i in range(100)] + [f"b{i}".encode() for i in range(100)])
