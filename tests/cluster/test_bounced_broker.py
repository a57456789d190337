"""A broker killed (kill -9) and started again at once, within its old ZooKeeper session: its new registration has a
new broker epoch (czxid), and the controller takes it for a broker that failed and started again. Its partitions'
leadership moves to another in-sync replica under a new leader epoch and it rejoins the ISR only after catching up,
also when it was the controller itself; a broker whose log lost its tail while down loses no acknowledged record."""

from __future__ import annotations

import json
import threading
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.recipe.watchers import DataWatch

from odradek.cluster.controller import after_bounce, bounced_members
from odradek.cluster.metadata import PartitionAssignment
from odradek.cluster.zk_catalogue import PartitionState
from odradek.embedded import wait_until

from .conftest import leading_partition
from .test_broker_loss import read_partition
from .test_failover import controller_of

PARTITIONS = 3
COUNT = 200


def create(broker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)


def produce(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """COUNT records to each partition, every one acknowledged by acks=all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0})
    sent = {index: [f"{index}-{n}".encode() for n in range(COUNT)] for index in range(PARTITIONS)}
    failures = []
    for index, values in sent.items():
        for value in values:
            producer.produce(topic, value=value, partition=index,
                             on_delivery=lambda err, msg: err is not None and failures.append(err))
    assert producer.flush(30) == 0 and not failures
    return sent


def test_the_members_registered_after_the_state_was_written_are_bounced():
    state = PartitionState(1, 4, [1, 2, 3], 7)
    assert bounced_members(state, 100, {1: 50, 2: 150, 3: 60}) == {2}
    assert bounced_members(state, 100, {1: 50, 2: 60, 3: 70}) == set()
    assert bounced_members(None, None, {1: 150}) == set()


def test_a_bounced_leader_hands_over_and_a_sole_in_sync_one_leads_again_under_a_new_epoch():
    assert after_bounce([1, 2, 3], PartitionState(1, 4, [1, 2, 3], 7), {1, 2, 3}, {1}, 8) == PartitionState(
        2, 5, [2, 3], 8)
    assert after_bounce([1, 2, 3], PartitionState(1, 4, [1, 2, 3], 7), {1, 2, 3}, {3}, 8) == PartitionState(
        1, 4, [1, 2], 8)
    assert after_bounce([1, 2, 3], PartitionState(1, 4, [1], 7), {1, 2, 3}, {1}, 8) == PartitionState(1, 5, [1], 8)
    assert after_bounce([1, 2, 3], PartitionState(-1, 4, [1], 7), {1, 2}, {1}, 8) == PartitionState(1, 5, [1], 8)


def test_a_leader_takes_a_restarted_follower_back_only_on_its_new_process_s_fetches(tmp_path):
    with leading_partition(tmp_path) as (partition, now):
        for replica in (2, 3):
            partition.follower_fetched(replica, 1, now)
        partition.forget_restarted({1: 10, 2: 20, 3: 30}, now)
        # the controller took broker 3, restarted under epoch 40, out of the ISR; its old fetches do not count
        partition.update_assignment(PartitionAssignment(1, 0, [1, 2, 3], [1, 2]), now)
        partition.forget_restarted({1: 10, 2: 20, 3: 40}, now)
        assert partition.wanted_isr(now, 10_000, {1, 2, 3}) is None
        partition.follower_fetched(3, 1, now)
        assert partition.wanted_isr(now, 10_000, {1, 2, 3}) == [1, 2, 3]


class StateLog:
    """Every state each partition's znode takes, in order (a DataWatch per partition)."""

    def __init__(self, zk, topic: str):
        self.states: dict[int, list[dict]] = {index: [] for index in range(PARTITIONS)}
        self._lock = threading.Lock()
        for index in range(PARTITIONS):
            DataWatch(zk, f"/brokers/topics/{topic}/partitions/{index}/state", self._taker(index))

    def _taker(self, index: int):
        def take(data, stat) -> None:
            if data is not None:
                with self._lock:
                    self.states[index].append(json.loads(data))
        return take

    def latest(self, index: int) -> dict:
        with self._lock:
            return self.states[index][-1]

    def since(self, index: int, count: int) -> list[dict]:
        with self._lock:
            return list(self.states[index][count:])


def bounce(cluster, zk, victim, cut_tail=None) -> None:
    """kill -9 the victim and start it again at once (`cut_tail` runs on its data while it is down); returns once
    it registered again, under a new broker epoch."""
    path = f"/brokers/ids/{victim.node_id}"
    old_epoch = zk.get(path)[1].czxid
    victim.kill()
    if cut_tail is not None:
        cut_tail(victim.data_dir)
    victim.start(timeout=60)
    wait_until(lambda: zk.exists(path) is not None and zk.exists(path).czxid != old_epoch, timeout=30)


def check_bounce(cluster, zk, victim) -> None:
    topic = f"bounce-{uuid.uuid4().hex[:6]}"
    create(cluster.brokers[0], topic)
    produce(cluster.bootstrap_servers, topic)
    log = StateLog(zk, topic)
    wait_until(lambda: all(len(log.latest(i)["isr"]) == 3 for i in range(PARTITIONS)), timeout=30)
    led = [i for i in range(PARTITIONS) if log.latest(i)["leader"] == victim.node_id]
    assert led, "the victim leads none of the partitions"
    before = {i: (len(log.states[i]), log.latest(i)["leader_epoch"]) for i in range(PARTITIONS)}
    bounce(cluster, zk, victim)

    def moved(index: int) -> bool:
        count, epoch = before[index]
        return any(s["leader"] not in (victim.node_id, -1) and s["leader_epoch"] > epoch
                   and victim.node_id not in s["isr"] for s in log.since(index, count))

    wait_until(lambda: all(moved(i) for i in led), timeout=30)
    # back in every ISR once caught up, never while it had not (its first state after the bounce excludes it)
    wait_until(lambda: all(victim.node_id in log.latest(i)["isr"] for i in range(PARTITIONS)), timeout=60)
    for index in range(PARTITIONS):
        after = log.since(index, before[index][0])
        assert after and victim.node_id not in after[0]["isr"], (index, after)


def test_a_bounced_leader_loses_its_leadership_and_rejoins_the_isr_after_catching_up(cluster, zk):
    victim = next(b for b in cluster.brokers if b.node_id != controller_of(zk))
    check_bounce(cluster, zk, victim)


def test_a_bounced_controller_is_seen_by_its_successor(cluster, zk):
    wait_until(lambda: controller_of(zk) is not None, timeout=30)
    victim = cluster.broker(controller_of(zk))
    check_bounce(cluster, zk, victim)
    wait_until(lambda: controller_of(zk) is not None, timeout=30)


def test_a_bounced_leader_whose_log_lost_its_tail_loses_no_acknowledged_record(cluster, zk):
    topic = f"cut-{uuid.uuid4().hex[:6]}"
    create(cluster.brokers[0], topic)
    sent = produce(cluster.bootstrap_servers, topic)
    log = StateLog(zk, topic)
    wait_until(lambda: all(len(log.latest(i)["isr"]) == 3 for i in range(PARTITIONS)), timeout=30)
    victim = cluster.broker(log.latest(0)["leader"])

    def cut(data_dir) -> None:
        for index in range(PARTITIONS):
            segment = sorted((data_dir / f"{topic}-{index}").glob("*.log"))[-1]
            with open(segment, "r+b") as file:
                file.truncate(segment.stat().st_size // 3)

    bounce(cluster, zk, victim, cut)
    wait_until(lambda: all(victim.node_id in log.latest(i)["isr"] for i in range(PARTITIONS)), timeout=60)
    # read from every replica: each in turn leads, the others stopped cleanly moving leadership to it
    for reader in cluster.brokers:
        others = [b for b in cluster.brokers if b is not reader]
        for other in others:
            other.stop()
        wait_until(lambda: all(log.latest(i)["leader"] == reader.node_id for i in range(PARTITIONS)), timeout=60)
        for index in range(PARTITIONS):
            assert read_partition(reader.bootstrap_servers, topic, index, COUNT) == sent[index], (reader.node_id,
                                                                                                 index)
        for other in others:
            other.start(timeout=60)
        wait_until(lambda: all(len(log.latest(i)["isr"]) == 3 for i in range(PARTITIONS)), timeout=60)


def test_a_controlled_shutdown_its_killed_predecessor_asked_does_not_hold_the_restarted_broker(cluster, zk):
    victim = next(b for b in cluster.brokers if b.node_id != controller_of(zk))
    path = f"/admin/controlled_shutdown/{victim.node_id}"
    victim.kill()
    zk.create(path, b"", ephemeral=True)  # as the killed process left it: its session has not timed out
    victim.start(timeout=60)
    wait_until(lambda: zk.exists(path) is None, timeout=30)
