"""Leadership when brokers die (session timeout 6 s): a killed broker's partitions go offline (leader -1 in the state
znodes and in every survivor's Metadata) and it leads them again, with its data, when it comes back; a killed
controller's successor elects the leaders of topics created after it."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, wait_until

from .conftest import metadata_of
from .test_failover import controller_of

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000


def state(zk, topic: str, index: int) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{index}/state")[0])


def leaders(broker, topic: str) -> dict[int, int]:
    return {p.id: p.leader for p in metadata_of(broker).topics[topic].partitions.values()}


def create(cluster, broker, topic: str, partitions: int = 6) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_partition(bootstrap: str, topic: str, index: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "log_level": 0})
    consumer.assign([TopicPartition(topic, index, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_a_lost_broker_s_partitions_go_offline_and_it_leads_them_again_when_back(cluster, zk):
    topic = f"loss-{uuid.uuid4().hex[:6]}"
    create(cluster, cluster.brokers[0], topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    for index in range(6):
        for n in range(10):
            producer.produce(topic, value=f"{index}-{n}".encode(), partition=index)
    assert producer.flush(30) == 0
    victim = next(b for b in cluster.brokers if b.node_id != controller_of(zk))
    before = leaders(cluster.brokers[0], topic)
    lost = sorted(index for index, leader in before.items() if leader == victim.node_id)
    assert len(lost) == 2
    epochs = {index: state(zk, topic, index)["leader_epoch"] for index in lost}

    victim.kill()
    survivors = [b for b in cluster.brokers if b is not victim]
    offline = {index: (-1 if index in lost else leader) for index, leader in before.items()}
    for broker in survivors:
        assert wait_until(lambda: leaders(broker, topic) == offline, timeout=SESSION_TIMEOUT_S + 10), broker.node_id
    for index in lost:
        offline_state = state(zk, topic, index)
        assert offline_state["leader"] == -1 and offline_state["isr"] == [victim.node_id]
        assert offline_state["leader_epoch"] == epochs[index] + 1

    restarted_at = time.monotonic()
    victim.start(timeout=SESSION_TIMEOUT_S + 20)
    for broker in cluster.brokers:
        assert wait_until(lambda: leaders(broker, topic) == before, timeout=SESSION_TIMEOUT_S + 10), broker.node_id
    took = time.monotonic() - restarted_at
    print(f"broker {victim.node_id} killed -9 and restarted: leads its partitions again {took:.1f}s after start")
    for index in lost:
        assert state(zk, topic, index)["leader_epoch"] == epochs[index] + 2
        assert read_partition(cluster.bootstrap_servers, topic, index, 10) == [f"{index}-{n}".encode()
                                                                              for n in range(10)]


def test_topics_are_created_after_the_controller_is_killed(cluster, zk):
    old = controller_of(zk)
    cluster.broker(old).kill()
    try:
        new = wait_until(lambda: (c := controller_of(zk)) not in (None, old) and c, timeout=SESSION_TIMEOUT_S + 20)
        assert new
        survivor = cluster.broker(new)
        topic = f"after-{uuid.uuid4().hex[:6]}"
        create(cluster, survivor, topic, partitions=4)
        seen = leaders(survivor, topic)
        assert sorted(set(seen.values())) == sorted(b.node_id for b in cluster.brokers if b.node_id != old)
        assert all(state(zk, topic, index)["controller_epoch"] == int(zk.get("/controller_epoch")[0])
                   for index in range(4))
    finally:
        cluster.broker(old).start(timeout=SESSION_TIMEOUT_S + 20)
