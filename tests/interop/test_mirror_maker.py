"""MirrorMaker 2 (Kafka 4.3.1's connect-mirror-maker, dedicated mode, one mm2.properties) between two Odradek
brokers as the clusters "source" and "target": a topic is copied to "source.<topic>" with its partitions and the
configs set on it, and the checkpoints translate a consumer group's committed offsets, which MM2 writes into the
target's group (sync.group.offsets.enabled), so that a consumer switched to the target resumes where it was on the
source, neither skipping a record nor starting over. MM2 also copies from three brokers (RF 3) to a cluster it
reaches over SASL_SSL. The MM2 log is in the test's tmp_path, its tail in assertion messages."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.embedded import BrokerProcess, wait_until
from tests.interop.conftest import cluster3, secured_broker  # noqa: F401 (fixtures)
from tests.jvm import start_tool
from tests.security.conftest import certificates  # noqa: F401 (the secured broker's)

JVM = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
RECORDS, CONSUMED_ON_SOURCE = 1000, 600


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """The second cluster, a broker of its own."""
    process = BrokerProcess(tmp_path_factory.mktemp("mm2-target") / "data",
                            settings={"group.initial.rebalance.delay.ms": 0})
    process.start()
    yield process
    process.stop()


def stop(mm2) -> None:
    """End the MM2 JVM: SIGTERM, SIGKILL if it has not ended within 30 s."""
    mm2.terminate()
    try:
        mm2.wait(30)
    except subprocess.TimeoutExpired:
        mm2.kill()
        mm2.wait()


def mm2_properties(source: str, target: str, topic: str, group: str, **extra) -> str:
    settings = {
        "clusters": "source, target", "source.bootstrap.servers": source, "target.bootstrap.servers": target,
        "source->target.enabled": "true", "target->source.enabled": "false",
        "source->target.topics": topic, "source->target.groups": group,
        "replication.factor": 1, "checkpoints.topic.replication.factor": 1, "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1, "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1, "config.storage.replication.factor": 1,
        "emit.checkpoints.interval.seconds": 1, "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": 1, "refresh.topics.interval.seconds": 2,
        "refresh.groups.interval.seconds": 2, "sync.topic.configs.interval.seconds": 2, "offset.lag.max": 0,
        "emit.heartbeats.interval.seconds": 1, "plugin.discovery": "service_load", **extra,
    }
    return "".join(f"{key} = {value}\n" for key, value in settings.items())


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets of `topic` (partition -> offset; absent when none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in offsets if tp.offset >= 0}
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, numbers: range) -> None:
    """Records "value-NNNN", even numbers to partition 0 and odd ones to 1."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in numbers:
        producer.produce(topic, f"value-{i:04d}", f"key-{i % 10}", partition=i % 2)
    assert producer.flush(60) == 0


def configs_of(admin: AdminClient, topic: str) -> dict[str, str]:
    found = admin.describe_configs([ConfigResource("topic", topic)])
    return {key: entry.value for key, entry in next(iter(found.values())).result(30).items()}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        consumer.close()


def consume(bootstrap: str, group: str, topic: str, count: int) -> list[str]:
    """`count` values read in `group`, each committed as it is read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 90
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                values.append(message.value().decode())
                consumer.commit(message, asynchronous=False)
        extra = consumer.poll(3)
        assert extra is None or extra.error(), f"more than {count} records: {extra.value()}"
    finally:
        consumer.close()
    return values


def test_mirror_maker_copies_topic_configs_and_translates_group_offsets(broker, target, tmp_path, topic_name):
    """MM2 runs while a group reads the source to its end; the target's copy of the group gets the translated
    offsets; records produced after that are copied too, and the group, switched to the target, reads exactly
    those."""
    source_admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    target_admin = AdminClient({"bootstrap.servers": target.bootstrap_servers})
    source_admin.create_topics([NewTopic(topic_name, 2, config={"retention.ms": "987654321",
                                                                 "max.message.bytes": "200000"})])[topic_name].result(60)
    group, remote = f"group-{topic_name}", f"source.{topic_name}"
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(broker.bootstrap_servers, target.bootstrap_servers, topic_name, group))
    log = tmp_path / "mm2.log"
    mm2 = start_tool("connect-mirror-maker", config, log_path=log, jvm_options=JVM)

    def tail() -> str:
        return "--- mm2.log:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])

    def copied(count: int):
        if mm2.poll() is not None:
            return True
        return remote in target_admin.list_topics(timeout=10).topics and \
            end_offsets(target.bootstrap_servers, remote, 2) == count

    try:
        produce(broker.bootstrap_servers, topic_name, range(CONSUMED_ON_SOURCE))
        assert wait_until(lambda: copied(CONSUMED_ON_SOURCE), 180, 1) and mm2.poll() is None, \
            "topic not copied\n" + tail()
        assert len(target_admin.list_topics(timeout=10).topics[remote].partitions) == 2

        def synced():
            configs = configs_of(target_admin, remote)
            return configs["retention.ms"] == "987654321" and configs["max.message.bytes"] == "200000"

        assert wait_until(synced, 60, 1), f"{configs_of(target_admin, remote)}\n" + tail()

        read_on_source = consume(broker.bootstrap_servers, group, topic_name, CONSUMED_ON_SOURCE)
        on_source = committed(broker.bootstrap_servers, group, topic_name, 2)
        assert on_source == {0: CONSUMED_ON_SOURCE // 2, 1: CONSUMED_ON_SOURCE // 2}
        assert wait_until(lambda: committed(target.bootstrap_servers, group, remote, 2) == on_source, 120, 1), \
            f"target group {committed(target.bootstrap_servers, group, remote, 2)} source {on_source}\n" + tail()

        # the checkpoints behind that: MM2's compacted checkpoints topic on the target, one record or more
        checkpoints = "source.checkpoints.internal"
        assert configs_of(target_admin, checkpoints)["cleanup.policy"] == "compact"
        assert end_offsets(target.bootstrap_servers, checkpoints, 1) > 0

        produce(broker.bootstrap_servers, topic_name, range(CONSUMED_ON_SOURCE, RECORDS))
        assert wait_until(lambda: copied(RECORDS), 120, 1) and mm2.poll() is None, "not copied\n" + tail()
    finally:
        stop(mm2)

    rest = consume(target.bootstrap_servers, group, remote, RECORDS - CONSUMED_ON_SOURCE)
    assert sorted(read_on_source) == [f"value-{i:04d}" for i in range(CONSUMED_ON_SOURCE)]
    assert sorted(rest) == [f"value-{i:04d}" for i in range(CONSUMED_ON_SOURCE, RECORDS)]


def test_mirror_maker_from_three_brokers_to_a_sasl_ssl_cluster(cluster3, secured_broker, tmp_path, topic_name):
    """From three brokers (the topic with replication factor 3) to a cluster MM2 logs in to over SASL_SSL with
    SCRAM: the copy has the partitions and every record."""
    target = secured_broker.librdkafka_config("admin")
    source_admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    source_admin.create_topics([NewTopic(topic_name, 2, 3)])[topic_name].result(60)
    produce(cluster3.bootstrap_servers, topic_name, range(200))
    java = {f"target.{key}": value for key, value in secured_broker.client_properties("admin").items()}
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_properties(cluster3.bootstrap_servers, secured_broker.bootstrap_servers, topic_name,
                                     f"group-{topic_name}", **java))
    log = tmp_path / "mm2.log"
    mm2 = start_tool("connect-mirror-maker", config, log_path=log, jvm_options=JVM)
    remote = f"source.{topic_name}"
    target_admin = AdminClient(target)

    def copied() -> bool:
        if mm2.poll() is not None or remote not in target_admin.list_topics(timeout=10).topics:
            return mm2.poll() is not None
        consumer = Consumer({**target, "group.id": "unused"})
        try:
            return sum(consumer.get_watermark_offsets(TopicPartition(remote, p), timeout=10)[1]
                       for p in range(2)) == 200
        finally:
            consumer.close()

    try:
        assert wait_until(copied, 180, 1) and mm2.poll() is None, \
            "not copied\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        assert len(target_admin.list_topics(timeout=10).topics[remote].partitions) == 2
    finally:
        stop(mm2)
