"""A share group's configs on the GROUP config resource, set with Kafka 4.3.1's own kafka-configs (one JVM for the
module: tests/interop/kafka_tools.py's ToolShell) against a broker process: described back, refused with Kafka's
INVALID_CONFIG messages, kept across a restart; what librdkafka's ShareConsumer then sees: a group set to earliest
reads a topic's records written before it joined, and read_committed skips an aborted transaction's; and with an
authorizer (tests/security/test_acls.py's broker), DESCRIBE_CONFIGS and ALTER_CONFIGS on the group."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AclOperation, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.embedded import BrokerProcess
from tests.interop.kafka_tools import ToolShell
from tests.security.test_acls import admin, allow, secured  # noqa: F401 (secured: the fixture)
from tests.share.test_share_consumer import SETTINGS, consumer, make_topic, poll_until, produce


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("share-configs") / "data", settings=SETTINGS)
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    tools = ToolShell(tmp_path_factory.mktemp("kafka-tools") / "tools.log")
    yield tools
    tools.close()


def group_configs(shell: ToolShell, bootstrap: str, group: str) -> dict[str, str]:
    """kafka-configs --describe of the group: its own configs (what the tool lists for an entity)."""
    out = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "groups",
                    "--entity-name", group).stdout
    return dict(line.strip().split(" ", 1)[0].split("=", 1) for line in out.splitlines()[1:] if "=" in line)


def alter(shell: ToolShell, bootstrap: str, group: str, *args, expect_failure: bool = False):
    done = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
                     "--entity-name", group, *args, expect_failure=expect_failure)
    return done.stdout + done.stderr


def test_kafka_configs_sets_describes_refuses_and_keeps_group_configs(broker, shell):
    bootstrap = broker.bootstrap_servers
    out = alter(shell, bootstrap, "configured", "--add-config",
                "share.auto.offset.reset=by_duration:PT1H,share.record.lock.duration.ms=20000,"
                "share.delivery.count.limit=4")
    assert "Completed updating config for group configured." in out
    assert group_configs(shell, bootstrap, "configured") == {
        "share.auto.offset.reset": "by_duration:PT1H", "share.record.lock.duration.ms": "20000",
        "share.delivery.count.limit": "4"}
    refused = {
        "share.isolation.level=read_some": "Invalid value 'read_some' for configuration share.isolation.level",
        "share.auto.offset.reset=by_duration:1h": "String must be one of: latest, earliest, by_duration",
        "share.record.lock.duration.ms=5000": "share.record.lock.duration.ms must be greater than or equal to "
                                              "group.share.min.record.lock.duration.ms",
        "share.delivery.count.limit=11": "share.delivery.count.limit must be less than or equal to "
                                         "group.share.max.delivery.count.limit",
        "no.such.config=1": "Unknown group config name: no.such.config",
    }
    for setting, message in refused.items():
        out = alter(shell, bootstrap, "configured", "--add-config", setting, expect_failure=True)
        assert "InvalidConfigurationException" in out and message in out, out
    alter(shell, bootstrap, "configured", "--delete-config", "share.delivery.count.limit")
    broker.stop()
    broker.start()
    assert group_configs(shell, bootstrap, "configured") == {
        "share.auto.offset.reset": "by_duration:PT1H", "share.record.lock.duration.ms": "20000"}


def test_share_consumers_read_from_earliest_and_read_committed_skips_aborted(broker, shell, topic_name):
    """Records written before any member joined: a group at earliest gets them all (a transaction's aborted ones
    too, read_uncommitted), one also at read_committed gets every one but the aborted."""
    bootstrap = broker.bootstrap_servers
    make_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [b"plain0", b"plain1"])
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-" + topic_name})
    transactional.init_transactions(30)
    for values, commit in (([b"aborted0", b"aborted1"], False), ([b"committed0", b"committed1"], True)):
        transactional.begin_transaction()
        for value in values:
            transactional.produce(topic_name, value)
        transactional.flush(30)
        (transactional.commit_transaction if commit else transactional.abort_transaction)(30)
    produce(bootstrap, topic_name, [b"plain2"])
    everything = {b"plain0", b"plain1", b"aborted0", b"aborted1", b"committed0", b"committed1", b"plain2"}
    expected = {"earliest-" + topic_name: everything,
                "committed-" + topic_name: everything - {b"aborted0", b"aborted1"}}
    alter(shell, bootstrap, "earliest-" + topic_name, "--add-config", "share.auto.offset.reset=earliest")
    alter(shell, bootstrap, "committed-" + topic_name, "--add-config",
          "share.auto.offset.reset=earliest,share.isolation.level=read_committed")
    for group, wanted in expected.items():
        share = consumer(bootstrap, group, topic_name)
        try:
            got = poll_until(share, lambda got: b"plain2" in {m.value() for m in got})
            got += poll_until(share, lambda _: False, timeout=0.6)  # nothing more comes
            assert sorted(m.value() for m in got) == sorted(wanted), group
        finally:
            share.close()


def test_group_configs_need_describe_configs_and_alter_configs_on_the_group(secured, topic_name):  # noqa: F811
    group = "acl-" + topic_name
    resource = ConfigResource(ResourceType.GROUP, group)
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for call, asked in ((admin(secured).describe_configs, resource), (admin(secured).incremental_alter_configs, change)):
        with pytest.raises(KafkaException) as raised:
            call([asked])[asked].result(10)
        assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    allow(secured, ResourceType.GROUP, group, AclOperation.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    admin(secured).incremental_alter_configs([change])[change].result(10)
    assert admin(secured).describe_configs([resource])[resource].result(10)["share.auto.offset.reset"].value == \
        "earliest"
