"""`odradek mirror` between two real brokers: what is copied, where it lands, and resuming after a stop."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from odradek.client import Admin, Producer, SimpleConsumer, murmur2_partitioner
from odradek.embedded import BrokerProcess


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    settings = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1}
    with BrokerProcess(tmp_path_factory.mktemp("source") / "data", settings=settings) as source, \
            BrokerProcess(tmp_path_factory.mktemp("target") / "data", settings=settings) as target:
        yield source, target


def mirror(source, target, topics: str, group: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", "mirror", "--bootstrap-server", source.bootstrap_servers,
                           "--target", target.bootstrap_servers, "--topics", topics, "--group", group,
                           "--commit-interval-ms", "300", "--idle-timeout-ms", "1500"],
                          capture_output=True, text=True, timeout=90)


def read_all(broker, topic: str, partitions: int) -> list:
    messages = []
    for partition in range(partitions):
        with SimpleConsumer(broker.bootstrap_servers, topic, partition) as consumer:
            offset, end = 0, consumer.latest_offset()
            while offset < end:
                batch = consumer.fetch(offset, timeout=5)
                messages += batch
                offset = batch[-1].offset + 1
    return messages


def produce(broker, topic: str, start: int, count: int, base_ms: int) -> None:
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(start, start + count):
            producer.send(topic, f"value-{i}", f"key-{i}", partition=i % 3, headers=[("seq", str(i).encode())],
                          timestamp_ms=base_ms + i)


def test_mirror_copies_matching_topics_keeps_records_and_partitions_and_resumes(clusters, topic_name):
    source, target = clusters
    wide, narrow, other = f"{topic_name}-wide", f"{topic_name}-narrow", f"skip-{topic_name}"
    source_admin = Admin(source.bootstrap_servers)
    for name in (wide, narrow, other):
        source_admin.create_topic(name, 3)
    Admin(target.bootstrap_servers).create_topic(narrow, 2)  # too few partitions for partition 2
    base_ms = int(time.time() * 1000) - 60_000
    for name in (wide, narrow, other):
        produce(source, name, 0, 30, base_ms)

    first = mirror(source, target, f"{topic_name}-.*", f"mirror-{topic_name}")
    assert first.returncode == 0, first.stderr
    assert "Mirrored 60 record(s)." in first.stderr

    target_admin = Admin(target.bootstrap_servers)
    assert other not in target_admin.list_topics()
    assert target_admin.partition_count(wide) == 3  # created with the source's partition count
    copied = read_all(target, wide, 3)
    assert sorted(m.value for m in copied) == sorted(f"value-{i}".encode() for i in range(30))
    for message in copied:
        i = int(message.value.split(b"-")[1])
        assert message.key == f"key-{i}".encode()
        assert message.partition == i % 3
        assert message.headers == [("seq", str(i).encode())]
        assert message.timestamp_ms == base_ms + i
    narrow_copy = read_all(target, narrow, 2)
    assert len(narrow_copy) == 30
    for message in narrow_copy:  # partitions 0 and 1 stay; partition 2's records are partitioned by key
        source_partition = int(message.value.split(b"-")[1]) % 3
        expected = source_partition if source_partition < 2 else murmur2_partitioner(message.key, 2)
        assert message.partition == expected

    produce(source, wide, 30, 10, base_ms)
    second = mirror(source, target, f"{topic_name}-.*", f"mirror-{topic_name}")
    assert second.returncode == 0, second.stderr
    assert "Mirrored 10 record(s)." in second.stderr  # resumed from the committed offsets
    assert len(read_all(target, wide, 3)) == 40


def test_mirror_of_an_unreachable_target_fails_in_one_line(clusters, topic_name):
    source, _ = clusters
    Admin(source.bootstrap_servers).create_topic(topic_name, 1)
    produce(source, topic_name, 0, 1, int(time.time() * 1000))
    failed = subprocess.run([sys.executable, "-m", "odradek", "mirror", "-b", source.bootstrap_servers,
                             "--target", "127.0.0.1:1", "--topics", topic_name, "--idle-timeout-ms", "1000",
                             "--timeout", "1"],
                            capture_output=True, text=True, timeout=90)
    assert failed.returncode == 1
    assert failed.stderr.startswith("odradek: ") and failed.stderr.count("\n") == 1, failed.stderr
