"""Replication throttles on two brokers: a follower that comes back to a partition 20 MB behind catches up at about
2 MB/s when the partition is throttled on the leader's side (leader.replication.throttled.replicas with the
leader's dynamic leader.replication.throttled.rate) or on the follower's (follower.replication.throttled.replicas
with its follower.replication.throttled.rate), and much faster without a throttle. The rates are sampled over two
1 s windows (replication.quota.window.num=2; Kafka's 11 would let the first 20 MB through as a burst)."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.embedded import wait_until

from .conftest import new_cluster, python_defects

BACKLOG = 20_000_000
RATE = 2_000_000


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "throttles", 2, {"replication.quota.window.num": 2}) as c:
        yield c
    assert not python_defects(c)


def log_size(broker, topic: str) -> int:
    directory = broker.data_dir / f"{topic}-0"
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.exists() else 0


def catch_up_seconds(cluster, topic_configs: dict, broker_configs: dict) -> float:
    """Seconds broker 2 takes, from the first bytes it copies, to copy a 20 MB backlog of a partition led by broker 1 that it
    missed while stopped, under these topic configs and dynamic broker configs ({broker id: {key: value}})."""
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap_servers, "log_level": 0})
    topic = f"throttled-{uuid.uuid4().hex[:6]}"
    assert wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 2, timeout=30)  # broker 2 is back
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]], config=topic_configs)])[topic].result(30)
    for node_id in (1, 2):  # replaces each broker's dynamic configs: what an earlier call set goes
        resource = ConfigResource("broker", str(node_id), set_config=broker_configs.get(node_id, {}))
        admin.alter_configs([resource])[resource].result(30)
    leader, follower = cluster.broker(1), cluster.broker(2)
    follower.stop()
    producer = Producer({"bootstrap.servers": leader.bootstrap_servers, "log_level": 0, "acks": 1,
                         "linger.ms": 20, "batch.size": 1000000})
    value = os.urandom(100_000)
    for _ in range(BACKLOG // len(value)):
        producer.produce(topic, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    backlog = log_size(leader, topic)
    assert backlog >= BACKLOG
    follower.start()
    assert wait_until(lambda: log_size(follower, topic) > 0, timeout=60, interval=0.02)
    start = time.monotonic()
    assert wait_until(lambda: log_size(follower, topic) >= backlog, timeout=90, interval=0.05)
    return time.monotonic() - start


def test_replication_throttles(cluster):
    unthrottled = catch_up_seconds(cluster, {}, {})
    leader_side = catch_up_seconds(cluster, {"leader.replication.throttled.replicas": "0:1"},
                                   {1: {"leader.replication.throttled.rate": str(RATE)}})
    follower_side = catch_up_seconds(cluster, {"follower.replication.throttled.replicas": "*"},
                                     {2: {"follower.replication.throttled.rate": str(RATE)}})
    print(f"20 MB catch-up: unthrottled {unthrottled:.1f} s, leader throttle {leader_side:.1f} s, "
          f"follower throttle {follower_side:.1f} s")
    expected = BACKLOG / RATE  # 10 s
    assert expected * 0.6 < leader_side < expected * 3
    assert expected * 0.6 < follower_side < expected * 3
    assert unthrottled < expected * 0.5
