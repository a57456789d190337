"""Topic and broker configs as Kafka reports and takes them, against a real broker with real clients: the order of
the answer, synonyms and sources, Kafka 4's topic config list, the deprecated 3.x keys, and the warnings and errors
`odradek serve` gives for the keys it is handed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from odradek.embedded import BrokerProcess

# Kafka 4's LogConfig, every key a topic takes (internal ones aside)
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
    "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("configs") / "data", settings={"log.retention.hours": 200})
    process.start()
    yield process
    process.stop()


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(broker, name, config=None):
    client = admin(broker)
    client.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(10)


def describe_topic(broker, name):
    client, resource = admin(broker), ConfigResource("topic", name)
    return client.describe_configs([resource])[resource].result(10)


def test_describe_configs_answers_in_the_order_asked(broker, topic_name):
    create_topic(broker, topic_name)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        asked = ["segment.ms", "retention.ms", "cleanup.policy", "max.message.bytes", "retention.ms"]
        described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic_name, configs=asked)],
                                            config_filter="all")
    finally:
        client.close()
    assert list(described["topic"][topic_name]) == ["segment.ms", "retention.ms", "cleanup.policy",
                                                    "max.message.bytes"]


def describe_with_synonyms(broker, resource_type, name) -> dict:
    """{config: (value, source, [(synonym, value, source)...])} as kafka-python reads it (a list of synonyms:
    confluent-kafka's dict keeps one per name, and Kafka lists a name once per layer)."""
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        described = client.describe_configs([KpConfigResource(resource_type, name)], include_synonyms=True,
                                            config_filter="all")
    finally:
        client.close()
    [configs] = list(described[resource_type.name.lower()].values())
    return {name: (entry["value"], entry["config_source"],
                   [(synonym["name"], synonym["value"], synonym["source"]) for synonym in entry["synonyms"]])
            for name, entry in configs.items()}


def test_synonyms_are_the_broker_keys_a_value_comes_from(broker, topic_name):
    create_topic(broker, topic_name, {"segment.ms": "600000"})
    described = describe_with_synonyms(broker, ConfigResourceType.TOPIC, topic_name)

    # Kafka's default is named by its broker key, never by the topic key itself
    assert described["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG",
                                          [("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")])
    # the static log.retention.hours=200 over Kafka's 168 gives the value, but Kafka lists a topic default's
    # synonyms only from its first broker key (log.retention.ms) on, set nowhere here: none, and DEFAULT_CONFIG
    assert described["retention.ms"] == (str(200 * 3_600_000), "DEFAULT_CONFIG", [])
    assert described["segment.ms"] == ("600000", "DYNAMIC_TOPIC_CONFIG",
                                       [("segment.ms", "600000", "DYNAMIC_TOPIC_CONFIG")])
    # kafkajs' describeConfigs test, as Kafka answers it: the broker key of the same name, Kafka's default
    assert described["compression.type"] == ("producer", "DEFAULT_CONFIG",
                                             [("compression.type", "producer", "DEFAULT_CONFIG")])
    # no broker default at all: no synonym
    assert described["leader.replication.throttled.replicas"] == ("", "DEFAULT_CONFIG", [])


def test_topic_configs_are_kafka_4s(broker, topic_name):
    create_topic(broker, topic_name, {"leader.replication.throttled.replicas": "0:1",
                                      "follower.replication.throttled.replicas": "*",
                                      "compression.zstd.level": "9"})
    described = describe_topic(broker, topic_name)
    # Kafka 4's keys, Odradek's own under its prefix, and Confluent Server's schema validation keys
    assert set(described) == KAFKA_TOPIC_CONFIGS | {"odradek.iceberg.mode", "odradek.iceberg.partition.spec"} | {
        f"confluent.{side}.{name}" for side in ("key", "value") for name in ("schema.validation",
                                                                             "subject.name.strategy")}
    assert described["leader.replication.throttled.replicas"].value == "0:1"
    assert described["follower.replication.throttled.replicas"].value == "*"
    assert described["compression.zstd.level"].value == "9"
    assert described["local.retention.ms"].value == "-2" and described["compression.gzip.level"].value == "-1"

    for bad, reason in [({"leader.replication.throttled.replicas": "zero"}, "[partitionId]:[brokerId]"),
                        ({"compression.gzip.level": "0"}, "between 1 and 9 or equal to -1"),
                        ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled")]:
        with pytest.raises(KafkaException) as exc_info:
            create_topic(broker, topic_name + "-bad", bad)
        assert exc_info.value.args[0].name() == "INVALID_CONFIG" and reason in exc_info.value.args[0].str()


def test_deprecated_topic_configs_are_taken_and_ignored_with_a_warning(broker, topic_name):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    create_topic(broker, topic_name, {"message.format.version": "2.8-IV1", "message.downconversion.enable": "false",
                                      "retention.ms": "1000000"})
    resource = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("message.timestamp.difference.max.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    client = admin(broker)
    client.incremental_alter_configs([resource])[resource].result(10)

    described = describe_topic(broker, topic_name)
    assert described["retention.ms"].value == "1000000" and described["segment.ms"].value == "600000"
    assert not {"message.format.version", "message.downconversion.enable",
                "message.timestamp.difference.max.ms"} & set(described)
    broker_log = broker.log_path.read_text()
    for name in ("message.format.version", "message.downconversion.enable", "message.timestamp.difference.max.ms"):
        assert f"Topic configuration {name} with value" in broker_log and f"is ignored for `{topic_name}`" in broker_log


def test_serve_warns_about_an_unknown_key(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"num.partiton": 4, "num.partitions": 2,
                                                    "num.network.threads": 3}) as process:
        broker_log = process.log_path.read_text()
    assert "The configuration 'num.partiton' was supplied but isn't a known config." in broker_log
    assert "'num.partitions'" not in broker_log
    assert "The configuration 'num.network.threads' is a Kafka setting this broker does not use." in broker_log


@pytest.mark.parametrize("setting, named", [("log.retention.hours=-5x", "log.retention.hours"),
                                            ("broker.id=one", "broker.id")])
def test_serve_names_the_key_given_in_a_bad_value(tmp_path, setting, named):
    result = subprocess.run([sys.executable, "-m", "odradek", "serve", "--data-dir", str(tmp_path / "data"),
                             "--port", "0", "--set", setting], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert f"for configuration {named}" in result.stderr, result.stderr
