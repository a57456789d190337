"""Topics of a three-broker ZooKeeper cluster: spread over the brokers by the controller, in Kafka's znodes, with the
same leaders in every broker's Metadata; clients follow the leaders; a broker answers NOT_LEADER_OR_FOLLOWER for a
partition led elsewhere and NOT_COORDINATOR for a group coordinated elsewhere."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter

import kafka
import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, wait_until
from odradek.protocol import api
from odradek.records.batch import Record, encode_batch
from tests.broker.raw_client import RawClient
from tests.cli.run import odradek

from .conftest import metadata_of

Produce = api("Produce").request
ListOffsets = api("ListOffsets").request
Fetch = api("Fetch").request
NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR = 6, 16


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    """Three brokers whose internal topics have six partitions each, so coordinators spread over them."""
    with Cluster(3, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                 settings={"offsets.topic.num.partitions": 6, "transaction.state.log.num.partitions": 6},
                 data_dir=tmp_path_factory.mktemp("cluster")) as c:
        yield c


def find_coordinator(broker, key: str, key_type: int = 0):
    client = RawClient(broker.port)
    try:
        return wait_until(lambda: (a := client.call("FindCoordinator", 2, key=key, key_type=key_type)).error_code == 0
                          and a, timeout=15)
    finally:
        client.close()


def create_through(broker, name: str, partitions: int = 6, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(15)


def leaders_seen_by(broker, topic: str) -> dict[int, int]:
    return {p.id: p.leader for p in metadata_of(broker).topics[topic].partitions.values()}


def test_topics_created_through_each_broker_are_spread_over_all_three(cluster, zk):
    for broker in cluster.brokers:
        name = f"spread-via-{broker.node_id}-{uuid.uuid4().hex[:6]}"
        create_through(broker, name)
        assignment = json.loads(zk.get(f"/brokers/topics/{name}")[0])
        assert assignment["version"] == 3 and len(assignment["topic_id"]) == 22
        replicas = {int(p): r for p, r in assignment["partitions"].items()}
        assert sorted(replicas) == list(range(6))
        # round-robin: each broker first replica (leader) of two of the six partitions
        assert Counter(r[0] for r in replicas.values()) == {1: 2, 2: 2, 3: 2}
        for index, replica_list in replicas.items():
            state = json.loads(zk.get(f"/brokers/topics/{name}/partitions/{index}/state")[0])
            assert state["leader"] == replica_list[0] and state["isr"] == replica_list
            assert state["version"] == 1 and state["leader_epoch"] == 0
            assert state["controller_epoch"] == int(zk.get("/controller_epoch")[0])
        expected = {index: r[0] for index, r in replicas.items()}
        for other in cluster.brokers:
            assert wait_until(lambda: leaders_seen_by(other, name) == expected, timeout=5), other.node_id


def test_a_new_topic_s_partitions_are_all_led_by_one_controller_write(cluster, zk):
    """The controller elects a new topic's partitions together, in one ZooKeeper transaction (up to
    MULTI_OPS_PER_TRANSACTION states each), not one transaction per partition: creating a 500-partition RF=3 topic
    on a loaded machine took 30 s before. Every state znode of a 60-partition topic has the same creation zxid."""
    name = f"batched-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    create_through(cluster.brokers[0], name, partitions=60, replication_factor=3)
    print(f"60 partitions RF=3 created and led in {time.monotonic() - started:.2f} s")
    stats = [zk.exists(f"/brokers/topics/{name}/partitions/{index}/state") for index in range(60)]
    assert all(stats)
    assert len({stat.czxid for stat in stats}) == 1


def test_a_replication_factor_above_the_live_brokers_is_refused(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    with pytest.raises(Exception, match="Replication factor: 4 larger than available brokers: 3"):
        admin.create_topics([NewTopic("rf-four", 1, 4)])["rf-four"].result(15)


def test_producers_and_consumers_follow_the_leaders(cluster):
    topic, per_client = f"follow-{uuid.uuid4().hex[:6]}", 300
    create_through(cluster.brokers[0], topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    for i in range(per_client):
        producer.produce(topic, key=f"confluent-{i}", value=b"c")
    assert producer.flush(30) == 0
    legacy = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for i in range(per_client):
        legacy.send(topic, key=f"kafka-python-{i}".encode(), value=b"k")
    legacy.flush(30)
    legacy.close()

    async def produce_with_aiokafka():
        async with AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers) as aio:
            for i in range(per_client):
                await aio.send(topic, key=f"aiokafka-{i}".encode(), value=b"a")
    asyncio.run(produce_with_aiokafka())

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "log_level": 0})
    consumer.subscribe([topic])
    keys, partitions = set(), set()
    deadline = time.monotonic() + 60
    while len(keys) < 3 * per_client and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            keys.add(message.key())
            partitions.add(message.partition())
    consumer.close()
    assert len(keys) == 3 * per_client
    assert partitions == set(range(6))


@pytest.mark.parametrize("replication_factor", [1, 3])
def test_a_partition_led_elsewhere_answers_not_leader_or_follower(cluster, replication_factor):
    """Also at RF 3, where every broker holds a replica's log: there only the leader takes produce and answers
    ListOffsets, and a follower serves a consumer's Fetch v11+ (fetch from follower, KIP-392)."""
    topic = f"not-leader-{uuid.uuid4().hex[:6]}"
    create_through(cluster.brokers[0], topic, partitions=3, replication_factor=replication_factor)
    leaders = leaders_seen_by(cluster.brokers[0], topic)
    index, leader = next(iter(leaders.items()))
    for broker in cluster.brokers:
        client = RawClient(broker.port)
        try:
            produced = client.call("Produce", 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(
                    index=index, records=encode_batch([Record(0, 0, b"k", b"v")]))])])
            listed = client.call("ListOffsets", 7, replica_id=-1, isolation_level=0, topics=[
                ListOffsets.ListOffsetsTopic(name=topic, partitions=[ListOffsets.ListOffsetsPartition(
                    partition_index=index, timestamp=-1)])])
            fetched = client.call("Fetch", 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                  isolation_level=0, session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(
                                      topic=topic, partitions=[Fetch.FetchPartition(
                                          partition=index, fetch_offset=0, log_start_offset=-1,
                                          partition_max_bytes=1 << 20)])],
                                  forgotten_topics_data=[], rack_id="")
        finally:
            client.close()
        codes = (produced.responses[0].partition_responses[0].error_code,
                 listed.topics[0].partitions[0].error_code, fetched.responses[0].partitions[0].error_code)
        expected = 0 if broker.node_id == leader else NOT_LEADER_OR_FOLLOWER
        # a consumer's Fetch v11+ (KIP-392) is served by any replica up to its high watermark, as Kafka does
        fetch_expected = 0 if broker.node_id == leader or replication_factor == len(cluster.brokers) else expected
        assert codes == (expected, expected, fetch_expected), broker.node_id


def test_a_group_coordinated_on_another_broker_commits_and_fetches_offsets(cluster):
    topic = f"offsets-{uuid.uuid4().hex[:6]}"
    create_through(cluster.brokers[0], topic, partitions=3)
    asked = cluster.brokers[0]
    group, found = next((g, f) for g in (f"group-{topic}-{n}" for n in range(100))
                        if (f := find_coordinator(asked, g)).node_id != asked.node_id)
    coordinator = cluster.broker(found.node_id)
    assert found.port == coordinator.port
    # the other brokers refuse the group's requests
    for broker in cluster.brokers:
        if broker.node_id != found.node_id:
            raw = RawClient(broker.port)
            try:
                answer = raw.call("OffsetFetch", 5, group_id=group, topics=None)
            finally:
                raw.close()
            assert answer.error_code == NOT_COORDINATOR
    # kafka-python reaches it through any broker: commit, and a new consumer reads the commit back
    consumer = kafka.KafkaConsumer(bootstrap_servers=asked.bootstrap_servers, group_id=group,
                                   enable_auto_commit=False)
    partition = kafka.TopicPartition(topic, 2)
    consumer.assign([partition])
    consumer.commit({partition: kafka.OffsetAndMetadata(42, "", -1)})
    consumer.close()
    again = kafka.KafkaConsumer(bootstrap_servers=asked.bootstrap_servers, group_id=group,
                                enable_auto_commit=False)
    try:
        assert again.committed(partition) == 42
    finally:
        again.close()


def test_topics_describe_shows_each_partition_s_leader_replicas_and_isr(cluster, zk):
    topic = f"describe-{uuid.uuid4().hex[:6]}"
    create_through(cluster.brokers[2], topic, partitions=3)
    shown = odradek(cluster.brokers[0], "topics", "describe", topic)
    assert shown.returncode == 0, shown.stderr
    rows = [dict(field.split(": ", 1) for field in line.strip().split("\t"))
            for line in shown.stdout.splitlines()[1:]]
    for row in rows:
        state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{row['Partition']}/state")[0])
        replicas = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"][row["Partition"]]
        assert (row["Leader"], row["Replicas"], row["Isr"]) == (
            str(state["leader"]), ",".join(map(str, replicas)), ",".join(map(str, state["isr"])))
    assert sorted(row["Leader"] for row in rows) == ["1", "2", "3"]


def test_a_transaction_across_partitions_led_by_different_brokers(cluster):
    """The coordinator writes its own partitions' markers and sends WriteTxnMarkers to the other leaders: a
    read_committed consumer sees the committed transaction on every partition, never the aborted one, and the
    offsets committed inside the transaction become the group's."""
    topic = f"txn-{uuid.uuid4().hex[:6]}"
    create_through(cluster.brokers[0], topic, partitions=3)
    assert sorted(leaders_seen_by(cluster.brokers[0], topic).values()) == [1, 2, 3]
    group = f"txn-group-{topic}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"tx-{topic}",
                         "log_level": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    for index in range(3):
        producer.produce(topic, value=f"aborted-{index}".encode(), partition=index)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for index in range(3):
        producer.produce(topic, value=f"committed-{index}".encode(), partition=index)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 0})
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    consumer.assign([TopicPartition(topic, index, 0) for index in range(3)])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    assert sorted(seen) == [b"committed-0", b"committed-1", b"committed-2"]
    assert consumer.poll(1) is None
    assert wait_until(lambda: consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 7, timeout=15)
    consumer.close()


def test_a_topic_deleted_through_one_broker_goes_from_every_broker_and_zookeeper(cluster, zk):
    topic = f"deleted-{uuid.uuid4().hex[:6]}"
    create_through(cluster.brokers[0], topic, partitions=3)
    directories = [b.data_dir / f"{topic}-{index}" for b in cluster.brokers for index in range(3)]
    assert sum(d.exists() for d in directories) == 3  # one replica each
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap_servers, "log_level": 0})
    admin.delete_topics([topic])[topic].result(15)
    assert not zk.exists(f"/brokers/topics/{topic}") and not zk.exists(f"/config/topics/{topic}")
    # the request's znode goes last, a moment after the topic's (Kafka's completeDeleteTopic order)
    assert wait_until(lambda: zk.get_children("/admin/delete_topics") == [], timeout=10)
    for broker in cluster.brokers:
        assert wait_until(lambda: topic not in metadata_of(broker).topics, timeout=5), broker.node_id
    assert wait_until(lambda: not any(d.exists() for d in directories), timeout=5)
    create_through(cluster.brokers[2], topic, partitions=2)  # the name is free again
    assert len(metadata_of(cluster.brokers[0]).topics[topic].partitions) == 2


def test_topic_configs_and_new_partitions_reach_every_broker(cluster, zk):
    from confluent_kafka.admin import ConfigResource, NewPartitions

    topic = f"configured-{uuid.uuid4().hex[:6]}"
    create_through(cluster.brokers[0], topic, partitions=3)
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap_servers, "log_level": 0})
    resource = ConfigResource("topic", topic, set_config={"retention.ms": "123456"})
    admin.alter_configs([resource])[resource].result(15)
    assert json.loads(zk.get(f"/config/topics/{topic}")[0]) == {"version": 1, "config": {"retention.ms": "123456"}}
    changes = sorted(zk.get_children("/config/changes"))
    assert json.loads(zk.get(f"/config/changes/{changes[-1]}")[0]) == {"version": 2,
                                                                      "entity_path": f"topics/{topic}"}
    for broker in cluster.brokers:
        asked = ConfigResource("topic", topic)
        own = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
        assert wait_until(lambda: own.describe_configs([asked])[asked].result(10)["retention.ms"].value == "123456",
                          timeout=5), broker.node_id
    admin.create_partitions([NewPartitions(topic, 6)])[topic].result(15)
    replicas = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
    assert len(replicas) == 6 and Counter(r[0] for r in replicas.values()) == {1: 2, 2: 2, 3: 2}
    for broker in cluster.brokers:
        assert wait_until(lambda: sorted(leaders_seen_by(broker, topic).values()) == [1, 1, 2, 2, 3, 3], timeout=5)


def test_a_manual_replica_assignment_is_where_the_partitions_go(cluster, zk):
    """kafka-topics --replica-assignment: CreateTopics and CreatePartitions with replicas given by hand place the
    partitions there (the first replica leading), not where the round-robin would."""
    from confluent_kafka.admin import NewPartitions

    topic = f"by-hand-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[3], [3], [2]])])[topic].result(15)
    admin.create_partitions([NewPartitions(topic, 5, replica_assignment=[[1], [3]])])[topic].result(15)
    assignment = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
    assert {int(p): r for p, r in assignment.items()} == {0: [3], 1: [3], 2: [2], 3: [1], 4: [3]}
    for broker in cluster.brokers:
        assert wait_until(lambda: leaders_seen_by(broker, topic) == {0: 3, 1: 3, 2: 2, 3: 1, 4: 3}, timeout=5)
    with pytest.raises(Exception, match="INVALID_REPLICA_ASSIGNMENT"):  # partition 0 has one replica, not two
        admin.create_partitions([NewPartitions(topic, 6, replica_assignment=[[1, 2]])])[topic].result(15)
