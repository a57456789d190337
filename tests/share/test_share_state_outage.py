"""A share group's acknowledgement when its share state cannot be written: three brokers on ZooKeeper, one of them
leading the topic's partition, the group's coordinator and its __share_group_state partition; the other two killed
-9, so that the state partition's ISR shrinks below share.coordinator.state.topic.min.isr (2). A member (raw
ShareGroupHeartbeat, ShareFetch and ShareAcknowledge) that acquired records before the kills hears its
acknowledgement refused (NOT_ENOUGH_REPLICAS), and the records stay acquired by it, as Kafka rolls a failed state
write back: once a follower is back, the same acknowledgement succeeds (not INVALID_RECORD_STATE, as it would if
the refused one had been applied in memory all the same), and the group has no lag left."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordinator.share_partition import ACCEPT
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, state_partition_for
from odradek.embedded import wait_until
from odradek.errors import ErrorCode
from tests.cluster.conftest import new_cluster, python_defects
from tests.share.raw_member import RawShareMember
from tests.share.test_share_chaos import share_roles

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3,
            "group.share.record.lock.duration.ms": 60000, "group.share.session.timeout.ms": 45000,
            "replica.lag.time.max.ms": 2000}
RECORDS = 5


def state_isr(member: RawShareMember) -> list[int]:
    topic = next(t for t in member.metadata().topics if t.name == SHARE_STATE_TOPIC)
    index = state_partition_for(member.group, member.topic_id, 0, len(topic.partitions))
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
        member = RawShareMember(host.port, group, topic_name)
        try:
            member.join()
            member.fetch(0)  # the share-partition starts at the log end (share.auto.offset.reset latest)
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
            for i in range(RECORDS):
                producer.produce(topic_name, f"r-{i}".encode())
            assert producer.flush(30) == 0
            fetched = member.fetch(5000)
            assert fetched.error_code == 0, fetched
            assert [(r.first_offset, r.last_offset) for r in fetched.acquired_records] == [(0, RECORDS - 1)]

            for broker in others:
                broker.kill()
            assert wait_until(lambda: state_isr(member) == [host.node_id], 40), state_isr(member)
            refused = member.acknowledge(0, RECORDS - 1, ACCEPT)
            assert refused == ErrorCode.NOT_ENOUGH_REPLICAS, refused

            others[0].start(timeout=60)
            assert wait_until(lambda: len(state_isr(member)) >= 2, 60), state_isr(member)
            assert member.acknowledge(0, RECORDS - 1, ACCEPT) == ErrorCode.NONE  # the records were still its own
            assert member.lag() == 0  # every record done
        finally:
            member.close()
            for broker in others:
                if broker.process is None:
                    broker.start(timeout=60)
    assert not python_defects(cluster)
