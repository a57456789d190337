"""Fetch from the closest replica (KIP-392) on three brokers in racks a, b and c with
replica.selector.class = RackAwareReplicaSelector: a confluent-kafka consumer with client.rack=b reads a partition
led by broker 1 (rack a) from broker 2 (rack b), every record at its offset, and goes back to the leader when
broker 2 dies. Which broker served the records is read from each broker's Prometheus counters."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.replica_selector import NO_PREFERRED_REPLICA, FollowerView, preferred_read_replica
from odradek.config import RACK_AWARE_SELECTOR
from odradek.embedded import wait_until
from tests.metrics.test_metrics import free_port, scrape

from .conftest import new_cluster

RACKS = {1: "a", 2: "b", 3: "c"}


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    c = new_cluster(odradek_zookeeper, tmp_path_factory, "follower-fetch",
                    settings={"replica.selector.class": RACK_AWARE_SELECTOR, "replica.lag.time.max.ms": 5000})
    for broker in c.brokers:
        broker.settings.update({"broker.rack": RACKS[broker.node_id], "metrics.port": free_port()})
    with c:
        yield c


def messages_out(broker, topic: str) -> float:
    return scrape(broker.settings["metrics.port"]).get(
        ("odradek_topic_messages_out_total", frozenset({("topic", topic)})), 0)


def produce(bootstrap: str, topic: str, values) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5, "acks": "all"})
    errors = []
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(60)
    assert errors == [None] * len(values)


def consume(consumer, count: int, timeout_s: float) -> list[tuple[int, bytes]]:
    """(offset, value) of the next `count` records, fewer if they do not come within the timeout."""
    got = []
    wait_until(lambda: got.extend((m.offset(), m.value()) for m in consumer.consume(500, timeout=0.5)
                                  if m.error() is None) or len(got) >= count, timeout=timeout_s, interval=0)
    return got


def test_consumer_in_rack_b_reads_from_broker_b_and_back_to_the_leader_when_it_dies(cluster):
    topic = f"near-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
    first = [f"first-{i}".encode() for i in range(2000)]
    produce(cluster.bootstrap_servers, topic, first)
    leader, near, far = cluster.broker(1), cluster.broker(2), cluster.broker(3)
    leader_out_before = messages_out(leader, topic)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "near", "client.rack": "b",
                         "enable.auto.commit": False, "log_level": 0, "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = consume(consumer, len(first), 60)
        assert got == list(enumerate(first))
        assert messages_out(near, topic) >= len(first)  # broker 2 served them ...
        assert messages_out(leader, topic) == leader_out_before  # ... not the leader
        assert messages_out(far, topic) == 0

        near.kill()
        second = [f"second-{i}".encode() for i in range(500)]
        produce(leader.bootstrap_servers, topic, second)  # acks=all: once the ISR has let broker 2 go
        got = consume(consumer, len(second), 60)
        assert got == list(enumerate(second, len(first)))
        assert messages_out(leader, topic) >= leader_out_before + len(second)
    finally:
        consumer.close()


# ---- the choice itself, over plain values
FOLLOWERS = [FollowerView(2, 100, 1000), FollowerView(3, 100, 1000)]


def choose(client_rack, racks=RACKS, isr=(1, 2, 3), followers=FOLLOWERS, fetch_offset=50,
           selector=RACK_AWARE_SELECTOR):
    return preferred_read_replica(selector, client_rack, 1, fetch_offset, followers, isr, racks, 1500)


def test_rack_aware_selector_picks_an_in_sync_follower_of_the_consumers_rack():
    assert choose("b") == 2
    assert choose("c") == 3
    assert choose("a") == NO_PREFERRED_REPLICA  # the leader is in the consumer's rack
    assert choose("z") == NO_PREFERRED_REPLICA
    assert choose("") == NO_PREFERRED_REPLICA
    assert choose("b", selector="") == NO_PREFERRED_REPLICA  # no selector: the leader serves everyone
    assert choose("b", isr=(1, 3)) == NO_PREFERRED_REPLICA  # out of sync
    assert choose("b", racks={1: "a", 3: "c"}) == NO_PREFERRED_REPLICA  # not registered
    assert choose("b", fetch_offset=101) == NO_PREFERRED_REPLICA  # lacks the fetch offset
    two_in_b = {1: "a", 2: "b", 3: "b"}
    assert choose("b", racks=two_in_b, followers=[FollowerView(2, 90, 1400), FollowerView(3, 100, 1000)]) == 3
    assert choose("b", racks=two_in_b, followers=[FollowerView(2, 100, 1400), FollowerView(3, 100, 1000)]) == 2
