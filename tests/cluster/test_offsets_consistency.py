"""Committed offsets on three brokers with __consumer_offsets replicated three ways (every commit waits for the
in-sync replicas): pipelined commits of one connection leave the last one committed, however their appends complete;
and OffsetFetch with require_stable (KIP-447) holds a partition back while a transaction's offsets for it await their
marker, so a read_committed consumer sees a just committed transaction's offsets."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until
from odradek.errors import ErrorCode
from odradek.protocol import api
from tests.broker.raw_client import RawClient

from .conftest import new_cluster, python_defects

OFFSET_COMMIT, OFFSET_FETCH = api("OffsetCommit").request, api("OffsetFetch").request
COMMITS, ROUNDS = 50, 10


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "offsets-consistency", settings={
            "offsets.topic.replication.factor": 3, "transaction.state.log.num.partitions": 1}) as c:
        yield c
    assert not python_defects(c)


@pytest.fixture(scope="module")
def topic(cluster):
    name = f"t-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
    return name


def coordinator_of(cluster, key: str, key_type: int = 0):
    """The broker FindCoordinator names for the key, once it names one."""
    client = RawClient(cluster.brokers[0].port)
    try:
        answer = wait_until(lambda: (lambda a: a if a.error_code == ErrorCode.NONE else None)(
            client.call("FindCoordinator", 3, key=key, key_type=key_type)), timeout=30)
    finally:
        client.close()
    assert answer, "no coordinator"
    return cluster.broker(answer.node_id)


def fetch_offset(client: RawClient, group: str, topic: str, require_stable: bool = False) -> tuple[int, int]:
    """(error code, committed offset) of the topic's partition 0 by OffsetFetch v7."""
    answer = client.call("OffsetFetch", 7, group_id=group, require_stable=require_stable, topics=[
        OFFSET_FETCH.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
    [partition] = answer.topics[0].partitions
    return partition.error_code, partition.committed_offset


def test_pipelined_commits_leave_the_last_one_committed(cluster, topic):
    """50 async commits of one consumer (librdkafka pipelines them on its coordinator connection), each answered
    once the replicas have it; a later commit's wait may end before an earlier one's (its task looks at the high
    watermark before the wake-up of the earlier one reaches it). The cache took each commit as its wait ended, so an
    older offset overwrote a newer one: 6 to 31 instead of 50 in 10 rounds of 15 before."""
    wrong = []
    for round_ in range(ROUNDS):
        group = f"g-{round_}-{uuid.uuid4().hex[:6]}"
        acknowledged = []
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "log_level": 0,
                             "enable.auto.commit": False,
                             "on_commit": lambda error, partitions: acknowledged.append(
                                 (error, [(p.offset, p.error) for p in partitions]))})
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # not seen by on_commit
            for offset in range(1, COMMITS + 1):
                consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=True)
            assert wait_until(lambda: consumer.poll(0.05) is None and len(acknowledged) >= COMMITS, timeout=30)
            assert acknowledged == [(None, [(offset, None)]) for offset in range(1, COMMITS + 1)]
            committed = consumer.committed([TopicPartition(topic, 0)], 10)[0].offset
        finally:
            consumer.close()
        if committed != COMMITS:
            wrong.append((round_, committed))
    assert not wrong


TXN_OFFSET_COMMIT = api("TxnOffsetCommit").request


def test_offset_fetch_with_require_stable_waits_for_an_open_transactions_offsets(cluster, topic):
    """KIP-447: while a transaction's TxnOffsetCommit is written and its marker is not, OffsetFetch v7 (one group)
    and v8 (groups) with require_stable answer UNSTABLE_OFFSET_COMMIT for that partition, and without it the last
    stable offset; once the transaction commits, its offset. Before, require_stable was ignored."""
    group, transactional_id = f"g-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    transactions = RawClient(coordinator_of(cluster, transactional_id, 1).port)
    offsets = RawClient(coordinator_of(cluster, group).port)
    try:
        assert wait_until(lambda: offsets.call("OffsetCommit", 8, group_id=group, member_id="", topics=[
            OFFSET_COMMIT.OffsetCommitRequestTopic(name=topic, partitions=[
                OFFSET_COMMIT.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                           committed_metadata="")])]
            ).topics[0].partitions[0].error_code == ErrorCode.NONE, timeout=30)
        producer = wait_until(lambda: (lambda a: a if a.error_code == ErrorCode.NONE else None)(transactions.call(
            "InitProducerId", 4, transactional_id=transactional_id, transaction_timeout_ms=60000)), timeout=30)
        assert producer
        ids = dict(transactional_id=transactional_id, producer_id=producer.producer_id,
                   producer_epoch=producer.producer_epoch)
        assert transactions.call("AddOffsetsToTxn", 3, group_id=group, **ids).error_code == ErrorCode.NONE
        answer = offsets.call("TxnOffsetCommit", 3, group_id=group, **ids, topics=[
            TXN_OFFSET_COMMIT.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                TXN_OFFSET_COMMIT.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=9,
                                                                  committed_metadata="")])])
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE

        assert fetch_offset(offsets, group, topic, require_stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch_offset(offsets, group, topic) == (ErrorCode.NONE, 5)
        assert fetch_groups(offsets, group, topic, require_stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch_groups(offsets, group, topic) == (ErrorCode.NONE, 5)

        assert transactions.call("EndTxn", 3, committed=True, **ids).error_code == ErrorCode.NONE
        assert wait_until(lambda: fetch_offset(offsets, group, topic, require_stable=True) == (ErrorCode.NONE, 9),
                          timeout=30)
        assert fetch_groups(offsets, group, topic, require_stable=True) == (ErrorCode.NONE, 9)
    finally:
        transactions.close()
        offsets.close()


def fetch_groups(client: RawClient, group: str, topic: str, require_stable: bool = False) -> tuple[int, int]:
    """(error code, committed offset) of the topic's partition 0 by OffsetFetch v8 (its groups array)."""
    answer = client.call("OffsetFetch", 8, require_stable=require_stable, groups=[OFFSET_FETCH.OffsetFetchRequestGroup(
        group_id=group, topics=[OFFSET_FETCH.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])])
    [partition] = answer.groups[0].topics[0].partitions
    return partition.error_code, partition.committed_offset


def test_a_read_committed_consumer_sees_the_offsets_of_a_transaction_just_committed(cluster, topic):
    """librdkafka's 0103_transactions: right after commit_transaction() returns, the markers may not have reached
    the group's partition; a read_committed consumer's committed() asks with require_stable and must get the
    transaction's offset (the broker answers UNSTABLE_OFFSET_COMMIT until then and the client retries), not the one
    before."""
    group = f"g-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"tx-{group}",
                         "log_level": 0})
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "log_level": 0,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        seen = []
        for offset in range(1, ROUNDS + 1):
            producer.begin_transaction()
            producer.produce(topic, b"v")
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)],
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            seen.append(consumer.committed([TopicPartition(topic, 0)], 10)[0].offset)
        assert seen == list(range(1, ROUNDS + 1))
    finally:
        consumer.close()
