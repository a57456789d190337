"""Dynamic broker configs as Kafka has them: IncrementalAlterConfigs/AlterConfigs on a BROKER resource ("" the
cluster default, "<id>" this broker) change the broker while it runs, persist in the catalogue across a restart,
and DescribeConfigs reports them with their DYNAMIC_* source. Real broker process, confluent-kafka and kafka-python;
the cluster default goes through our bare protocol client, since neither Python client can name it (confluent-kafka
refuses an empty resource name, kafka-python wants an integer; Kafka's kafka-configs --entity-default sends "")."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from odradek.config import resolve_broker_config
from odradek.embedded import BrokerProcess
from odradek.storage.cleaner import LogCleaner
from odradek.storage.log_manager import LogManager
from odradek.protocol import api
from broker.raw_client import RawClient  # tests/ is the rootdir on sys.path

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3


def set_raw(broker, resource_name: str, settings: dict | list):
    """IncrementalAlterConfigs SET on a BROKER resource a client would not address ("", another broker's id), or
    with what a client would not send (a key twice: settings as a list of pairs)."""
    request = api("IncrementalAlterConfigs").request
    raw = RawClient(broker.port)
    try:
        answer = raw.call("IncrementalAlterConfigs", 1, validate_only=False, resources=[
            request.AlterConfigsResource(resource_type=4, resource_name=resource_name, configs=[
                request.AlterableConfig(name=key, config_operation=0, value=value)
                for key, value in (settings.items() if isinstance(settings, dict) else settings)])])
    finally:
        raw.close()
    [result] = answer.responses
    return result.error_code, result.error_message


def set_broker_configs(client: AdminClient, name: str, settings: dict, *, validate_only=False):
    resource = ConfigResource("broker", name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in settings.items()])
    client.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(10)


def describe(client: AdminClient, kind: str, name: str) -> dict:
    resource = ConfigResource(kind, name)
    return client.describe_configs([resource])[resource].result(10)


def low_watermark(broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0]
    finally:
        consumer.close()


def retention_synonyms(broker, topic: str) -> list[tuple[str, str, str]]:
    """retention.ms's synonyms as kafka-python reads them (a list: a name appears once per layer)."""
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic,
                                                               configs=["retention.ms"])], include_synonyms=True,
                                            config_filter="all")
    finally:
        client.close()
    return [(s["name"], s["value"], s["source"]) for s in described["topic"][topic]["retention.ms"]["synonyms"]]


def describe_cluster_default(broker) -> list[tuple[str, str, int]]:
    request = api("DescribeConfigs").request
    raw = RawClient(broker.port)
    try:
        [cluster_default] = raw.call("DescribeConfigs", 4, resources=[request.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=None)], include_synonyms=True,
            include_documentation=False).results
    finally:
        raw.close()
    return [(entry.name, entry.value, entry.config_source) for entry in cluster_default.configs]


def test_a_dynamic_retention_applies_at_once_and_survives_a_restart(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"log.retention.check.interval.ms": 200}) as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        client.create_topics([NewTopic("aged", 1, 1, config={"segment.bytes": "1024"})])["aged"].result(10)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        an_hour_ago = int(time.time() * 1000) - 3_600_000
        for _ in range(40):
            producer.produce("aged", b"x" * 100, timestamp=an_hour_ago)
            producer.flush(5)
        time.sleep(1.0)  # several retention passes under the default 7 days: nothing goes
        assert low_watermark(broker, "aged") == 0

        # confluent-kafka, this broker's own resource: IncrementalAlterConfigs
        set_broker_configs(client, "1", {"log.retention.ms": "60000"})
        deadline = time.monotonic() + 15
        while low_watermark(broker, "aged") == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert low_watermark(broker, "aged") > 0  # the hour-old segments went under the new retention
        retention = describe(client, "topic", "aged")["retention.ms"]
        assert (retention.value, retention.source) == ("60000", DYNAMIC_BROKER_CONFIG)

        # the cluster default sits under this broker's own setting
        assert set_raw(broker, "", {"log.retention.ms": "3600000000"}) == (0, None)
        assert describe(client, "topic", "aged")["retention.ms"].value == "60000"
        assert retention_synonyms(broker, "aged") == [
            ("log.retention.ms", "60000", "DYNAMIC_BROKER_CONFIG"),
            ("log.retention.ms", "3600000000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            ("log.retention.hours", "168", "DEFAULT_CONFIG")]

        # kafka-python, AlterConfigs (the legacy request that replaces the resource's whole set: the client sends
        # the broker's other dynamic configs along, which it finds by their DYNAMIC_BROKER_CONFIG source)
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            answer = kp.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "1",
                                                        configs={"log.cleaner.threads": "2"})], incremental=False)
        finally:
            kp.close()
        assert answer == {"broker": {"1": "OK"}}

        broker.restart()
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        own = describe(client, "broker", "1")
        assert (own["log.cleaner.threads"].value, own["log.cleaner.threads"].source) == ("2", DYNAMIC_BROKER_CONFIG)
        assert (own["log.retention.ms"].value, own["log.retention.ms"].source) == ("60000", DYNAMIC_BROKER_CONFIG)
        assert not own["log.retention.ms"].is_read_only and own["num.partitions"].is_read_only
        assert describe_cluster_default(broker) == [
            ("log.retention.ms", "3600000000", DYNAMIC_DEFAULT_BROKER_CONFIG)]
        retention = describe(client, "topic", "aged")["retention.ms"]
        assert (retention.value, retention.source) == ("60000", DYNAMIC_BROKER_CONFIG)


def test_what_cannot_change_dynamically_is_refused_as_kafka_refuses_it(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        invalid_request = 42
        assert set_raw(broker, "", {"log.retention.hours": "1"}) == (
            invalid_request, "Cannot update these configs dynamically: Set(log.retention.hours)")
        assert set_raw(broker, "7", {"log.retention.ms": "1000"}) == (
            invalid_request, "Unexpected broker id, expected 1, but received 7")
        assert set_raw(broker, "1", [("log.retention.ms", "1000"), ("log.retention.ms", "2000")]) == (
            invalid_request, "Error due to duplicate config keys")
        for name, settings, message in [
                ("1", {"num.partitions": "4"}, "Cannot update these configs dynamically: Set(num.partitions)"),
                ("1", {"log.retention.ms": "soon"}, "Invalid value 'soon' for configuration log.retention.ms"),
                ("1", {"log.cleaner.threads": "3"},
                 "Log cleaner threads cannot be increased to more than double the current value 1")]:
            with pytest.raises(KafkaException) as exc_info:
                set_broker_configs(client, name, settings)
            assert exc_info.value.args[0].name() == "INVALID_REQUEST"
            assert message in exc_info.value.args[0].str()

        set_broker_configs(client, "1", {"log.retention.ms": "1000"}, validate_only=True)
        retention = describe(client, "broker", "1")["log.retention.ms"]
        assert retention.value is None and retention.source == 5  # validated, not applied


def test_what_kafka_takes_dynamically_is_taken_and_described_back(tmp_path):
    """librdkafka's 0081 sets sasl.kerberos.min.time.before.relogin on a broker, kafkajs a listener-prefixed SASL
    setting: Kafka takes both per broker (and any name it does not know), refuses an SSL store setting without its
    listener's prefix and a per-broker one at the cluster default; a listener's password is hidden when described."""
    with BrokerProcess(tmp_path / "data") as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        invalid_request = 42
        set_broker_configs(client, "1", {"sasl.kerberos.min.time.before.relogin": "58000",
                                         "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN",
                                         "listener.name.plaintext.ssl.keystore.password": "secret",
                                         "max.connections": "1000", "custom.setting": "x"})
        own = describe(client, "broker", "1")
        assert {name: (own[name].value, own[name].source) for name in (
            "sasl.kerberos.min.time.before.relogin", "listener.name.plaintext.sasl.enabled.mechanisms",
            "max.connections", "custom.setting")} == {
            "sasl.kerberos.min.time.before.relogin": ("58000", DYNAMIC_BROKER_CONFIG),
            "listener.name.plaintext.sasl.enabled.mechanisms": ("PLAIN", DYNAMIC_BROKER_CONFIG),
            "max.connections": ("1000", DYNAMIC_BROKER_CONFIG), "custom.setting": ("x", DYNAMIC_BROKER_CONFIG)}
        password = own["listener.name.plaintext.ssl.keystore.password"]
        assert password.value is None and password.is_sensitive
        assert not own["max.connections"].is_read_only
        assert set_raw(broker, "1", {"ssl.keystore.location": "/tmp/k.jks"}) == (
            invalid_request, "These security configs can be dynamically updated only per-listener using the "
                             "listener prefix: Set(ssl.keystore.location)")
        assert set_raw(broker, "", {"sasl.kerberos.min.time.before.relogin": "58000"}) == (
            invalid_request, "Cannot update these configs at default cluster level, broker id must be specified: "
                             "Set(sasl.kerberos.min.time.before.relogin)")
        assert set_raw(broker, "", {"max.connections": "2000", "log.retention.ms": "1000"}) == (0, None)
        assert set_raw(broker, "1", {"listener.name.plaintext.max.connections": "many"})[0] == invalid_request
        broker.restart()
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert describe(client, "broker", "1")["custom.setting"].value == "x"


def test_new_cleaner_settings_restart_the_pool_under_them(tmp_path):
    def settings(**changed) -> dict:
        return resolve_broker_config({"log.cleaner.backoff.ms": 10,
                                      **{name.replace("_", "."): value for name, value in changed.items()}})

    def cleaner_threads() -> int:
        return sum(1 for t in threading.enumerate() if t.name.startswith("kafka-log-cleaner-thread-") and t.is_alive())

    cleaner = LogCleaner(LogManager(tmp_path, {}), settings())
    cleaner.start()
    try:
        assert cleaner_threads() == 1
        cleaner.reconfigure(settings(log_cleaner_threads=2))
        assert cleaner_threads() == 2
        assert cleaner.reconfiguration_refusal(settings(log_cleaner_threads=5)) == (
            "Log cleaner threads cannot be increased to more than double the current value 2")
        assert cleaner.reconfiguration_refusal(settings(log_cleaner_threads=2)) is None  # no change, no verdict
        cleaner.reconfigure(settings(log_cleaner_threads=1, log_cleaner_backoff_ms=20))
        assert cleaner_threads() == 1 and cleaner.backoff_ms == 20
    finally:
        cleaner.stop()
    assert cleaner_threads() == 0
