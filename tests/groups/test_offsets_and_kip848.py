"""Committed offsets across a broker restart, group administration, and a KIP-848 (group.protocol=consumer) group."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess
from odradek.protocol import api

from broker.raw_client import RawClient  # tests/ is the rootdir on sys.path

PARTITIONS = 6


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep the handle alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=partition)
    producer.flush(10)


def consume(consumer: Consumer, count: int, timeout: float = 20) -> list:
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            got.append(message)
    return got


def consumer_for(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **extra})


def test_committed_offsets_survive_restart_and_consumer_resumes_after_last_commit(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"group.initial.rebalance.delay.ms": 0}) as broker:
        create_topic(broker.bootstrap_servers, "orders", 1)
        produce(broker.bootstrap_servers, "orders", 10)
        first = consumer_for(broker.bootstrap_servers, "billing")
        first.subscribe(["orders"])
        seen = consume(first, 6)
        assert [m.offset() for m in seen] == list(range(6))
        first.commit(offsets=[TopicPartition("orders", 0, 6, metadata="after v5")], asynchronous=False)
        first.close()
        broker.restart()
        second = consumer_for(broker.bootstrap_servers, "billing")
        (committed,) = second.committed([TopicPartition("orders", 0)], timeout=10)
        assert (committed.offset, committed.metadata) == (6, "after v5")
        second.subscribe(["orders"])
        resumed = consume(second, 4)
        assert [m.offset() for m in resumed] == [6, 7, 8, 9]
        second.close()


def test_group_administration(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    group = f"{topic_name}-admin"
    consumer = consumer_for(broker.bootstrap_servers, group)
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 3), TopicPartition(topic_name, 1, 4)],
                    asynchronous=False)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    listed = admin.list_consumer_groups().result(10)
    assert group in {g.group_id for g in listed.valid}
    (described,) = admin.describe_consumer_groups([group])[group].result(10).members or [None]
    assert described is None
    from confluent_kafka import ConsumerGroupTopicPartitions
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.partition, tp.offset) for tp in fetched.topic_partitions) == [(0, 3), (1, 4)]
    admin.delete_consumer_groups([group])[group].result(10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", settings={
        "group.initial.rebalance.delay.ms": 0, "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.session.timeout.ms": 6000})
    process.start()
    yield process
    process.stop()


def test_kip848_group_splits_rebalances_and_recovers_from_a_killed_member(kip848_broker, members):
    bootstrap = kip848_broker.bootstrap_servers
    topic = f"kip848-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    group = f"{topic}-group"
    started = [members.start("confluent-848", bootstrap, group, topic) for _ in range(3)]
    took = members.wait_for_split(PARTITIONS, timeout=30)
    print(f"\nKIP-848: three members joined and split {PARTITIONS} partitions in {took:.2f}s")
    started[0].stop()
    took = members.wait_for_split(PARTITIONS, timeout=5)
    print(f"KIP-848: clean leave rebalanced in {took:.2f}s")
    started[1].kill()
    took = members.wait_for_split(PARTITIONS, timeout=6 + 4)
    print(f"KIP-848: SIGKILLed member's partitions moved in {took:.2f}s (session timeout 6000 ms)")



def test_kip848_static_member_restart_gets_its_partitions_back_without_a_rebalance(kip848_broker, members):
    """librdkafka closes a static member (group.instance.id) with epoch -2: its partitions wait for it instead of
    moving to the other member, and the restarted process gets exactly them back."""
    bootstrap = kip848_broker.bootstrap_servers
    topic = f"kip848-static-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    group = f"{topic}-group"
    first = members.start("confluent-848", bootstrap, group, topic, instance_id="first")
    second = members.start("confluent-848", bootstrap, group, topic, instance_id="second")
    members.wait_for_split(PARTITIONS, timeout=30)
    first_partitions, second_partitions = list(first.assigned), list(second.assigned)
    first.stop()
    watched_until = time.monotonic() + 3  # well inside the 6 s session timeout
    while time.monotonic() < watched_until:
        assert second.assigned == second_partitions  # nothing moved to the member that stayed
        time.sleep(0.1)
    restarted = members.start("confluent-848", bootstrap, group, topic, instance_id="first")
    took = members.wait_for_split(PARTITIONS, timeout=10)
    assert restarted.assigned == first_partitions and second.assigned == second_partitions
    print(f"\nKIP-848 static member restarted and got its {len(first_partitions)} partitions back in {took:.2f}s")

def test_kip848_commits_use_member_epoch_and_resume(kip848_broker):
    bootstrap = kip848_broker.bootstrap_servers
    topic = f"kip848-commit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 8)
    first = consumer_for(bootstrap, f"{topic}-g", **{"group.protocol": "consumer"})
    first.subscribe([topic])
    seen = consume(first, 5)
    first.commit(message=seen[-1], asynchronous=False)
    first.close()
    second = consumer_for(bootstrap, f"{topic}-g", **{"group.protocol": "consumer"})
    second.subscribe([topic])
    assert [m.offset() for m in consume(second, 3)] == [5, 6, 7]
    second.close()


def test_kip848_consumer_commits_for_assigned_partitions_into_a_simple_group(kip848_broker):
    """librdkafka's KIP-848 consumer commits an assign()ed partition with its own member id and epoch -1: as in
    Kafka that is a commit for a simple group, not GROUP_ID_NOT_FOUND; and a partition of a topic that does not
    exist is UNKNOWN_TOPIC_OR_PARTITION before the group is looked at, so such a commit alone creates no group."""
    bootstrap = kip848_broker.bootstrap_servers
    topic = f"kip848-assign-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    group = f"{topic}-simple"
    consumer = consumer_for(bootstrap, group, **{"group.protocol": "consumer"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        [result] = consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        assert result.error is None and result.offset == 5
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset == 5

        unknown_group = f"{topic}-nothing"
        other = consumer_for(bootstrap, unknown_group, **{"group.protocol": "consumer"})
        try:
            other.assign([TopicPartition(topic, 0)])
            with pytest.raises(KafkaException) as exc_info:
                other.commit(offsets=[TopicPartition(f"{topic}-missing", 0, 1)], asynchronous=False)
            assert exc_info.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name for it
        finally:
            other.close()
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep the handle alive until the result is in
    groups = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert group in groups and unknown_group not in groups


def test_an_offset_commit_with_the_longest_retention_is_kept(tmp_path):
    """OffsetCommit v2-v4 carry retention_time_ms; Long.MAX_VALUE (a fuzzer's choice) made the expiry timestamp
    overflow the offsets topic's int64, the handler failed and the connection closed. It means "keep it": the
    commit succeeds, reads back, and survives a restart (the record was written)."""
    commit = api("OffsetCommit").request
    with BrokerProcess(tmp_path / "data", settings={"group.initial.rebalance.delay.ms": 0}) as broker:
        create_topic(broker.bootstrap_servers, "kept", 1)
        client = RawClient(broker.port)
        try:
            answer = client.call("OffsetCommit", 4, group_id="keeper", generation_id_or_member_epoch=-1,
                                 member_id="", retention_time_ms=2**63 - 1, topics=[commit.OffsetCommitRequestTopic(
                                     name="kept", partitions=[commit.OffsetCommitRequestPartition(
                                         partition_index=0, committed_offset=7, committed_metadata="m")])])
        finally:
            client.close()
        assert answer.topics[0].partitions[0].error_code == 0
        broker.restart()
        fetch = api("OffsetFetch").request
        client = RawClient(broker.port)
        try:
            answer = client.call("OffsetFetch", 5, group_id="keeper", topics=[fetch.OffsetFetchRequestTopic(
                name="kept", partition_indexes=[0])])
        finally:
            client.close()
        [partition] = answer.topics[0].partitions
        assert (answer.error_code, partition.committed_offset, partition.metadata) == (0, 7, "m")
