"""The coordinators through faults that move partitions (issue 15's fatal INVALID_TXN_STATE at RF=3): cut off from
ZooKeeper neither the transaction nor the group coordinator may answer from the state it held, and markers a
partition's leader did not take are sent again soon, to the next leader.

Three brokers behind the chaos proxies (tests/chaos/workload.py ProxiedCluster), one __transaction_state partition. The
coordinator's ZooKeeper proxy is blackholed: its session expires, the controller moves the partition's leadership to
another broker, and the isolated broker, which learns leadership only from ZooKeeper, still believes it leads. It
keeps the transactional id's last state (a committed transaction) while the producer goes on at the new
coordinator; a client bounced back to it (its own FindCoordinator names itself) ending the next transaction with an
abort was answered INVALID_TXN_STATE there, fatal to librdkafka. Out of its ZooKeeper session a broker cannot know
what it coordinates: it answers COORDINATOR_NOT_AVAILABLE (retriable: the client looks the coordinator up again).
The group coordinator had the same flaw: an OffsetFetch reaching the isolated broker was answered with the offsets it
held, not those committed at the new coordinator since.

A data partition's leader killed -9 as a commit is written: WriteTxnMarkers to it fails, and the transaction stayed
PrepareCommit until the next periodic check (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by
default, 60 s here); the producer's next transaction got CONCURRENT_TRANSACTIONS all that time, its messages timed
out, and its abort on the still prepared commit was INVALID_TXN_STATE, fatal (seen in a chaos run)."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.raw_client import RawClient  # tests/ is the rootdir on sys.path
from chaos.workload import ProxiedCluster, client_debug
from odradek.cluster.producer_ids import BLOCK_SIZE
from odradek.coordinator.offsets_topic import OFFSETS_TOPIC
from odradek.coordinator.transaction_state import TRANSACTION_STATE_TOPIC
from odradek.embedded import wait_until
from odradek.errors import ErrorCode
from odradek.protocol import api

from .test_coordinator_failover import SESSION_TIMEOUT_S, raw

COORDINATOR_MOVING = (KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR, KafkaError.REQUEST_TIMED_OUT,
                      KafkaError._TIMED_OUT, KafkaError._WAIT_COORD)
END_TXN, DESCRIBE_TRANSACTIONS, OFFSET_FETCH = api("EndTxn"), api("DescribeTransactions"), api("OffsetFetch")


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    chroot = f"/isolated-{uuid.uuid4().hex[:8]}"
    with ProxiedCluster(3, zookeeper=odradek_zookeeper.connect + chroot, data_dir=tmp_path_factory.mktemp("isolated"),
                        settings={"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
                                  "transaction.abort.timed.out.transaction.cleanup.interval.ms": 60000}) as c:
        yield c


def state_partition(zk, topic: str = TRANSACTION_STATE_TOPIC) -> dict:
    path = f"/brokers/topics/{topic}/partitions/0/state"
    return json.loads(zk.get(path)[0]) if zk.exists(path) else {"leader": -1, "isr": []}


def test_a_coordinator_cut_off_from_zookeeper_does_not_answer_from_its_stale_state(cluster, zk):
    topic, transactional_id = f"isolated-{uuid.uuid4().hex[:6]}", f"txn-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    assert wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=30)
    admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id,
                         **client_debug(transactional_id)})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(30)
    assert wait_until(lambda: len(state_partition(zk)["isr"]) == 3, timeout=30)
    coordinator = cluster.broker(state_partition(zk)["leader"])

    def completed():
        state = raw(coordinator, "DescribeTransactions", 0, DESCRIBE_TRANSACTIONS.request(
            transactional_ids=[transactional_id])).transaction_states[0]
        return state if state.transaction_state == "CompleteCommit" else None
    # EndTxn is answered once PrepareCommit is written, as Kafka answers it; CompleteCommit follows once the markers are
    described = wait_until(completed, timeout=15)
    assert described is not None

    cluster.zookeeper_proxies[coordinator.node_id].cut("blackhole")
    try:
        assert wait_until(lambda: state_partition(zk)["leader"] not in (-1, coordinator.node_id),
                          timeout=SESSION_TIMEOUT_S + 20), state_partition(zk)
        # the producer's next transaction is opened at the new coordinator; an abort of it that reaches the old one:
        answer = raw(coordinator, "EndTxn", 3, END_TXN.request(
            transactional_id=transactional_id, producer_id=described.producer_id,
            producer_epoch=described.producer_epoch, committed=False))
        assert ErrorCode(answer.error_code) == ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode(answer.error_code)
    finally:
        cluster.zookeeper_proxies[coordinator.node_id].heal()
    # back in ZooKeeper it follows the new leader: the producer goes on through the new coordinator
    producer.begin_transaction()
    producer.produce(topic, value=b"after", partition=1)
    producer.commit_transaction(60)


def fetch_offset(broker, group_id: str, topic: str) -> tuple[ErrorCode, int | None]:
    """The error and the committed offset of `topic`-0 (None: none answered) that `broker` answers an OffsetFetch
    v7 with."""
    answer = raw(broker, "OffsetFetch", 7, OFFSET_FETCH.request(
        group_id=group_id, topics=[OFFSET_FETCH.request.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    return ErrorCode(answer.error_code), answer.topics[0].partitions[0].committed_offset if answer.topics else None


def commit(consumer: Consumer, offset: TopicPartition) -> bool:
    try:
        consumer.commit(offsets=[offset], asynchronous=False)
    except KafkaException as exc:
        assert exc.args[0].code() in COORDINATOR_MOVING, exc  # errors after which a commit is retried
        return False
    return True


def committed(consumer: Consumer, partition: TopicPartition) -> int | None:
    try:
        return consumer.committed([partition], timeout=10)[0].offset
    except KafkaException as exc:
        assert exc.args[0].code() in COORDINATOR_MOVING, exc
        return None


def test_a_group_coordinator_cut_off_from_zookeeper_does_not_answer_from_its_stale_state(cluster, zk):
    topic, group_id = f"offsets-{uuid.uuid4().hex[:6]}", f"group-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    assert wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=30)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group_id,
                         "enable.auto.commit": False, **client_debug(group_id)})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        assert wait_until(lambda: len(state_partition(zk, OFFSETS_TOPIC)["isr"]) == 3, timeout=30)
        coordinator = cluster.broker(state_partition(zk, OFFSETS_TOPIC)["leader"])
        assert fetch_offset(coordinator, group_id, topic) == (ErrorCode.NONE, 5)

        cluster.zookeeper_proxies[coordinator.node_id].cut("blackhole")
        try:
            assert wait_until(lambda: state_partition(zk, OFFSETS_TOPIC)["leader"] not in (-1, coordinator.node_id),
                              timeout=SESSION_TIMEOUT_S + 20), state_partition(zk, OFFSETS_TOPIC)
            # the group commits at the new coordinator, through a member that knows the cluster from a broker still
            # in it: librdkafka asks the broker it used last where its coordinator is, and `consumer` used the
            # isolated one, which only ever knows itself (the same with Kafka's brokers: a member talking to the
            # isolated broker alone stays there until it heals)
            elsewhere = next(broker for broker in cluster.brokers if broker.node_id != coordinator.node_id)
            member = Consumer({"bootstrap.servers": cluster.broker_proxies[elsewhere.node_id].address,
                               "group.id": group_id, "enable.auto.commit": False,
                               **client_debug(f"{group_id}-elsewhere")})
            try:
                assert wait_until(lambda: commit(member, TopicPartition(topic, 0, 9)), timeout=30)
            finally:
                member.close()
            # the isolated one must not answer with what it held
            assert fetch_offset(coordinator, group_id, topic) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        finally:
            cluster.zookeeper_proxies[coordinator.node_id].heal()
        # back in ZooKeeper (a new session) it follows the new leader, and so does the first member
        assert wait_until(lambda: committed(consumer, TopicPartition(topic, 0)) == 9, timeout=30)
    finally:
        consumer.close()


def describe(broker, transactional_id: str):
    return raw(broker, "DescribeTransactions", 0, DESCRIBE_TRANSACTIONS.request(
        transactional_ids=[transactional_id])).transaction_states[0]


def test_markers_a_killed_leader_missed_reach_its_successor_soon(cluster, zk):
    topic, transactional_id = f"markers-{uuid.uuid4().hex[:6]}", f"txn-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id,
                         **client_debug(transactional_id)})
    producer.init_transactions(30)
    assert wait_until(lambda: len(state_partition(zk)["isr"]) == 3, timeout=60)
    coordinator_id = state_partition(zk)["leader"]
    leader = next(b for b in cluster.brokers if b.node_id != coordinator_id)  # of the topic's one partition
    others = [b.node_id for b in cluster.brokers if b is not leader]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader.node_id, *others]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    assert producer.flush(30) == 0
    leader.kill()
    killed_at = time.monotonic()
    try:
        producer.commit_transaction(60)
        coordinator = cluster.broker(state_partition(zk)["leader"])
        completed = wait_until(lambda: describe(coordinator, transactional_id).transaction_state == "CompleteCommit",
                               timeout=30)
        print(f"commit complete {time.monotonic() - killed_at:.1f}s after its partition's leader was killed")
        assert completed, describe(coordinator, transactional_id)
    finally:
        leader.start(timeout=60)


def test_a_broker_claiming_producer_ids_from_a_cut_zookeeper_keeps_answering_everyone_else(cluster):
    """An InitProducerId that needs a new block of producer ids claims it in ZooKeeper. The claim ran on the event
    loop: with the broker's ZooKeeper link cut, every connection of the broker waited until kazoo gave up on the link
    (about two thirds of the session timeout) or the link came back. Now the claim holds only that request."""
    broker = cluster.brokers[0]
    client = RawClient(broker.port)

    def init_producer_id():
        return client.call("InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000,
                           producer_id=-1, producer_epoch=-1)

    issued = [init_producer_id().producer_id]
    while issued[-1] % BLOCK_SIZE != BLOCK_SIZE - 1:  # blocks are claimed whole, from 0: use this one up
        issued.append(init_producer_id().producer_id)
    answers = []
    cluster.zookeeper_proxies[broker.node_id].cut("blackhole")
    try:
        waiting = threading.Thread(target=lambda: answers.append(init_producer_id()))
        waiting.start()
        time.sleep(0.3)  # its claim is on the way to ZooKeeper
        other = RawClient(broker.port)
        try:
            started = time.monotonic()
            assert other.call("ApiVersions", 3, client_software_name="t", client_software_version="1").error_code \
                == ErrorCode.NONE
            elapsed = time.monotonic() - started
            print(f"ApiVersions answered in {elapsed * 1000:.1f} ms while the claim waited")
            assert elapsed < 1.0, elapsed  # before: 3.0-3.4 s, the loop blocked in kazoo
        finally:
            other.close()
        assert waiting.is_alive()  # still claiming
    finally:
        cluster.zookeeper_proxies[broker.node_id].heal()
    waiting.join(30)
    answer = answers[0]
    while answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE:  # kazoo gave up on the link first: retriable
        time.sleep(0.5)
        answer = init_producer_id()
    client.close()
    assert answer.error_code == ErrorCode.NONE and answer.producer_id not in issued


def test_a_broker_creating_the_offsets_topic_through_a_cut_zookeeper_keeps_answering(odradek_zookeeper, tmp_path):
    """The first FindCoordinator of a cluster creates __consumer_offsets. The creation (znodes written with kazoo)
    ran on the event loop: with the broker's ZooKeeper link cut, the broker answered nothing until kazoo gave up on
    the link. Now it is started off the loop and the request is answered COORDINATOR_NOT_AVAILABLE (retriable), as
    Kafka answers while it makes the topic; once the link is back the topic is made and the coordinator found."""
    with ProxiedCluster(1, zookeeper=f"{odradek_zookeeper.connect}/offsets-{uuid.uuid4().hex[:8]}", data_dir=tmp_path,
                        settings={"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 1}) as c:
        broker = c.brokers[0]
        client = RawClient(broker.port)
        try:
            def find_coordinator():
                return client.call("FindCoordinator", 2, key="a-group", key_type=0)

            c.zookeeper_proxies[broker.node_id].cut("blackhole")
            try:
                started = time.monotonic()
                answer = find_coordinator()
                elapsed = time.monotonic() - started
                print(f"FindCoordinator answered in {elapsed * 1000:.1f} ms with the link cut")
                assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and elapsed < 1.0, elapsed
            finally:
                c.zookeeper_proxies[broker.node_id].heal()
            assert wait_until(lambda: find_coordinator().error_code == ErrorCode.NONE, timeout=30)
            assert find_coordinator().node_id == broker.node_id
        finally:
            client.close()
