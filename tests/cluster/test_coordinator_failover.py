"""Coordinators move with their internal partitions' leaders (issue 15): a group coordinator's broker killed -9, the
next leader of the group's __consumer_offsets partition loads the group and answers for it, the consumers go on from
their committed offsets, and the old coordinator, back as a follower, answers NOT_COORDINATOR. An offset commit is
acknowledged only once the in-sync replicas have it (offsets.commit.required.acks=-1), so an acknowledged commit
survives its coordinator's death; a transaction whose coordinator is killed ends committed or aborted, never half.

Three brokers on ZooKeeper (session timeout 6 s: a killed broker's partitions move after it), one partition for
each internal topic so every group and transactional id has the same coordinator."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.peer import round_trip
from odradek.coordinator.offsets_topic import OFFSETS_TOPIC
from odradek.coordinator.transaction_state import TRANSACTION_STATE_TOPIC
from odradek.embedded import Cluster, wait_until
from odradek.errors import ErrorCode
from odradek.protocol import api

from .conftest import new_cluster, python_defects

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000
COMMIT_TIMEOUT_MS = 2000
REPLICA_FETCH_WAIT_S = 0.5  # replica.fetch.wait.max.ms
OFFSET_COMMIT, OFFSET_FETCH = api("OffsetCommit"), api("OffsetFetch")


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "coordinators",
                     settings={"transaction.state.log.num.partitions": 1,
                               "offsets.commit.timeout.ms": COMMIT_TIMEOUT_MS}) as c:
        yield c
    assert not python_defects(c)


def state(zk, topic: str, index: int = 0) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{index}/state")[0])


def fully_replicated(cluster, zk, topic: str) -> bool:
    """Every broker is live and in the ISR of the topic's partition 0."""
    return zk.exists(f"/brokers/topics/{topic}/partitions/0/state") is not None and \
        sorted(state(zk, topic)["isr"]) == sorted(b.node_id for b in cluster.brokers)


def create_topic(cluster, partitions: int) -> str:
    topic = f"coordinated-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    return topic


def raw(broker, api_name: str, version: int, request, timeout: float = 15):
    async def exchange():
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", broker.port), timeout)
        try:
            return await round_trip(reader, writer, api(api_name), version, request, client_id="failover-test",
                                    timeout=timeout)
        finally:
            writer.close()

    return asyncio.run(exchange())


def commit(broker, group: str, topic: str, offset: int) -> ErrorCode:
    """OffsetCommit v8 of a simple group (no generation) straight to one broker: the partition's error code."""
    Request = OFFSET_COMMIT.request
    answer = raw(broker, "OffsetCommit", 8, Request(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[Request.OffsetCommitRequestTopic(
            name=topic, partitions=[Request.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]))
    return ErrorCode(answer.topics[0].partitions[0].error_code)


def fetch(broker, group: str, topic: str) -> tuple[ErrorCode, int]:
    """OffsetFetch v5 straight to one broker: (group error, committed offset of partition 0)."""
    Request = OFFSET_FETCH.request
    answer = raw(broker, "OffsetFetch", 5, Request(group_id=group, topics=[Request.OffsetFetchRequestTopic(
        name=topic, partition_indexes=[0])]))
    code = ErrorCode(answer.error_code)
    return code, (answer.topics[0].partitions[0].committed_offset if code == ErrorCode.NONE else -1)


def restart(cluster, zk, broker, topics: list[str]) -> None:
    """Start a killed broker again and wait until it is back in the ISR of every topic's partition 0."""
    broker.start(timeout=SESSION_TIMEOUT_S + 20)
    assert wait_until(lambda: all(fully_replicated(cluster, zk, t) for t in topics), timeout=30), \
        [state(zk, t) for t in topics]


def group_coordinator(cluster, zk, group: str, topic: str):
    """The broker coordinating `group` once __consumer_offsets exists (a first commit has it created) and every
    broker is in its ISR."""
    assert wait_until(lambda: commit(cluster.brokers[0], group, topic, 0) in (ErrorCode.NONE,
                                                                              ErrorCode.NOT_COORDINATOR), timeout=30)
    assert wait_until(lambda: fully_replicated(cluster, zk, OFFSETS_TOPIC), timeout=30)
    return cluster.broker(state(zk, OFFSETS_TOPIC)["leader"])


def new_leader(zk, topic: str, old: int) -> int | None:
    leader = state(zk, topic)["leader"]
    return leader if leader not in (-1, old) else None


def test_an_acknowledged_offset_commit_survives_its_coordinator_s_death(cluster, zk):
    """With the coordinator's followers paused (and no fetch of theirs waiting at the leader), a commit cannot reach
    the ISR: it must not be acknowledged (it was, at once, before commits waited for the ISR; the follower that then
    led had never seen it: acknowledged and gone). One acknowledged while they run is on the next leader."""
    group, topic = f"durable-{uuid.uuid4().hex[:6]}", create_topic(cluster, 1)
    coordinator = group_coordinator(cluster, zk, group, topic)
    followers = [b for b in cluster.brokers if b is not coordinator]
    assert commit(coordinator, group, topic, 5) == ErrorCode.NONE

    for follower in followers:
        os.kill(follower.process.pid, signal.SIGSTOP)
    time.sleep(REPLICA_FETCH_WAIT_S + 0.5)  # the followers' last fetches answered: none takes the next write along
    try:
        started = time.monotonic()
        unreplicated = commit(coordinator, group, topic, 10)
        waited = time.monotonic() - started
    finally:
        coordinator.kill()
        for follower in followers:
            os.kill(follower.process.pid, signal.SIGCONT)
    print(f"commit with the followers paused: {unreplicated.name} after {waited:.1f}s")
    try:
        successor = wait_until(lambda: new_leader(zk, OFFSETS_TOPIC, coordinator.node_id),
                               timeout=SESSION_TIMEOUT_S + 15)
        assert successor
        code, committed = wait_until(lambda: (answer := fetch(cluster.broker(successor), group, topic))[0]
                                     == ErrorCode.NONE and answer, timeout=15)
        assert committed == 10 if unreplicated == ErrorCode.NONE else committed in (5, 10), (unreplicated, committed)
        assert unreplicated == ErrorCode.COORDINATOR_NOT_AVAILABLE and waited >= COMMIT_TIMEOUT_MS / 1000 - 0.2
    finally:
        restart(cluster, zk, coordinator, [OFFSETS_TOPIC])


def consume(consumer: Consumer, count: int, timeout: float = 30) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def group_consumer(cluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "log_level": 0,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500})


def test_a_group_keeps_its_offsets_when_its_coordinator_is_killed(cluster, zk):
    """A subscribed consumer commits part way, its coordinator's broker is killed -9: the new leader of the group's
    __consumer_offsets partition answers with the committed offsets, and a consumer that takes over reads exactly
    the uncommitted tail and what came after, nothing lost; the old coordinator, started again as a follower,
    answers NOT_COORDINATOR."""
    group, topic = f"failover-{uuid.uuid4().hex[:6]}", create_topic(cluster, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0})
    for n in range(300):
        producer.produce(topic, value=str(n).encode(), partition=n % 3)
    assert producer.flush(30) == 0

    first = group_consumer(cluster, group)
    first.subscribe([topic])
    read = consume(first, 150)
    assert len(read) == 150
    first.commit(asynchronous=False)
    partitions = [TopicPartition(topic, index) for index in range(3)]
    committed = {tp.partition: tp.offset for tp in first.committed(partitions, timeout=10)}
    start = {index: max(offset, 0) for index, offset in committed.items()}  # nothing committed: from the start
    assert sum(start.values()) == 150
    read += consume(first, 150)
    assert sorted(read, key=int) == [str(n).encode() for n in range(300)]

    assert wait_until(lambda: fully_replicated(cluster, zk, OFFSETS_TOPIC), timeout=30)
    coordinator = cluster.broker(state(zk, OFFSETS_TOPIC)["leader"])
    killed_at = time.monotonic()
    coordinator.kill()
    try:
        def committed_now():
            first.poll(0.1)
            try:
                return {tp.partition: tp.offset for tp in first.committed(partitions, timeout=2)}
            except KafkaException:
                return None
        assert wait_until(lambda: committed_now() == committed, timeout=SESSION_TIMEOUT_S + 20), committed_now()
        answered = time.monotonic() - killed_at
        for n in range(300, 330):
            producer.produce(topic, value=str(n).encode(), partition=n % 3)
        assert producer.flush(30) == 0
        first.close()

        second = group_consumer(cluster, group)
        second.subscribe([topic])
        tail = consume(second, 180, timeout=30)
        resumed = time.monotonic() - killed_at
        second.close()
        uncommitted = {str(n).encode() for n in range(300) if n // 3 >= start[n % 3]}
        assert len(uncommitted) == 150
        assert sorted(tail, key=int) == sorted(uncommitted | {str(n).encode() for n in range(300, 330)}, key=int)
        print(f"group coordinator killed -9: committed offsets answered by broker "
              f"{state(zk, OFFSETS_TOPIC)['leader']} after {answered:.1f}s, a new member read the uncommitted tail "
              f"{resumed:.1f}s after the kill")
    finally:
        restart(cluster, zk, coordinator, [OFFSETS_TOPIC])
    assert state(zk, OFFSETS_TOPIC)["leader"] != coordinator.node_id
    assert fetch(coordinator, group, topic)[0] == ErrorCode.NOT_COORDINATOR


def test_a_paused_coordinator_back_as_a_follower_forgets_its_groups(cluster, zk):
    """A coordinator paused (SIGSTOP) past its session still holds its groups when it wakes; the catalogue tells it
    another broker leads the partition now, so it unloads them and answers NOT_COORDINATOR, not its stale offsets."""
    group, topic = f"paused-{uuid.uuid4().hex[:6]}", create_topic(cluster, 1)
    coordinator = group_coordinator(cluster, zk, group, topic)
    assert commit(coordinator, group, topic, 7) == ErrorCode.NONE
    os.kill(coordinator.process.pid, signal.SIGSTOP)
    try:
        successor = wait_until(lambda: new_leader(zk, OFFSETS_TOPIC, coordinator.node_id),
                               timeout=SESSION_TIMEOUT_S + 15)
        assert successor
        assert wait_until(lambda: fetch(cluster.broker(successor), group, topic) == (ErrorCode.NONE, 7), timeout=15)
        assert commit(cluster.broker(successor), group, topic, 9) == ErrorCode.NONE
    finally:
        os.kill(coordinator.process.pid, signal.SIGCONT)
    assert wait_until(lambda: fetch(coordinator, group, topic)[0] == ErrorCode.NOT_COORDINATOR, timeout=15)
    assert wait_until(lambda: fully_replicated(cluster, zk, OFFSETS_TOPIC), timeout=30)
    assert fetch(coordinator, group, topic)[0] == ErrorCode.NOT_COORDINATOR
    assert fetch(cluster.broker(state(zk, OFFSETS_TOPIC)["leader"]), group, topic) == (ErrorCode.NONE, 9)


def transactional_producer(cluster, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "log_level": 0})
    producer.init_transactions(30)
    return producer


def in_transaction(producer: Producer, topic: str, values: list[str]) -> None:
    producer.begin_transaction()
    for n, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=n % 2)
    assert producer.flush(30) == 0


def end(cluster, producer: Producer, transactional_id: str) -> tuple[Producer, bool]:
    """Commit, as an application does after a failure: retry a retriable error, abort after an abortable one, start
    a new producer (init_transactions fences and aborts the old one's transaction) after a fatal one. The producer
    to go on with, and whether the transaction committed."""
    while True:
        try:
            producer.commit_transaction(30)
            return producer, True
        except KafkaException as exc:
            error = exc.args[0]
            print(f"commit_transaction: {error}")
            if error.retriable():
                continue
            if error.txn_requires_abort():
                producer.abort_transaction(30)
                return producer, False
            return transactional_producer(cluster, transactional_id), False


def read_committed(cluster, topic: str) -> list[bytes]:
    """Every record a read_committed consumer gets from both partitions, up to an "end" record in each."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused", "log_level": 0,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, index, 0) for index in range(2)])
    values, ended = [], set()
    deadline = time.monotonic() + 30
    while len(ended) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            if message.value() == b"end":
                ended.add(message.partition())
            else:
                values.append(message.value())
    consumer.close()
    assert len(ended) == 2, f"no end record in {sorted({0, 1} - ended)}: a transaction left open?"
    return values


@pytest.mark.parametrize("moment", ["after-commit", "mid-transaction"])
def test_a_transaction_ends_cleanly_when_its_coordinator_is_killed(cluster, zk, moment):
    """The transaction coordinator's broker killed -9 right after a commit was acknowledged (the markers must reach
    every partition) or in the middle of a transaction (it commits, or aborts and the producer goes on after
    aborting or initialising again): read_committed consumers see exactly the committed records, and the
    producer's next transaction commits through the new coordinator."""
    topic, transactional_id = create_topic(cluster, 2), f"txn-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(cluster, transactional_id)
    assert wait_until(lambda: fully_replicated(cluster, zk, TRANSACTION_STATE_TOPIC), timeout=30)
    coordinator = cluster.broker(state(zk, TRANSACTION_STATE_TOPIC)["leader"])
    committed: list[str] = []
    in_transaction(producer, topic, ["before-0", "before-1"])
    producer.commit_transaction(30)
    committed += ["before-0", "before-1"]

    values = [f"{moment}-{n}" for n in range(20)]
    in_transaction(producer, topic, values)
    if moment == "after-commit":
        producer.commit_transaction(30)
        committed += values
    killed_at = time.monotonic()
    coordinator.kill()
    try:
        if moment == "mid-transaction":
            producer, ok = end(cluster, producer, transactional_id)
            committed += values if ok else []
            print(f"transaction coordinator killed -9 mid-transaction: {'committed' if ok else 'aborted'} "
                  f"{time.monotonic() - killed_at:.1f}s after the kill")
        in_transaction(producer, topic, ["after-0", "after-1", "end", "end"])
        producer, ok = end(cluster, producer, transactional_id)
        assert ok
        committed += ["after-0", "after-1"]
        print(f"transaction coordinator killed -9 {moment}: the next transaction committed "
              f"{time.monotonic() - killed_at:.1f}s after the kill")
        assert sorted(read_committed(cluster, topic)) == sorted(value.encode() for value in committed)
    finally:
        restart(cluster, zk, coordinator, [TRANSACTION_STATE_TOPIC])


def test_an_acknowledged_transaction_commit_survives_its_coordinator_s_death(cluster, zk):
    """With the transaction coordinator's followers paused, EndTxn cannot reach the ISR of __transaction_state: the
    commit must not be acknowledged then (it was, at once, before the coordinator's writes waited for the ISR; the
    follower that then led had the transaction as ongoing, wrote no marker and aborted it at its timeout:
    acknowledged, then never visible). Whatever the client is finally told, read_committed agrees."""
    topic, transactional_id = create_topic(cluster, 2), f"durable-txn-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(cluster, transactional_id)
    assert wait_until(lambda: fully_replicated(cluster, zk, TRANSACTION_STATE_TOPIC), timeout=30)
    coordinator = cluster.broker(state(zk, TRANSACTION_STATE_TOPIC)["leader"])
    followers = [b for b in cluster.brokers if b is not coordinator]
    values = [f"durable-{n}" for n in range(20)]
    in_transaction(producer, topic, values)

    outcome: dict[str, object] = {}
    committing = threading.Thread(target=lambda: outcome.update(
        zip(("producer", "ok"), end(cluster, producer, transactional_id))))
    for follower in followers:
        os.kill(follower.process.pid, signal.SIGSTOP)
    time.sleep(REPLICA_FETCH_WAIT_S + 0.5)  # the followers' last fetches answered: none takes the next write along
    try:
        committing.start()
        committing.join(2)
        answered_while_paused = not committing.is_alive()
    finally:
        killed_at = time.monotonic()
        coordinator.kill()
        for follower in followers:
            os.kill(follower.process.pid, signal.SIGCONT)
    try:
        committing.join(60)
        assert "ok" in outcome
        print(f"commit with the coordinator's followers paused, then the coordinator killed -9: "
              f"{'committed' if outcome['ok'] else 'aborted'} {time.monotonic() - killed_at:.1f}s after the kill")
        ends = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0})
        for index in range(2):
            ends.produce(topic, value=b"end", partition=index)
        assert ends.flush(30) == 0
        assert sorted(read_committed(cluster, topic)) == sorted(v.encode() for v in values if outcome["ok"])
        assert not answered_while_paused
    finally:
        restart(cluster, zk, coordinator, [TRANSACTION_STATE_TOPIC])


def test_a_commit_prepared_on_no_replica_is_not_half_applied_when_its_coordinator_dies(cluster, zk):
    """The coordinator writes PrepareCommit while its followers are paused, so no other replica has it, and dies,
    with the leader of one of the transaction's partitions. The third broker leads __transaction_state next: it has
    the transaction as ongoing and aborts it when a new producer with the same transactional id fences the old one.
    No partition may show the aborted records: the coordinator wrote the commit marker of the partition it leads at
    once, before the prepared state was on a replica, so that partition held its records committed while the other,
    whose WriteTxnMarkers died with its leader, had them aborted: half a transaction."""
    transactional_id = f"half-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(cluster, transactional_id)
    assert wait_until(lambda: fully_replicated(cluster, zk, TRANSACTION_STATE_TOPIC), timeout=30)
    coordinator = cluster.broker(state(zk, TRANSACTION_STATE_TOPIC)["leader"])
    marked_remotely, successor = [b for b in cluster.brokers if b is not coordinator]
    # partition 0 led by the coordinator (its marker written there), partition 1 by a follower (WriteTxnMarkers)
    topic = f"half-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[coordinator.node_id], [marked_remotely.node_id]])])[
        topic].result(30)
    values = [f"half-{n}" for n in range(10)]
    in_transaction(producer, topic, values)
    described = raw(coordinator, "DescribeTransactions", 0, api("DescribeTransactions").request(
        transactional_ids=[transactional_id])).transaction_states[0]
    assert described.transaction_state == "Ongoing"

    for follower in (marked_remotely, successor):
        os.kill(follower.process.pid, signal.SIGSTOP)
    time.sleep(REPLICA_FETCH_WAIT_S + 0.5)  # the followers' last fetches answered: none takes the next write along
    try:
        with pytest.raises(TimeoutError):  # PrepareCommit written, not on the ISR: EndTxn is not answered
            raw(coordinator, "EndTxn", 3, api("EndTxn").request(
                transactional_id=transactional_id, producer_id=described.producer_id,
                producer_epoch=described.producer_epoch, committed=True), timeout=2)
    finally:
        coordinator.kill()
        marked_remotely.kill()
        os.kill(successor.process.pid, signal.SIGCONT)
    try:
        assert wait_until(lambda: state(zk, TRANSACTION_STATE_TOPIC)["leader"] == successor.node_id,
                          timeout=SESSION_TIMEOUT_S + 20), state(zk, TRANSACTION_STATE_TOPIC)
        for broker in (coordinator, marked_remotely):  # back, each with the one replica of its partition
            broker.start(timeout=SESSION_TIMEOUT_S + 20)
        assert wait_until(lambda: fully_replicated(cluster, zk, TRANSACTION_STATE_TOPIC), timeout=30)
        fencing = transactional_producer(cluster, transactional_id)  # the first producer's transaction aborted
        in_transaction(fencing, topic, ["end", "end"])
        fencing.commit_transaction(30)
        visible = read_committed(cluster, topic)
        assert visible == [], f"aborted records read in partition(s) " \
            f"{sorted({values.index(v.decode()) % 2 for v in visible})} of 2"
    finally:
        for broker in (coordinator, marked_remotely):
            if broker.process is None:  # killed, not started again
                restart(cluster, zk, broker, [])
