"""Kafka 4.3.1's Java clients on share groups against three `odradek serve` brokers on ZooKeeper: several
KafkaShareConsumers of one group (tests/java/src/odradek/share/ShareClusterCheck.java, a thread each, explicit
acknowledgement and commitSync) on a topic of 3 partitions led by 3 different brokers (replication 3,
min.insync.replicas 2), so that each consumer's ShareFetch and ShareAcknowledge go to every broker and the
share-partitions' state is written across brokers; Kafka's Admin share-group calls and kafka-share-groups.sh's
ShareGroupCommand on that group; and the leader of one partition killed -9 while the consumers run.

One cluster for the module; each ShareClusterCheck run is one JVM (see its javadoc for the lines it prints)."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until
from tests.cluster.conftest import new_cluster, python_defects
from tests.interop.kafka_tools import ToolShell, table
from tests.jvm import compiled_classes, start_java_program

PARTITIONS = 3
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.share.record.lock.duration.ms": 5000,
            "group.share.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 6000,
            "offsets.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        compiled = pool.submit(compiled_classes)  # javac beside the brokers' start
        with new_cluster(odradek_zookeeper, tmp_path_factory, "java-share-cluster", settings=SETTINGS) as c:
            compiled.result()
            yield c
    assert not python_defects(c)


def make_topic(cluster, name: str) -> dict[int, int]:
    """The topic (3 partitions, replication 3, min.insync.replicas 2) and its partitions' leaders once all have
    one."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    return wait_until(lambda: leaders(cluster, name), 30)


def leaders(cluster, topic: str) -> dict[int, int] | None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    found = {p: partitions[p].leader for p in partitions}
    return found if len(found) == PARTITIONS and all(leader >= 0 for leader in found.values()) else None


def new_leader(cluster, topic: str, partition: int, old: int) -> int | None:
    leader = (leaders(cluster, topic) or {}).get(partition)
    return leader if leader not in (None, old) else None


@dataclass
class Run:
    """What one ShareClusterCheck run printed."""

    lines: list[str]
    members: dict[str, set[int]] = field(default_factory=dict)
    delivered: list[tuple[str, int, int, str, int]] = field(default_factory=list)  # consumer, partition, offset...
    accepted: collections.Counter = field(default_factory=collections.Counter)
    by_consumer: collections.Counter = field(default_factory=collections.Counter)
    uncertain: set[str] = field(default_factory=set)
    partition_of: dict[str, int] = field(default_factory=dict)  # accepted record -> its partition
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> "Run":
        run = cls(text.splitlines())
        accepted_at: dict[str, int] = {}
        for at, line in enumerate(run.lines):
            kind, *words = line.split()
            if kind == "member":
                run.members[words[0]] = {int(p) for p in words[1].split(",")}
            elif kind == "S":
                if words[3] in accepted_at:
                    run.anomalies.append(f"{words[3]} delivered again (line {at}) after its acceptance")
                run.delivered.append((words[0], int(words[1]), int(words[2]), words[3], int(words[4])))
            elif kind == "A":
                run.accepted[words[3]] += 1
                run.by_consumer[words[0]] += 1
                run.partition_of[words[3]] = int(words[1])
                accepted_at.setdefault(words[3], at)
            elif kind == "U":
                run.uncertain.add(words[3])
            elif kind == "offset" and words[1] != "none":
                run.offsets[int(words[0])] = (int(words[1]), int(words[2]))
        run.anomalies += [f"{value} accepted {n} times" for value, n in run.accepted.items() if n > 1]
        return run

    def accepted_on(self, partition: int) -> int:
        return sum(p == partition for p in self.partition_of.values())

    @property
    def redelivered(self) -> int:
        return sum(count > 1 for *_, count in self.delivered)


def run_check(cluster, tmp_path, topic: str, group: str, *, expect: int, wait=None, **options) -> Run:
    """ShareClusterCheck with three consumers to its end; `wait(log_path)` runs meanwhile (a fault)."""
    log_path = tmp_path / f"{group}-{time.monotonic_ns()}.log"
    process = start_java_program("odradek.share.ShareClusterCheck", f"bootstrap={cluster.bootstrap_servers}",
                                 f"topic={topic}", f"group={group}", f"partitions={PARTITIONS}", "consumers=3",
                                 f"expect={expect}", *(f"{key}={value}" for key, value in options.items()),
                                 log_path=log_path)
    try:
        if wait is not None:
            wait(log_path)
        code = process.wait(100)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log_path.read_text(errors="replace")
    assert code == 0 and "done accepted=" in text, text[-4000:]
    return Run.parse(text)


def values(tag: str, count: int, start_offset: int = 0) -> set[str]:
    """What ShareClusterCheck wrote (tag-i at offset i // 3 of partition i % 3) from `start_offset` of each."""
    return {f"{tag}-{i}" for i in range(count) if i // PARTITIONS >= start_offset}


@pytest.fixture(scope="module")
def first_run(cluster, tmp_path_factory):
    """300 records written by Kafka's producer and consumed by three KafkaShareConsumers from offset 0, 20 a poll
    with 20 ms of work after each (one consumer free to fetch all 300 at once would leave the others nothing)."""
    topic, group = "java-share-cluster", "java-share-cluster-group"
    partition_leaders = make_topic(cluster, topic)
    begun = time.monotonic()
    run = run_check(cluster, tmp_path_factory.mktemp("first-run"), topic, group, expect=300, produce=300, tag="a",
                    poll=20, pause=20, **{"from": 0})
    return topic, group, partition_leaders, run, time.monotonic() - begun


def test_java_share_consumers_accept_every_record_once_from_three_leaders(first_run):
    topic, group, partition_leaders, run, seconds = first_run
    print(f"\n300 records, {dict(run.by_consumer)} accepted per consumer, leaders {partition_leaders}, {seconds:.1f} s")
    assert len(set(partition_leaders.values())) == 3, partition_leaders  # ShareFetch goes to every broker
    assert not run.anomalies, run.anomalies[:10]
    assert set(run.accepted) == values("a", 300) and not run.uncertain
    delivered_partitions = collections.Counter(p for consumer, p, offset, value, count in run.delivered)
    assert delivered_partitions == {0: 100, 1: 100, 2: 100}  # each delivered once
    assert len(run.by_consumer) >= 2, run.by_consumer  # the group's records went to several consumers
    # describeShareGroups while they ran: three members, between them every partition
    assert set(run.members) == {"c0", "c1", "c2"} and set().union(*run.members.values()) == {0, 1, 2}
    # listShareGroupOffsets once all was accepted: the start offset at the log end, no lag
    assert run.offsets == {0: (100, 0), 1: (100, 0), 2: (100, 0)}


def test_java_admin_and_share_group_command_reset_reread_and_delete(cluster, first_run, tmp_path):
    topic, group, _, _, _ = first_run
    shell = ToolShell(tmp_path / "tools.log")
    try:
        tool = ["--bootstrap-server", cluster.bootstrap_servers]
        assert group in shell.run("kafka-share-groups", *tool, "--list").stdout.split()
        described = shell.run("kafka-share-groups", *tool, "--describe", "--offsets", "--group", group).stdout
        rows = table(described, "START-OFFSET")
        assert {(row["TOPIC"], row["PARTITION"], row["START-OFFSET"]) for row in rows} == {
            (topic, str(p), "100") for p in range(PARTITIONS)}, described

        # alterShareGroupOffsets on the empty group to offset 40: the consumers read 40..99 of each partition again
        again = run_check(cluster, tmp_path, topic, group, expect=180, delete=1, **{"from": 40})
        assert not again.anomalies and not again.uncertain
        assert set(again.accepted) == values("a", 300, start_offset=40)
        assert again.offsets == {0: (100, 0), 1: (100, 0), 2: (100, 0)}
        # then deleteShareGroups: the group is gone for the Admin and for the tool
        assert again.lines[-3:-1] == ["deleted", "after-delete GroupIdNotFoundException"], again.lines[-5:]
        assert group not in shell.run("kafka-share-groups", *tool, "--list").stdout.split()
    finally:
        shell.close()


def test_java_share_consumers_keep_going_when_a_partition_leader_is_killed(cluster, tmp_path):
    """The leader of partition 0 killed -9 while 1,500 records are consumed (50 a poll): the consumers go on with
    its new leader, which reads the share-partition's state from the share coordinator (on another broker, or on
    a new leader of the state partition) and delivers again what the dead one had handed out; no accepted record
    is delivered again, every record is accepted, and listShareGroupOffsets ends with no lag."""
    topic, group, count = "java-share-failover", "java-share-failover-group", 1500
    partition_leaders = make_topic(cluster, topic)
    victim = cluster.broker(partition_leaders[0])
    killed = {}

    def kill_mid_run(log_path):
        assert wait_until(lambda: log_path.read_text(errors="replace").count("\nA ") >= 150, 60), \
            log_path.read_text(errors="replace")[-3000:]
        victim.kill()
        killed["at"] = Run.parse(log_path.read_text(errors="replace")).accepted_on(0)
        killed["new leader"] = wait_until(lambda: new_leader(cluster, topic, 0, victim.node_id), 30)
        victim.start(timeout=40)  # back as a follower (a closing consumer waits for every broker it had a session on)

    begun = time.monotonic()
    try:
        run = run_check(cluster, tmp_path, topic, group, expect=count, produce=count, tag="f", poll=50, pause=50,
                        wait=kill_mid_run, **{"from": 0})
    finally:
        if victim.process is None:
            victim.start(timeout=40)
    seconds = time.monotonic() - begun
    print(f"\n{count} records, broker {victim.node_id} (leader of partition 0) killed after {killed['at']} of its "
          f"500 were accepted, partition 0 then led by {killed['new leader']}; {run.redelivered} deliveries after "
          f"the first, {len(run.uncertain)} uncertain, {dict(run.by_consumer)} accepted per consumer, {seconds:.1f} s")
    assert killed["new leader"] and killed["at"] < 500
    assert not run.anomalies, run.anomalies[:10]
    missing = values("f", count) - set(run.accepted)
    # an acknowledgement whose answer the kill took may have been applied: such a record is never delivered again
    assert all(value in run.uncertain for value in missing), sorted(missing)[:20]
    assert run.offsets == {0: (500, 0), 1: (500, 0), 2: (500, 0)}  # every record done: none left to deliver
