"""Unclean leader election reports what it loses (issue 15): with unclean.leader.election.enable an out-of-sync
replica may lead, and the records acknowledged while it was away are gone; when the old leader comes back and cuts
its log to the new leader's, it logs a WARN naming the partition and the acknowledged offsets it removed."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, wait_until

from .test_broker_loss import read_partition

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000
CHECKPOINT_MS = 200  # replica.high.watermark.checkpoint.interval.ms: a killed broker comes back with its watermark


def state(zk, topic: str) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    for value in values:
        producer.produce(topic, value=value.encode(), partition=0)
    assert producer.flush(30) == 0


def test_records_lost_to_an_unclean_election_are_reported_by_the_old_leader(odradek_zookeeper, tmp_path):
    from kazoo.client import KazooClient

    chroot = f"/unclean-{uuid.uuid4().hex[:8]}"
    with Cluster(2, zookeeper=odradek_zookeeper.connect + chroot, data_dir=tmp_path,
                 settings={"replica.lag.time.max.ms": 2000,
                           "replica.high.watermark.checkpoint.interval.ms": CHECKPOINT_MS}) as cluster:
        zk = KazooClient(hosts=cluster.zookeeper_connect)
        zk.start(timeout=15)
        try:
            topic = f"unclean-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
            admin.create_topics([NewTopic(topic, 1, 2, config={"unclean.leader.election.enable": "true"})])[
                topic].result(30)
            assert wait_until(lambda: len(state(zk, topic)["isr"]) == 2, timeout=15)
            leader = cluster.broker(state(zk, topic)["leader"])
            follower = next(b for b in cluster.brokers if b is not leader)
            produce(cluster.bootstrap_servers, topic, [f"kept-{n}" for n in range(10)])  # on both replicas

            follower.kill()
            assert wait_until(lambda: state(zk, topic)["isr"] == [leader.node_id], timeout=15)
            produce(leader.bootstrap_servers, topic, [f"lost-{n}" for n in range(15)])  # acknowledged by the leader
            time.sleep(CHECKPOINT_MS / 1000 * 3)
            leader.kill()

            follower.start(timeout=SESSION_TIMEOUT_S + 20)  # the only live replica, out of sync: elected uncleanly
            assert wait_until(lambda: state(zk, topic)["leader"] == follower.node_id, timeout=SESSION_TIMEOUT_S + 15)
            produce(follower.bootstrap_servers, topic, [f"new-{n}" for n in range(5)])
            leader.start(timeout=SESSION_TIMEOUT_S + 20)
            assert wait_until(lambda: len(state(zk, topic)["isr"]) == 2, timeout=20)

            warnings = [line for line in leader.log_path.read_text().splitlines()
                        if "WARNING" in line and f"{topic}-0" in line and "ACKNOWLEDGED RECORDS LOST" in line]
            print("\n".join(warnings))
            assert len(warnings) == 1, warnings
            assert "offsets 10-24 (15)" in warnings[0]
            assert read_partition(cluster.bootstrap_servers, topic, 0, 15) == \
                [f"kept-{n}".encode() for n in range(10)] + [f"new-{n}".encode() for n in range(5)]
        finally:
            zk.stop()
            zk.close()
