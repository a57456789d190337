"""ElectLeaders on a three-broker cluster, asked of a broker that is not the controller, with confluent-kafka's
AdminClient.elect_leaders: a preferred election moves leadership back to the first replica once it is in the ISR
again (leader epoch bumped, every record still there), is not needed twice and not possible while that replica is
down; an unclean election gives an offline partition to a live out-of-sync replica and is not needed while the
leader lives. And auto.leader.rebalance.enable: with a short leader.imbalance.check.interval.seconds, leadership
goes back to a restarted broker without being asked."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.cluster.elections import PREFERRED_ELECTION, UNCLEAN_ELECTION, elected, imbalanced_partitions
from odradek.embedded import wait_until
from odradek.errors import ErrorCode
from odradek.errors import KafkaError as BrokerError

from .test_leader_epochs import create_on
from .test_replication import produce, read_all, state

from .conftest import new_cluster


def controller_id(zk) -> int:
    return json.loads(zk.get("/controller")[0])["brokerid"]


def elect(broker, election_type, topic: str) -> int:
    """The error code ElectLeaders answers for the topic's partition 0, asked of `broker`."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    partition = TopicPartition(topic, 0)
    error = admin.elect_leaders(election_type, [partition]).result(timeout=30)[partition]
    return KafkaError.NO_ERROR if error is None else error.code()


def in_sync(zk, topic: str, replicas: list[int]) -> bool:
    return sorted(state(zk, topic)["isr"]) == sorted(replicas)


def refusal(election_type, replicas, leader, isr, live) -> int:
    with pytest.raises(BrokerError) as refused:
        elected(election_type, replicas, leader, isr, live)
    return refused.value.code


def test_what_an_asked_for_election_decides():
    assert elected(PREFERRED_ELECTION, [1, 2, 3], 2, [2, 1], {1, 2, 3}) == (1, [2, 1])
    assert refusal(PREFERRED_ELECTION, [1, 2, 3], 1, [1, 2], {1, 2, 3}) == ErrorCode.ELECTION_NOT_NEEDED
    assert refusal(PREFERRED_ELECTION, [1, 2, 3], 2, [2, 3], {1, 2, 3}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert refusal(PREFERRED_ELECTION, [1, 2, 3], 2, [2, 1], {2, 3}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert refusal(UNCLEAN_ELECTION, [1, 2], 1, [1], {1, 2}) == ErrorCode.ELECTION_NOT_NEEDED
    assert elected(UNCLEAN_ELECTION, [1, 2, 3], -1, [3, 1], {2, 3}) == (3, [3])  # a live ISR member first
    assert elected(UNCLEAN_ELECTION, [1, 2, 3], -1, [1], {2, 3}) == (2, [2])  # else any live replica, alone
    assert refusal(UNCLEAN_ELECTION, [1, 2], -1, [1], {3}) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert refusal(7, [1], 1, [1], {1}) == ErrorCode.INVALID_REQUEST


def test_the_auto_rebalance_moves_what_is_above_the_imbalance_percentage():
    # broker 1 is the preferred replica of ten partitions; broker 2 leads one of them (10%), then two (20%)
    led = [(n, [1, 2], 1, [1, 2]) for n in range(9)] + [(9, [1, 2], 2, [2, 1])]
    assert imbalanced_partitions(led, {1, 2}, 10) == []  # not above 10%
    led[0] = (0, [1, 2], 2, [2, 1])
    assert imbalanced_partitions(led, {1, 2}, 10) == [0, 9]
    assert imbalanced_partitions(led, {2}, 10) == []  # the preferred replica is down
    led[9] = (9, [1, 2], 2, [2])  # out of the ISR: not moved
    assert imbalanced_partitions(led, {1, 2}, 10) == [0]


def test_a_preferred_election_moves_leadership_back_to_the_first_replica(cluster, zk):
    preferred, other = [b for b in cluster.brokers if b.node_id != controller_id(zk)]
    asked_of = cluster.broker(controller_id(zk))  # any broker; the controller holds no replica here
    topic = f"preferred-{uuid.uuid4().hex[:6]}"
    replicas = [preferred.node_id, other.node_id]
    create_on(cluster, topic, replicas)
    assert wait_until(lambda: in_sync(zk, topic, replicas), timeout=15)
    assert elect(asked_of, ElectionType.PREFERRED, topic) == KafkaError.ELECTION_NOT_NEEDED

    preferred.stop()  # controlled shutdown: the other replica leads
    assert state(zk, topic)["leader"] == other.node_id
    values = [f"v{n}".encode() for n in range(200)]
    assert produce(cluster.bootstrap_servers, topic, values, acks="all") == [None] * 200
    assert elect(asked_of, ElectionType.PREFERRED, topic) == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE

    preferred.start(timeout=30)
    assert wait_until(lambda: in_sync(zk, topic, replicas), timeout=20)
    before = state(zk, topic)
    assert before["leader"] == other.node_id  # nothing moves it back without being asked (auto rebalance: 300 s)
    asked_at = time.monotonic()
    assert elect(asked_of, ElectionType.PREFERRED, topic) == KafkaError.NO_ERROR
    print(f"preferred election asked of broker {asked_of.node_id}: answered "
          f"{(time.monotonic() - asked_at) * 1000:.0f} ms later, with the new leader in force")
    after = state(zk, topic)
    assert after["leader"] == preferred.node_id and after["leader_epoch"] == before["leader_epoch"] + 1
    assert sorted(after["isr"]) == sorted(replicas)
    assert elect(asked_of, ElectionType.PREFERRED, topic) == KafkaError.ELECTION_NOT_NEEDED
    assert read_all(preferred.bootstrap_servers, topic) == values


def test_an_unclean_election_gives_an_offline_partition_to_an_out_of_sync_replica(cluster, zk):
    first, second = [b for b in cluster.brokers if b.node_id != controller_id(zk)]
    asked_of = cluster.broker(controller_id(zk))
    topic = f"unclean-{uuid.uuid4().hex[:6]}"
    create_on(cluster, topic, [first.node_id, second.node_id])
    assert wait_until(lambda: in_sync(zk, topic, [first.node_id, second.node_id]), timeout=15)
    assert elect(asked_of, ElectionType.UNCLEAN, topic) == KafkaError.ELECTION_NOT_NEEDED

    second.stop()  # out of the ISR
    assert produce(cluster.bootstrap_servers, topic, [b"lost"] * 10, acks="all") == [None] * 10
    first.stop()  # the last ISR member: offline
    second.start(timeout=30)
    try:
        time.sleep(1)
        assert state(zk, topic)["leader"] == -1  # unclean.leader.election.enable is off
        assert elect(asked_of, ElectionType.UNCLEAN, topic) == KafkaError.NO_ERROR
        assert state(zk, topic)["leader"] == second.node_id and state(zk, topic)["isr"] == [second.node_id]
        assert produce(cluster.bootstrap_servers, topic, [b"after"] * 5, acks="all") == [None] * 5
        assert read_all(second.bootstrap_servers, topic) == [b"after"] * 5
    finally:
        first.start(timeout=30)


@pytest.fixture(scope="module")
def rebalancing_cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "rebalance",
                     settings={"leader.imbalance.check.interval.seconds": 1}) as c:
        yield c


def test_the_controller_moves_leadership_back_to_a_restarted_broker(rebalancing_cluster):
    cluster = rebalancing_cluster
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    try:
        preferred, other = [b for b in cluster.brokers if b.node_id != controller_id(zk)]
        topic = f"rebalance-{uuid.uuid4().hex[:6]}"
        create_on(cluster, topic, [preferred.node_id, other.node_id])
        assert wait_until(lambda: in_sync(zk, topic, [preferred.node_id, other.node_id]), timeout=15)
        preferred.stop()
        assert state(zk, topic)["leader"] == other.node_id
        restarted_at = time.monotonic()
        preferred.start(timeout=30)
        assert wait_until(lambda: state(zk, topic)["leader"] == preferred.node_id, timeout=30)
        print(f"leadership back on broker {preferred.node_id} {time.monotonic() - restarted_at:.1f}s after its "
              f"restart (leader.imbalance.check.interval.seconds=1)")
    finally:
        zk.stop()
        zk.close()
