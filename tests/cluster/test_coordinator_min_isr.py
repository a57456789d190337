"""transaction.state.log.min.isr on three brokers: __transaction_state is created with min.insync.replicas 2 (Kafka's
default), and a transactional producer cannot start while the partition of its transactional id has a single
in-sync replica (its writes would not be acks=all safe); it can once the replicas are back."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.embedded import Cluster, wait_until

TRANSACTION_STATE = "__transaction_state"


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
    with Cluster(3, zookeeper=odradek_zookeeper.connect + chroot, data_dir=tmp_path_factory.mktemp("min-isr"),
                 settings={"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}) as c:
        yield c


def transactional_producer(bootstrap: str, timeout_s: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:6]}",
                         "log_level": 0})
    producer.init_transactions(timeout_s)


def isr(admin) -> list[int]:
    return admin.list_topics(TRANSACTION_STATE, timeout=10).topics[TRANSACTION_STATE].partitions[0].isrs


def test_transactions_need_transaction_state_log_min_isr_replicas(cluster):
    transactional_producer(cluster.bootstrap_servers, 30)  # creates __transaction_state
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    resource = ConfigResource("topic", TRANSACTION_STATE)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["min.insync.replicas"].value == "2"

    leader_id = admin.list_topics(TRANSACTION_STATE, timeout=10).topics[TRANSACTION_STATE].partitions[0].leader
    leader = cluster.broker(leader_id)
    others = [b for b in cluster.brokers if b.node_id != leader_id]
    for broker in others:
        broker.stop()
    leader_admin = AdminClient({"bootstrap.servers": leader.bootstrap_servers, "log_level": 0})
    assert wait_until(lambda: isr(leader_admin) == [leader_id], timeout=30)
    with pytest.raises(KafkaException):
        transactional_producer(leader.bootstrap_servers, 5)

    for broker in others:
        broker.start()
    assert wait_until(lambda: len(isr(leader_admin)) == 3, timeout=60)
    transactional_producer(leader.bootstrap_servers, 30)
