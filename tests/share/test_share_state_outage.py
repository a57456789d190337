"""A share group's acknowledgement when its share state cannot be written: three brokers on ZooKeeper, one of them
leading the topic's partition, the group's coordinator and its __share_group_state partition; the other two killed
-9, so that the state partition's ISR shrinks below share.coordinator.state.topic.min.isr (2). A consumer (raw
ShareGroupHeartbeat, ShareFetch and ShareAcknowledge) that acquired records before the kills hears its
acknowledgement refused (NOT_ENOUGH_REPLICAS), and the records stay acquired by it, as Kafka rolls a failed state
write back: once a follower is back, the same acknowledgement succeeds (not INVALID_RECORD_STATE, as it would if
the refused one had been applied in memory all the same), and the group has no lag left."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import Connection
from odradek.coordinator.share_partition import ACCEPT
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, state_partition_for
from odradek.embedded import wait_until
from odradek.errors import ErrorCode
from odradek.protocol import api
from tests.cluster.conftest import new_cluster, python_defects
from tests.share.test_share_chaos import share_roles

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3,
            "group.share.record.lock.duration.ms": 60000, "group.share.session.timeout.ms": 45000,
            "replica.lag.time.max.ms": 2000}
VERSIONS = {"ShareGroupHeartbeat": (1, 1), "ShareFetch": (1, 1), "ShareAcknowledge": (1, 1), "Metadata": (12, 12),
            "DescribeShareGroupOffsets": (1, 1)}
RECORDS = 5


def state_isr(connection: Connection, group: str, topic_id: uuid.UUID) -> list[int]:
    topic = next(t for t in connection.call("Metadata", topics=None, allow_auto_topic_creation=False).topics
                 if t.name == SHARE_STATE_TOPIC)
    index = state_partition_for(group, topic_id, 0, len(topic.partitions))
    return sorted(next(p for p in topic.partitions if p.partition_index == index).isr_nodes)


def test_a_refused_acknowledgement_leaves_its_records_acquired_for_a_retry(odradek_zookeeper, tmp_path_factory,
                                                                           topic_name):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "share-state-outage", settings=SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "2"})])[topic_name].result(30)
        roles_of = share_roles(cluster.brokers[0].port, topic_name)
        group = next(g for g in (f"outage-{n}" for n in range(10_000)) if len(set(roles_of(g))) == 1)
        host = cluster.broker(roles_of(group)[0])
        others = [b for b in cluster.brokers if b is not host]
        connection = Connection(("127.0.0.1", host.port), 30, "outage", VERSIONS)
        try:
            topic_id = next(t.topic_id for t in connection.call(
                "Metadata", topics=None, allow_auto_topic_creation=False).topics if t.name == topic_name)
            member = uuid.uuid4().hex

            def joined():
                answer = connection.call("ShareGroupHeartbeat", group_id=group, member_id=member, member_epoch=0,
                                         subscribed_topic_names=[topic_name])
                assert answer.error_code == 0, answer
                return answer.assignment is not None and answer.assignment.topic_partitions
            assert wait_until(joined, 30)
            Fetch = api("ShareFetch").request

            def share_fetch(epoch: int, wait_ms: int):
                return connection.call("ShareFetch", group_id=group, member_id=member, share_session_epoch=epoch,
                                       max_wait_ms=wait_ms, min_bytes=1, max_records=100, batch_size=100, topics=[
                                           Fetch.FetchTopic(topic_id=topic_id, partitions=[
                                               Fetch.FetchPartition(partition_index=0)])])
            share_fetch(0, 0)  # the share-partition starts at the log end (share.auto.offset.reset latest)
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
            for i in range(RECORDS):
                producer.produce(topic_name, f"r-{i}".encode())
            assert producer.flush(30) == 0
            fetched = share_fetch(1, 5000)
            partition = fetched.responses[0].partitions[0]
            assert fetched.error_code == 0 and partition.error_code == 0, fetched
            assert [(r.first_offset, r.last_offset) for r in partition.acquired_records] == [(0, RECORDS - 1)]

            for broker in others:
                broker.kill()
            assert wait_until(lambda: state_isr(connection, group, topic_id) == [host.node_id], 40), \
                state_isr(connection, group, topic_id)

            Acknowledge = api("ShareAcknowledge").request

            def acknowledge(epoch: int):
                answer = connection.call("ShareAcknowledge", group_id=group, member_id=member,
                                         share_session_epoch=epoch, topics=[Acknowledge.AcknowledgeTopic(
                                             topic_id=topic_id, partitions=[Acknowledge.AcknowledgePartition(
                                                 partition_index=0, acknowledgement_batches=[
                                                     Acknowledge.AcknowledgementBatch(
                                                         first_offset=0, last_offset=RECORDS - 1,
                                                         acknowledge_types=[ACCEPT])])])])
                assert answer.error_code == 0, answer
                return ErrorCode(answer.responses[0].partitions[0].error_code)

            refused = acknowledge(2)
            assert refused == ErrorCode.NOT_ENOUGH_REPLICAS, refused

            others[0].start(timeout=60)
            assert wait_until(lambda: len(state_isr(connection, group, topic_id)) >= 2, 60), \
                state_isr(connection, group, topic_id)
            assert acknowledge(3) == ErrorCode.NONE  # the records were still this member's

            offsets = api("DescribeShareGroupOffsets").request
            described = connection.call("DescribeShareGroupOffsets", groups=[
                offsets.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
                    offsets.DescribeShareGroupOffsetsRequestTopic(topic_name=topic_name, partitions=[0])])])
            assert described.groups[0].topics[0].partitions[0].lag == 0, described  # every record done
        finally:
            connection.close()
            for broker in others:
                if broker.process is None:
                    broker.start(timeout=60)
    assert not python_defects(cluster)
