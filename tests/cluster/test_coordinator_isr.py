"""The coordinators' writes and the ISR on three brokers (replica.lag.time.max.ms 4 s). transaction.state.log.min.isr:
__transaction_state is created with min.insync.replicas 2 (Kafka's default), and a transactional producer cannot start
while the partition of its transactional id has a single in-sync replica (its writes would not be acks=all safe); it
can once the replicas are back. Group metadata: a consumer's SyncGroup is answered once the in-sync replicas have the
group's record, so with a follower of the group's partition stopped the assignment waits until the leader has taken
that follower out of the ISR."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.embedded import wait_until

from .conftest import new_cluster, python_defects

TRANSACTION_STATE = "__transaction_state"
CONSUMER_OFFSETS = "__consumer_offsets"
LAG_TIME_S = 4


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "coordinator-isr", settings={
            "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
            "replica.lag.time.max.ms": LAG_TIME_S * 1000}) as c:
        yield c
    assert not python_defects(c)


def transactional_producer(bootstrap: str, timeout_s: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:6]}",
                         "log_level": 0})
    producer.init_transactions(timeout_s)


def isr(admin, topic: str = TRANSACTION_STATE) -> list[int]:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs


def seconds_to_assignment(bootstrap: str, topic: str) -> float:
    """Seconds from a new consumer's subscription until its group hands it its partitions."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "log_level": 0})
    assigned = []
    start = time.monotonic()
    consumer.subscribe([topic], on_assign=lambda c, partitions: assigned.append(time.monotonic()))
    try:
        assert wait_until(lambda: consumer.poll(0.2) is not None or assigned, timeout=60, interval=0)
        return assigned[0] - start
    finally:
        consumer.close()


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


def test_sync_group_waits_for_the_isr_to_have_the_group_record(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    topic = f"grouped-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    seconds_to_assignment(cluster.bootstrap_servers, topic)  # creates __consumer_offsets
    assert wait_until(lambda: len(isr(admin, CONSUMER_OFFSETS)) == 3, timeout=60)
    leader_id = admin.list_topics(CONSUMER_OFFSETS, timeout=10).topics[CONSUMER_OFFSETS].partitions[0].leader
    leader = cluster.broker(leader_id)
    follower = next(b for b in cluster.brokers if b.node_id != leader_id)
    assert seconds_to_assignment(leader.bootstrap_servers, topic) < LAG_TIME_S / 2

    os.kill(follower.process.pid, signal.SIGSTOP)
    try:
        waited = seconds_to_assignment(leader.bootstrap_servers, topic)
    finally:
        os.kill(follower.process.pid, signal.SIGCONT)
    print(f"assignment with a stopped follower of the group's partition: {waited:.1f} s")
    assert waited >= LAG_TIME_S / 2  # until the leader dropped the stopped follower from the ISR
