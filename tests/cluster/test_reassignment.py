"""Partition reassignment (KIP-455) on a three-broker cluster with kafka-python's admin client: while the new replica
cannot catch up the reassignment is listed with its adding and removing replicas and cancelling it goes back to the
original replicas; done, the data is on the new replicas before the old one goes, which deletes its copy. And the
`odradek reassign` and `odradek elect-leaders` commands."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition

from odradek.cluster.controller import next_state
from odradek.cluster.elections import completed_reassignment, reassigned
from odradek.cluster.zk_catalogue import PartitionState
from odradek.embedded import wait_until
from odradek.errors import ErrorCode, KafkaError
from tests.cli.run import odradek

from .test_leader_epochs import create_on
from .test_replication import pause, produce, read_all, resume, state

COUNT = 2000


@pytest.fixture(scope="module")
def admin(cluster):
    client = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap_servers, request_timeout_ms=15000)
    yield client
    client.close()


def topic_znode(zk, topic: str) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}")[0])


def test_what_a_reassignment_writes_and_when_it_ends():
    assert reassigned([1, 2], [], [], [2, 3]) == ([2, 3, 1], [3], [1])  # Kafka's RS = TRS + ORS, AR, RR
    assert reassigned([2, 3, 1], [3], [1], [3, 4]) == ([3, 4, 2, 1], [3, 4], [2, 1])  # from the original replicas
    assert reassigned([2, 3, 1], [3], [1], None) == ([2, 1], [], [])  # cancelled
    assert reassigned([1, 2], [], [], [1, 2]) == ([1, 2], [], [])  # already there: nothing under way
    with pytest.raises(KafkaError) as refused:
        reassigned([1, 2], [], [], None)
    assert refused.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert completed_reassignment([2, 3, 1], [1], 1, [1, 2], {1, 2, 3}) is None  # 3 has not caught up
    assert completed_reassignment([2, 3, 1], [1], 1, [1, 2, 3], {1, 2, 3}) == (2, [2, 3])  # 1 leaves: 2 leads
    assert completed_reassignment([2, 3, 1], [1], 3, [1, 2, 3], {1, 2, 3}) == (3, [2, 3])  # the leader stays
    assert completed_reassignment([2, 3, 1], [1], 1, [1, 2, 3], {1, 3}) == (3, [2, 3])  # the first live one
    # a cancelled move's added replica, leader meanwhile, is no replica any more: replaced from the ISR, dropped
    assert next_state([1, 2], PartitionState(3, 5, [3, 1, 2], 0), {1, 2, 3}, 0) == PartitionState(1, 6, [1, 2], 0)
    assert next_state([1, 2], PartitionState(1, 5, [1, 3, 2], 0), {1, 2, 3}, 0) == PartitionState(1, 5, [1, 2], 0)


def test_a_reassignment_copies_the_data_then_the_old_replica_deletes_its_copy(cluster, zk, admin):
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    new = next(b for b in cluster.brokers if b.node_id != controller)  # paused below: admin clients ask the controller
    old, kept = [b for b in cluster.brokers if b is not new]
    o, k, n = old.node_id, kept.node_id, new.node_id
    topic = f"move-{uuid.uuid4().hex[:6]}"
    partition = KafkaTopicPartition(topic, 0)
    create_on(cluster, topic, [o, k])
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == sorted([o, k]), timeout=15)
    values = [f"record-{n}".encode() for n in range(COUNT)]
    assert produce(cluster.bootstrap_servers, topic, values, acks="all") == [None] * COUNT

    assert admin.list_partition_reassignments() == {}  # kafka-python now knows the controller it sends these to
    pause(new)  # it cannot catch up: the reassignment stays under way
    try:
        assert admin.alter_partition_reassignments({partition: [k, n]}) == {partition: None}
        assert admin.list_partition_reassignments() == {
            partition: {"replicas": [k, n, o], "adding_replicas": [n], "removing_replicas": [o]}}
        assert topic_znode(zk, topic)["adding_replicas"] == {"0": [n]}
        time.sleep(1.5)  # the new replica has nothing: the old one keeps its place and its copy
        assert admin.list_partition_reassignments()[partition]["removing_replicas"] == [o]
        assert (old.data_dir / f"{topic}-0").exists()
        assert admin.alter_partition_reassignments({partition: None}) == {partition: None}  # cancel
        assert admin.list_partition_reassignments() == {}
        # the original replicas, in the order of the full set (target first), as Kafka's ReplicaAssignment
        assert topic_znode(zk, topic)["partitions"] == {"0": [k, o]}
    finally:
        resume(new)
    assert wait_until(lambda: not (new.data_dir / f"{topic}-0").exists(), timeout=10)

    asked_at = time.monotonic()
    assert admin.alter_partition_reassignments({partition: [k, n]}) == {partition: None}
    assert wait_until(lambda: topic_znode(zk, topic)["partitions"] == {"0": [k, n]}, timeout=30)
    print(f"{COUNT} records moved from {[o, k]} to {[k, n]}: reassignment done "
          f"{time.monotonic() - asked_at:.2f}s after it was asked")
    assert topic_znode(zk, topic)["adding_replicas"] == {} == topic_znode(zk, topic)["removing_replicas"]
    final = state(zk, topic)
    assert sorted(final["isr"]) == sorted([k, n]) and final["leader"] in (k, n)
    assert admin.list_partition_reassignments() == {}
    assert wait_until(lambda: not (old.data_dir / f"{topic}-0").exists(), timeout=10)
    assert (kept.data_dir / f"{topic}-0").exists() and (new.data_dir / f"{topic}-0").exists()

    old.kill()
    try:
        assert read_all(f"{kept.bootstrap_servers},{new.bootstrap_servers}", topic) == values
        kept.stop()  # the new replica alone has every record
        try:
            assert read_all(new.bootstrap_servers, topic) == values
        finally:
            kept.start(timeout=30)
    finally:
        old.start(timeout=30)


def test_the_reassign_and_elect_leaders_commands(cluster, zk, tmp_path):
    """kafka-reassign-partitions' --execute/--verify with Kafka's JSON file, then kafka-leader-election's preferred
    election after the move left the partition led by a replica that is not first in the new list."""
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    create_on(cluster, topic, [1, 2])
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2], timeout=15)
    assert produce(cluster.bootstrap_servers, topic, [b"x"] * 100, acks="all") == [None] * 100
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 1]}]}))

    executed = odradek(cluster.brokers[0], "reassign", "--execute", str(plan))
    assert executed.returncode == 0, executed.stderr
    rollback = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2],
                                              "log_dirs": ["any", "any"]}]}
    assert executed.stdout.splitlines() == [  # kafka-reassign-partitions' lines
        "Current partition replica assignment", "", json.dumps(rollback, separators=(",", ":")), "",
        "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignment for {topic}-0"]
    assert wait_until(lambda: topic_znode(zk, topic)["partitions"] == {"0": [3, 1]}, timeout=30)
    verified = odradek(cluster.brokers[0], "reassign", "--verify", str(plan))
    assert verified.stdout.splitlines() == ["Status of partition reassignment:",
                                            f"Reassignment of partition {topic}-0 is completed."]
    cancelled = odradek(cluster.brokers[0], "reassign", "--cancel", str(plan))
    assert cancelled.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in cancelled.stderr

    assert state(zk, topic)["leader"] == 1  # it stayed: a target replica, so the move did not change the leader
    elected = odradek(cluster.brokers[0], "elect-leaders", "--election-type", "preferred", "--topic", topic,
                      "--partition", "0")
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout.strip() == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
    assert state(zk, topic)["leader"] == 3
    again = odradek(cluster.brokers[0], "elect-leaders", "--election-type", "preferred", "--all-topic-partitions")
    assert again.returncode == 0, again.stderr  # the earlier test's restarts left others to move back
    assert f"{topic}-0" not in again.stdout  # not needed: left out when all partitions are asked for, as Kafka
    assert read_all(cluster.bootstrap_servers, topic) == [b"x"] * 100


def test_kafka_2_x_tools_znodes(cluster, zk):
    """What kafka-reassign-partitions and kafka-preferred-replica-election --zookeeper write: /admin/reassign_partitions
    (here a new order of the same replicas, so the preferred replica changes) and /admin/preferred_replica_election;
    the controller carries out each and deletes it."""
    topic = f"legacy-{uuid.uuid4().hex[:6]}"
    create_on(cluster, topic, [1, 2])
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2], timeout=15)
    epoch = state(zk, topic)["leader_epoch"]
    zk.create("/admin/reassign_partitions", json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 1]}]}).encode())
    assert wait_until(lambda: not zk.exists("/admin/reassign_partitions"), timeout=15)
    assert wait_until(lambda: topic_znode(zk, topic)["partitions"] == {"0": [2, 1]}, timeout=15)
    assert state(zk, topic)["leader"] == 1
    zk.create("/admin/preferred_replica_election", json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0}]}).encode())
    assert wait_until(lambda: not zk.exists("/admin/preferred_replica_election"), timeout=15)
    assert state(zk, topic)["leader"] == 2 and state(zk, topic)["leader_epoch"] == epoch + 1
