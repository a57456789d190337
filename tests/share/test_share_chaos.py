"""Share groups under faults: three ShareConsumer processes acknowledging at random (accept, release, reject) while
a producer writes, consumers and the broker killed with SIGKILL and started again; then every record is checked.

The same run is made against one broker (killed -9 and started again) and three brokers on ZooKeeper (the
share-partition's leader, its share state's leader and the group's coordinator killed in turn).

Each consumer prints what it saw and what the broker confirmed: `S value count` when a record is delivered, then
after its commit `A value` (accepted), `R value` (rejected), `L value` (released) or `U value` for an
acknowledgement whose answer never came (the broker died: it may or may not have applied it). A run is valid when no
record is accepted twice, no record is delivered after its acceptance was confirmed, and every record the producer
had acknowledged is accounted for: accepted, rejected, uncertain, or delivered up to the delivery limit (then
archived); and in the end the broker's DescribeShareGroupOffsets shows no lag (nothing left undelivered). The short
run is in the suite (a fixed seed); `SHARE_CHAOS_SECONDS=600 pytest tests/share/test_share_chaos.py -k long` runs
long ones.
"""

from __future__ import annotations

import collections
import os
import random
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess, wait_until
from odradek.protocol import api
from odradek.client.connection import Connection, Unreachable

LIMIT = 3
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.share.record.lock.duration.ms": 2000,
            "group.share.delivery.count.limit": LIMIT, "group.share.heartbeat.interval.ms": 500,
            "group.share.session.timeout.ms": 6000}

CONSUMER = """
import random, sys, time
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
bootstrap, group, topic, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "max.poll.records": 20, "socket.timeout.ms": 3000})
share.subscribe([topic])
def say(*words):
    print(time.time(), *words, flush=True)
while True:
    try:
        messages = [m for m in share.poll(0.3) if m.error() is None]
    except KafkaException:
        continue
    decided = []
    for m in messages:
        value = m.value().decode()
        say("S", value, m.delivery_count())
        kind = rng.choices(["A", "L", "R"], [0.8, 0.1, 0.1])[0]
        share.acknowledge(m, {"A": AcknowledgeType.ACCEPT, "L": AcknowledgeType.RELEASE,
                              "R": AcknowledgeType.REJECT}[kind])
        decided.append((value, kind, m.topic(), m.partition()))
    if not decided:
        continue
    for value, kind, topic_name, partition in decided:
        say("D", value)  # sent: a kill from here until its line below leaves the outcome unknown, as U
    try:
        results = share.commit_sync(5)
    except KafkaException:
        results = None
    for value, kind, topic_name, partition in decided:
        failed = results is None or any(tp.partition == partition and error is not None
                                        for tp, error in results.items())
        say("U" if failed else kind, value)
"""


class Consumers:
    def __init__(self, bootstrap: str, group: str, topic: str, seed: int):
        self.args = [bootstrap, group, topic]
        self.seed = seed
        self.lines: list[str] = []
        self.processes: dict[int, subprocess.Popen] = {}
        self.readers: list[threading.Thread] = []

    def start(self, slot: int) -> None:
        process = subprocess.Popen([sys.executable, "-c", CONSUMER, *self.args, str(self.seed * 100 + slot +
                                                                                  len(self.readers))],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.processes[slot] = process
        # a consumer killed mid-print leaves a last line cut short (no newline), which is not a fact
        reader = threading.Thread(target=lambda: self.lines.extend(line for line in process.stdout
                                                                   if line.endswith("\n")), daemon=True)
        reader.start()
        self.readers.append(reader)

    def kill(self, slot: int) -> None:
        self.processes[slot].kill()
        self.processes[slot].wait()

    def stop(self) -> None:
        for slot in list(self.processes):
            self.kill(slot)
        for reader in self.readers:
            reader.join(10)


def call_coordinator(ports: list[int], api_name: str, version: int, **fields):
    """The answer of the first broker that answers as the group's coordinator (a cluster's others answer
    NOT_COORDINATOR, a loading one COORDINATOR_LOAD_IN_PROGRESS); None when none does."""
    for port in ports:
        try:
            connection = Connection(("127.0.0.1", port), 5, "chaos", {api_name: (version, version)})
        except Unreachable:
            continue
        try:
            answer = connection.call(api_name, **fields)
        except Unreachable:
            continue
        finally:
            connection.close()
        codes = {getattr(answer, "error_code", 0)} | {g.error_code for g in getattr(answer, "groups", [])}
        if not codes & {14, 15, 16}:
            return answer
    return None


def share_lag(ports: list[int], group: str, topic: str) -> int | None:
    Request = api("DescribeShareGroupOffsets").request
    answer = call_coordinator(ports, "DescribeShareGroupOffsets", 1, groups=[
        Request.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            Request.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])])
    if answer is None:
        return None
    if not answer.groups[0].topics:  # the group not known (yet) to the broker that answered
        return None
    partition = answer.groups[0].topics[0].partitions[0]
    return partition.lag if partition.error_code == 0 and partition.start_offset >= 0 else None


def reset_to_start(ports: list[int], group: str, topic: str) -> None:
    """The share-partition starts where the group is first reset: the log start, before anything is written."""
    Request = api("AlterShareGroupOffsets").request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = call_coordinator(ports, "AlterShareGroupOffsets", 0, group_id=group, topics=[
            Request.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                Request.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
        if answer is not None and answer.error_code == 0 and answer.responses[0].partitions[0].error_code == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"AlterShareGroupOffsets never succeeded: {answer}")


def share_roles(port: int, topic: str):
    """For partition 0 of `topic` in a cluster: a function of a group id giving the brokers that lead the
    partition (the share-partition's leader), the group's __consumer_offsets partition (its coordinator) and its
    share state's __share_group_state partition (its share coordinator), once every one of those has a leader."""
    from odradek.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
    from odradek.coordinator.share_state import SHARE_STATE_TOPIC, state_partition_for
    connection = Connection(("127.0.0.1", port), 10, "chaos", {"FindCoordinator": (4, 4), "Metadata": (12, 12)})
    try:
        for key_type, key in ((0, "probe"), (2, "probe:AAAAAAAAAAAAAAAAAAAAAA:0")):  # makes the topics
            wait_until(lambda: connection.call("FindCoordinator", key="", key_type=key_type,
                                               coordinator_keys=[key]).coordinators[0].error_code == 0, 30)

        def leaders():
            topics = {t.name: t for t in connection.call("Metadata", topics=None,
                                                         allow_auto_topic_creation=False).topics}
            wanted = (topic, OFFSETS_TOPIC, SHARE_STATE_TOPIC)
            if all(t in topics and all(p.leader_id >= 0 for p in topics[t].partitions) for t in wanted):
                return topics
        topics = wait_until(leaders, 30)
    finally:
        connection.close()
    data = topics[topic]
    offsets, state = topics[OFFSETS_TOPIC].partitions, topics[SHARE_STATE_TOPIC].partitions
    return lambda group: (data.partitions[0].leader_id, offsets[partition_for(group, len(offsets))].leader_id,
                          state[state_partition_for(group, data.topic_id, 0, len(state))].leader_id)


class OneBroker:
    """The system under test: one broker process, killed -9 and started again."""

    replication = 1

    def __init__(self, tmp_path, seed: int):
        self.broker = BrokerProcess(tmp_path / f"data-{seed}", settings=SETTINGS)
        self.broker.start()
        self.bootstrap_servers = self.broker.bootstrap_servers
        self.ports = [self.broker.port]

    @staticmethod
    def group_for(topic: str, seed: int) -> str:
        return f"chaos-{seed}"

    def fault(self, rng) -> str:
        self.broker.kill()
        self.broker.start()
        return "broker"

    def stop(self) -> None:
        self.broker.stop()


class ThreeBrokers:
    """Three brokers on ZooKeeper, the topic and the internal ones replicated three times (min.insync.replicas
    2). The group is picked so that three different brokers lead the topic's partition (the share-partition's
    leader), the group's __consumer_offsets partition (its coordinator) and its share state's __share_group_state
    partition (the share coordinator it writes to over the wire); the faults kill -9 each of them in turn and
    start it again."""

    replication = 3

    def __init__(self, odradek_zookeeper, tmp_path_factory, seed: int):
        from tests.cluster.conftest import new_cluster
        self.cluster = new_cluster(odradek_zookeeper, tmp_path_factory, f"share-chaos-{seed}",
                                   settings={**SETTINGS, "offsets.topic.num.partitions": 3})
        self.cluster.start()
        self.bootstrap_servers = self.cluster.bootstrap_servers
        self.ports = [b.port for b in self.cluster.brokers]
        self.victims: list[int] = []

    def group_for(self, topic: str, seed: int) -> str:
        """A group id whose three roles (see the class) are on three brokers; the victims in that order."""
        roles_of = share_roles(self.ports[0], topic)
        for n in range(10_000):
            group = f"chaos-{seed}-{n}"
            roles = roles_of(group)
            if len(set(roles)) == 3:
                self.victims = [roles[0], roles[2], roles[1]]
                return group
        raise AssertionError("no group id puts the three roles on three brokers")

    def fault(self, rng) -> str:
        victim = self.cluster.broker(self.victims[0] if self.victims else rng.choice(self.cluster.brokers).node_id)
        self.victims = self.victims[1:]
        victim.kill()
        session_s = self.cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000
        victim.start(timeout=session_s + 30)
        return f"broker {victim.node_id}"

    def stop(self) -> None:
        from tests.cluster.conftest import python_defects
        self.cluster.stop()
        assert not python_defects(self.cluster)


def check(produced: set[str], lines: list[str]) -> list[str]:
    """The anomalies of a run (none when it is valid)."""
    accepted = collections.Counter()
    accepted_at: dict[str, float] = {}
    settled: set[str] = set()
    deliveries: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    for line in lines:
        at, kind, value, *count = line.split()
        if kind == "S":
            deliveries[value].append((float(at), int(count[0])))
        elif kind == "A":
            accepted[value] += 1
            accepted_at.setdefault(value, float(at))
        elif kind in ("R", "U", "D"):  # D: acknowledged, the consumer perhaps killed before it heard the outcome
            settled.add(value)
    anomalies = [f"{value} accepted {n} times" for value, n in accepted.items() if n > 1]
    anomalies += [f"{value} delivered again after its acceptance"
                  for value, at in accepted_at.items() if any(seen > at for seen, _ in deliveries[value])]
    for value in sorted(produced):
        if value in accepted or value in settled:
            continue
        if max((count for _, count in deliveries[value]), default=0) < LIMIT:
            anomalies.append(f"{value} lost: delivered {[c for _, c in deliveries[value]]}, never settled")
    return anomalies


def chaos_run(system, topic: str, seed: int, seconds: float, alternate: bool = False, gap=(1.5, 3.0)) -> None:
    """`system`: OneBroker or ThreeBrokers. `alternate`: a consumer, then a broker, then a consumer... (else each
    fault one of them at random); a fault every `gap` seconds."""
    rng = random.Random(seed)
    produced: set[str] = set()
    consumers = None
    try:
        admin = AdminClient({"bootstrap.servers": system.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, system.replication, config={
            "min.insync.replicas": str(min(2, system.replication))})])[topic].result(30)
        group = system.group_for(topic, seed)
        consumers = Consumers(system.bootstrap_servers, group, topic, seed)
        reset_to_start(system.ports, group, topic)
        for slot in range(3):
            consumers.start(slot)
        producer = Producer({"bootstrap.servers": system.bootstrap_servers, "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 60000})

        def delivered(error, message):
            if error is None:
                produced.add(message.value().decode())

        faults = []
        deadline = time.monotonic() + seconds
        next_fault = time.monotonic() + rng.uniform(*gap)
        sent = 0
        while time.monotonic() < deadline:
            for _ in range(10):
                producer.produce(topic, f"v{sent}".encode(), on_delivery=delivered)
                sent += 1
            producer.poll(0.05)
            if time.monotonic() >= next_fault:
                if (len(faults) % 2 == 1) if alternate else rng.random() < 0.35:
                    faults.append(system.fault(rng))
                else:
                    slot = rng.randrange(3)
                    consumers.kill(slot)
                    consumers.start(slot)
                    faults.append(f"consumer {slot}")
                next_fault = time.monotonic() + rng.uniform(*gap)
        assert producer.flush(60) == 0
        settle = time.monotonic() + 40
        while share_lag(system.ports, group, topic) != 0 and time.monotonic() < settle:
            time.sleep(0.5)
        lag = share_lag(system.ports, group, topic)
        time.sleep(0.5)  # the last lines of the consumers' output
    finally:
        if consumers is not None:
            consumers.stop()
        system.stop()
    kinds = collections.Counter(line.split()[1] for line in consumers.lines)
    print(f"\nseed {seed}: {len(produced)} records, kills {faults}, {dict(sorted(kinds.items()))}")
    anomalies = check(produced, consumers.lines)
    assert not anomalies, anomalies[:20]
    assert lag == 0, f"{lag} records never delivered for good"
    assert len(produced) >= 100 and sum(line.split()[1] == "A" for line in consumers.lines) > len(produced) // 2


def test_share_consumers_and_broker_killed_lose_nothing_and_accept_nothing_twice(tmp_path, topic_name):
    chaos_run(OneBroker(tmp_path, 7), topic_name, seed=7, seconds=10, alternate=True)


def test_in_a_cluster_brokers_killed_lose_nothing_and_accept_nothing_twice(odradek_zookeeper, tmp_path_factory,
                                                                          topic_name):
    """The share-partition's leader, then the share state's leader, then the group's coordinator (three brokers)
    killed -9 and started again, between consumer kills: the partition's new leader reads the state from the share
    coordinator, whose new leader has every write its in-sync replicas acknowledged; the group's new coordinator
    finds the group from its __consumer_offsets record."""
    chaos_run(ThreeBrokers(odradek_zookeeper, tmp_path_factory, 11), topic_name, seed=11, seconds=36,
              alternate=True, gap=(4.0, 6.0))


@pytest.mark.skipif("SHARE_CHAOS_SECONDS" not in os.environ, reason="SHARE_CHAOS_SECONDS (and SHARE_CHAOS_SEED)")
def test_long_share_chaos(tmp_path, topic_name):
    seconds = float(os.environ["SHARE_CHAOS_SECONDS"])
    seed = int(os.environ.get("SHARE_CHAOS_SEED") or time.time_ns() % 1_000_000)
    print(f"\nSHARE_CHAOS_SEED={seed}")
    deadline = time.monotonic() + seconds
    while deadline - time.monotonic() > 30:
        chaos_run(OneBroker(tmp_path, seed), f"{topic_name}-{seed}", seed, min(120, deadline - time.monotonic() - 20))
        seed += 1
        seed += 1
