"""Kafka 4.3.1's own command-line tools against one `odradek serve`, run as bin/kafka-*.sh runs them: what each
prints must be true of the broker, and agree with `odradek`'s own commands where both show the same fact
(partitions, leaders, replicas, offsets, lag). The cluster's tools (reassignment, elections, under-replicated
partitions) are in test_kafka_tools_cluster.py, the secured listener's in test_kafka_tools_secured.py."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until
from tests.interop.kafka_tools import ToolShell, described_partitions, odradek, odradek_offsets, tab_table, table
from tests.jvm import start_tool

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    tools = ToolShell(tmp_path_factory.mktemp("kafka-tools") / "tools.log")
    yield tools
    tools.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, int]]) -> list[tuple[int, int, int]]:
    """(partition, value, timestamp) records written in order; (partition, offset, timestamp) of each."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    written = []
    for partition, value, timestamp in records:
        producer.produce(topic, value, partition=partition, timestamp=timestamp,
                         on_delivery=lambda err, msg, ts=timestamp: written.append((msg.partition(), msg.offset(), ts)))
        producer.flush(30)  # one batch per record: each its own timestamp, offsets in the order given
    assert len(written) == len(records)
    return written


@pytest.fixture(scope="module")
def timed_topic(broker, shell):
    """Two partitions of 20 records each, record i of a partition stamped a day ago plus i seconds, except offset 7
    of partition 1, stamped in the future of every other (so the max timestamp is not the last record):
    (topic, {(partition, offset): timestamp})."""
    name = f"timed-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, name, 2)
    base = int(time.time() * 1000) - DAY_MS
    records = [(partition, b"v%d" % i, base + i * 1000 + (10 * DAY_MS // 2 if (partition, i) == (1, 7) else 0))
               for partition in (0, 1) for i in range(20)]
    written = produce(broker.bootstrap_servers, name, records)
    return name, base, {(partition, offset): ts for partition, offset, ts in written}


def test_topics_create_describe_alter_delete_agree_with_odradek(broker, shell):
    bootstrap, name = broker.bootstrap_servers, f"tools-topic-{uuid.uuid4().hex[:8]}"
    created = shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", 2,
                   "--replication-factor", 1, "--config", "retention.ms=3600000")
    assert f"Created topic {name}." in created.stdout

    described, listed = run_all(shell, ("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", name),
                              ("kafka-topics", "--bootstrap-server", bootstrap, "--list"))
    assert name in listed.stdout.split()
    header = described.stdout.splitlines()[0]
    assert "PartitionCount: 2" in header and "ReplicationFactor: 1" in header and "retention.ms=3600000" in header
    topic_id = header.split("TopicId: ")[1].split()[0]
    theirs, ours = described_partitions(described.stdout), described_partitions(odradek("topics", "describe", name,
                                                                                         "-b", bootstrap))
    assert sorted(theirs) == sorted(ours) == [(name, 0), (name, 1)]
    for key in theirs:
        assert [theirs[key][field] for field in ("Leader", "Replicas", "Isr")] == \
               [ours[key][field] for field in ("Leader", "Replicas", "Isr")] == ["1", "1", "1"]

    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--alter", "--topic", name, "--partitions", 4)
    by_id = shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic-id", topic_id)
    assert f"Topic: {name}\tTopicId: {topic_id}\tPartitionCount: 4" in by_id.stdout
    assert sorted(described_partitions(by_id.stdout)) == sorted(
        described_partitions(odradek("topics", "describe", name, "-b", bootstrap))) == [(name, p) for p in range(4)]

    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--delete", "--topic", name)
    assert wait_until(lambda: name not in odradek("topics", "list", "-b", bootstrap).split(), 30, 0.5)
    gone = shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", name, expect_failure=True)
    assert f"Topic '{name}' does not exist" in gone.stdout + gone.stderr


def test_configs_of_topics_brokers_and_loggers(broker, shell):
    bootstrap, name = broker.bootstrap_servers, f"tools-configs-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, 1)
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics", "--entity-name", name,
         "--add-config", "retention.ms=120000,cleanup.policy=[compact,delete]")
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics", "--entity-name", name,
         "--delete-config", "retention.ms")
    topic, everything, brokers, default = run_all(shell, 
        ("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics", "--entity-name",
         name),
        ("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics", "--entity-name",
         name, "--all"),
        ("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", 1,
         "--add-config", "log.cleaner.backoff.ms=20000"),
        ("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.retention.ms=7200000"))
    assert "cleanup.policy=compact,delete" in topic.stdout and "retention.ms" not in topic.stdout
    assert "cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" in everything.stdout
    assert "segment.bytes=1073741824" in everything.stdout
    own, cluster_default, all_of_broker = run_all(shell, 
        ("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers", "--entity-name",
         1),
        ("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers",
         "--entity-default"),
        ("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers", "--entity-name",
         1, "--all"))
    assert "log.cleaner.backoff.ms=20000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=20000" \
           in own.stdout
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" \
           "log.retention.ms=7200000}" in cluster_default.stdout
    assert "num.partitions=1 " in all_of_broker.stdout and "log.retention.ms=7200000 " in all_of_broker.stdout
    retention = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics",
                     "--entity-name", name, "--all")  # the topic's retention now follows the cluster default
    assert "retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" \
           in retention.stdout


def run_all(shell: ToolShell, *invocations: tuple) -> list:
    return [shell.run(*invocation) for invocation in invocations]


def loggers(text: str) -> dict[str, str]:
    return dict(line.split()[0].split("=", 1) for line in text.splitlines() if "sensitive=" in line)


def test_broker_loggers_described_set_and_unset(broker, shell):
    """Kafka's broker-loggers entity is the broker's loggers (Python's, under log4j's level names); before the fix
    DescribeConfigs and IncrementalAlterConfigs refused resource type 8 and the tool died with a stack trace."""
    bootstrap = broker.bootstrap_servers
    args = ("--bootstrap-server", bootstrap, "--entity-type", "broker-loggers", "--entity-name", 1)
    before = loggers(shell.run("kafka-configs", *args, "--describe").stdout)
    assert before["root"] == "INFO" and before["odradek.coordinator"] == "INFO"
    set_levels = shell.run("kafka-configs", *args, "--alter", "--add-config",
                           "odradek.coordinator=TRACE,odradek.storage=WARN")
    unknown = shell.run("kafka-configs", *args, "--alter", "--add-config", "no.such.logger=DEBUG",
                        expect_failure=True)
    assert "Completed updating config for broker-logger 1." in set_levels.stdout
    assert "Invalid broker logger(s): no.such.logger" in unknown.stdout + unknown.stderr
    after = loggers(shell.run("kafka-configs", *args, "--describe").stdout)
    assert (after["odradek.coordinator"], after["odradek.storage"], after["root"]) == ("TRACE", "WARN", "INFO")
    shell.run("kafka-configs", *args, "--alter", "--delete-config", "odradek.coordinator,odradek.storage")
    unset = loggers(shell.run("kafka-configs", *args, "--describe").stdout)
    assert (unset["odradek.coordinator"], unset["odradek.storage"]) == ("INFO", "INFO")
