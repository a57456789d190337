"""Brokers that disagree on offsets.topic.num.partitions / transaction.state.log.num.partitions: the partition count
that places a group or a transactional id is that of the existing __consumer_offsets / __transaction_state, as in
Kafka, so a broker started with other settings beside a cluster finds the same coordinators as the others and
clients commit offsets and transactions through it."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until
from tests.broker.raw_client import RawClient

from .conftest import new_cluster, python_defects

GROUP_KEY, TRANSACTION_KEY = 0, 1
KEYS = [f"key-{n}" for n in range(12)]


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "internal-partitions", settings={
            "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1}) as c:
        yield c
    assert not python_defects(c)


def coordinators(broker, key_type: int) -> list[tuple[int, int]]:
    """(error code, node id) of FindCoordinator v3 for each of KEYS, asked of `broker`."""
    client = RawClient(broker.port)
    try:
        answers = [client.call("FindCoordinator", 3, key=key, key_type=key_type) for key in KEYS]
    finally:
        client.close()
    return [(answer.error_code, answer.node_id) for answer in answers]


def settled_coordinators(broker, key_type: int) -> list[tuple[int, int]]:
    """coordinators() once every key has one (the topic may still be being created)."""
    return wait_until(lambda: (lambda found: found if all(code == 0 for code, _ in found) else None)(
        coordinators(broker, key_type)), timeout=30) or coordinators(broker, key_type)


def test_brokers_with_other_partition_counts_agree_on_coordinators(cluster):
    topic = f"t-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    expected = {key_type: settled_coordinators(cluster.brokers[0], key_type)
                for key_type in (GROUP_KEY, TRANSACTION_KEY)}  # creates both topics with one partition

    extra = cluster.new_broker(4, settings={"offsets.topic.num.partitions": 7,
                                            "transaction.state.log.num.partitions": 5})
    cluster.brokers.append(extra)
    extra.start()
    for broker in cluster.brokers:
        for key_type in (GROUP_KEY, TRANSACTION_KEY):
            assert settled_coordinators(broker, key_type) == expected[key_type], (broker.node_id, key_type)

    # a transaction with offsets and a plain commit, each client bootstrapped from the broker of other settings only
    group = f"g-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": extra.bootstrap_servers, "transactional.id": f"tx-{group}",
                         "log_level": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    consumer = Consumer({"bootstrap.servers": extra.bootstrap_servers, "group.id": group, "log_level": 0,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0)])
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    assert wait_until(lambda: consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 1, timeout=30)
    consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    assert consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 2
    consumer.close()
