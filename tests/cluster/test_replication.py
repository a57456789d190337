"""Replication on a three-broker cluster (session timeout 6 s, replica.lag.time.max.ms 5 s): acks=all records on
every replica's log byte for byte; a paused follower leaving the ISR and min.insync.replicas answering for it; its
return to the ISR; a killed leader replaced from the ISR with every acknowledged record kept; an old leader's
unacknowledged tail cut when it comes back as a follower; consumers never above the high watermark."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.config import LogConfig
from odradek.embedded import Cluster, wait_until
from odradek.errors import ErrorCode
from odradek.errors import KafkaError as OdradekError

from .conftest import leading_partition, new_cluster

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000
LAG_TIME_MS = 5000


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "replication",
                     settings={"replica.lag.time.max.ms": LAG_TIME_MS}) as c:
        yield c


def state(zk, topic: str) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])


def create(cluster, topic: str, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2", **configs})])[topic].result(30)


def segment_bytes(broker, topic: str) -> bytes:
    path = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else b""


def produce(bootstrap: str, topic: str, values, **settings) -> list:
    """Each record's delivery error (None when acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5, **settings})
    errors = []
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, msg: errors.append(err))
    producer.flush(60)
    return errors


def read_all(bootstrap: str, topic: str, wait_s: float = 3.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, idle_until = [], time.monotonic() + wait_s
    while time.monotonic() < idle_until:
        message = consumer.poll(0.3)
        if message is not None and message.error() is None:
            values.append(message.value())
            idle_until = time.monotonic() + wait_s
    consumer.close()
    return values


def leader_of(cluster, zk, topic: str):
    return cluster.broker(state(zk, topic)["leader"])


def pause(broker) -> None:
    os.kill(broker.process.pid, signal.SIGSTOP)


def resume(broker) -> None:
    os.kill(broker.process.pid, signal.SIGCONT)


def test_acks_all_records_are_on_every_replica_byte_for_byte(cluster, zk):
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    create(cluster, topic)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    values = [f"record-{n}".encode() for n in range(500)]
    assert produce(cluster.bootstrap_servers, topic, values, acks="all") == [None] * 500
    leader = leader_of(cluster, zk, topic)
    on_leader = segment_bytes(leader, topic)
    assert len(on_leader) > 500 * 8
    for broker in cluster.brokers:  # acks=all answered once every ISR member had them
        assert segment_bytes(broker, topic) == on_leader, broker.node_id
    assert read_all(cluster.bootstrap_servers, topic) == values


def test_an_isr_shrink_counts_for_min_insync_from_when_it_is_decided(tmp_path):
    """The leader writes an ISR change to ZooKeeper off the event loop and hears it back through its watch; a produce
    in between must not be checked against the ISR being left (it passed, was appended, and then failed with
    NOT_ENOUGH_REPLICAS_AFTER_APPEND), while the high watermark still waits for every member until the change is
    written (the write may lose to the controller's)."""
    with leading_partition(tmp_path, LogConfig(min_insync_replicas=2)) as (partition, now):
        partition.follower_fetched(2, 1, now)
        assert partition.high_watermark == 0  # replica 3 has not fetched it

        partition.begin_isr_change([1])
        with pytest.raises(OdradekError) as refused:
            partition.check_min_insync()
        assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert partition.high_watermark == 0
        partition.end_isr_change(0, written=False)  # lost to the controller: the ISR stays
        partition.check_min_insync()
        assert partition.assignment.isr == [1, 2, 3]

        partition.begin_isr_change([1, 2])
        partition.check_min_insync()  # two replicas kept, as min.insync.replicas asks
        partition.end_isr_change(0, written=True)
        assert partition.assignment.isr == [1, 2]
        assert partition.high_watermark == 1  # replica 2 has it, and 3 no longer counts


def test_paused_followers_leave_the_isr_then_min_insync_refuses_and_they_rejoin(cluster, zk):
    topic = f"isr-{uuid.uuid4().hex[:6]}"
    create(cluster, topic)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    leader = leader_of(cluster, zk, topic)
    first, second = [b for b in cluster.brokers if b is not leader]
    pause(first)
    try:
        paused_at = time.monotonic()
        assert wait_until(lambda: first.node_id not in state(zk, topic)["isr"], timeout=SESSION_TIMEOUT_S + 10)
        print(f"paused follower left the ISR after {time.monotonic() - paused_at:.1f}s "
              f"(replica.lag.time.max.ms {LAG_TIME_MS})")
        assert produce(leader.bootstrap_servers, topic, [b"with-two"], acks="all") == [None]
        pause(second)
        try:
            assert wait_until(lambda: state(zk, topic)["isr"] == [leader.node_id], timeout=SESSION_TIMEOUT_S + 10)
            errors = produce(leader.bootstrap_servers, topic, [b"with-one"], acks="all", retries=0,
                             **{"message.timeout.ms": 5000})
            assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
            assert produce(leader.bootstrap_servers, topic, [b"acks-1"], acks="1") == [None]
        finally:
            resume(second)
    finally:
        resume(first)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=SESSION_TIMEOUT_S + 20)
    on_leader = segment_bytes(leader, topic)
    assert wait_until(lambda: all(segment_bytes(b, topic) == on_leader for b in cluster.brokers), timeout=10)
    assert read_all(cluster.bootstrap_servers, topic) == [b"with-two", b"acks-1"]


def test_a_stopped_follower_stays_out_of_the_isr_until_it_is_back(cluster, zk):
    """A follower stopped cleanly still looks caught up to its leader for replica.lag.time.max.ms; once the
    controller has dropped it, the leader must not take it back while it is gone (each would rewrite the state znode
    every ISR check, and acks=all producers would wait on a broker that is not there)."""
    topic = f"stopped-{uuid.uuid4().hex[:6]}"
    create(cluster, topic)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    follower = next(b for b in cluster.brokers if b is not leader_of(cluster, zk, topic))
    follower.stop()
    try:
        assert wait_until(lambda: follower.node_id not in state(zk, topic)["isr"], timeout=15)
        version = zk.get(f"/brokers/topics/{topic}/partitions/0/state")[1].version
        time.sleep(2.0)  # eight ISR checks (every 250 ms), well within replica.lag.time.max.ms
        assert follower.node_id not in state(zk, topic)["isr"]
        assert zk.get(f"/brokers/topics/{topic}/partitions/0/state")[1].version == version
    finally:
        follower.start(timeout=SESSION_TIMEOUT_S + 30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=30)


def test_a_killed_leader_is_replaced_from_the_isr_and_its_unacknowledged_tail_is_cut(cluster, zk):
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    create(cluster, topic)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    acknowledged = [f"acked-{n}".encode() for n in range(200)]
    assert produce(cluster.bootstrap_servers, topic, acknowledged, acks="all", **{"enable.idempotence": True}) \
        == [None] * 200
    old_leader = leader_of(cluster, zk, topic)
    epoch = state(zk, topic)["leader_epoch"]
    followers = [b for b in cluster.brokers if b is not old_leader]
    for follower in followers:
        pause(follower)
    try:  # once their last fetches have been answered (replica.fetch.wait.max.ms 500), the leader appends what its
        # followers never get, all within replica.lag.time.max.ms (so the ISR is still all three)
        time.sleep(1.0)
        assert produce(old_leader.bootstrap_servers, topic, [b"unacknowledged"], acks="1") == [None]
        assert read_all(old_leader.bootstrap_servers, topic, wait_s=0.5) == acknowledged  # not above the HW
        old_leader.kill()
    finally:
        for follower in followers:
            resume(follower)
    killed_at = time.monotonic()
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60000})
    delivered = []
    producer.produce(topic, value=b"after", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(60)
    resumed = time.monotonic() - killed_at
    print(f"leader killed -9: producing resumed after {resumed:.1f}s (session timeout {SESSION_TIMEOUT_S:.0f}s)")
    assert delivered == [None]
    new_state = state(zk, topic)
    assert new_state["leader"] in {f.node_id for f in followers} and new_state["leader_epoch"] == epoch + 1
    assert old_leader.node_id not in new_state["isr"]

    old_leader.start(timeout=SESSION_TIMEOUT_S + 30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=30)
    new_leader = cluster.broker(new_state["leader"])
    on_leader = segment_bytes(new_leader, topic)
    assert wait_until(lambda: segment_bytes(old_leader, topic) == on_leader, timeout=10)
    assert read_all(cluster.bootstrap_servers, topic) == acknowledged + [b"after"]


def test_committed_offsets_survive_the_loss_of_the_coordinator_s_broker(cluster, zk):
    from odradek.coordinator.offsets_topic import partition_for

    topic = f"group-{uuid.uuid4().hex[:6]}"
    create(cluster, topic)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "log_level": 0,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    consumer.close()
    offsets_partitions = json.loads(zk.get("/brokers/topics/__consumer_offsets")[0])["partitions"]
    assert all(len(replicas) == 3 for replicas in offsets_partitions.values())  # offsets.topic.replication.factor
    index = partition_for(group, len(offsets_partitions))
    assert wait_until(lambda: sorted(
        json.loads(zk.get(f"/brokers/topics/__consumer_offsets/partitions/{index}/state")[0])["isr"]) == [1, 2, 3],
        timeout=15)
    offsets_state = json.loads(zk.get(f"/brokers/topics/__consumer_offsets/partitions/{index}/state")[0])
    coordinator = cluster.broker(offsets_state["leader"])
    coordinator.kill()
    try:
        survivors = ",".join(b.bootstrap_servers for b in cluster.brokers if b is not coordinator)
        consumer = Consumer({"bootstrap.servers": survivors, "group.id": group, "log_level": 0,
                             "enable.auto.commit": False})
        try:
            committed = None
            deadline = time.monotonic() + SESSION_TIMEOUT_S + 30
            while time.monotonic() < deadline:
                try:
                    committed = consumer.committed([TopicPartition(topic, 0)], timeout=5)[0].offset
                    break
                except KafkaException:
                    time.sleep(0.5)
            assert committed == 42
        finally:
            consumer.close()
    finally:
        coordinator.start(timeout=SESSION_TIMEOUT_S + 30)
