"""The `odradek` commands against a broker whose only client listener is SASL_SSL with SCRAM-SHA-512 and ACLs
enforced (tests/interop/conftest.py's `secured_broker`), given Kafka client properties files as Java clients and
Kafka's tools write them: --command-config on every command that talks to brokers, --producer.config,
--producer-property, --consumer.config and --consumer-property on produce, consume and perf; and the failures a
user of such a listener meets (a refused password, a wrong port, a missing permission), each said at once."""

from __future__ import annotations

import json
import time

from odradek.client import Admin
from tests.interop.conftest import SCRAM_USERS, certificates, secured_broker  # noqa: F401 (fixtures)
from tests.security.conftest import free_port

from .run import odradek

# A wait no answer should come near: a failure that reaches it was not said at once.
PATIENT = ("--timeout", "60")


def _username_file(secured, directory, user: str):
    """The same login as librdkafka's own names write it (sasl.username/sasl.password), as kcat users have it."""
    path = directory / f"{user}-librdkafka.properties"
    path.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={user}\n"
                    f"sasl.password={SCRAM_USERS[user]}\nssl.ca.location={secured.ca}\n")
    return path


def _ok(result):
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    return result


def test_every_broker_command_takes_kafka_client_properties(secured_broker, broker, tmp_path, topic_name):
    secured = secured_broker
    admin = secured.properties_file(tmp_path, "admin")  # sasl.jaas.config and a PEM truststore, as Java writes them
    on = ("--bootstrap-server", secured.bootstrap_servers)
    created = _ok(odradek(None, "topics", "create", topic_name, "--partitions", "2", "--config",
                          "retention.ms=3600000", *on, "--command-config", admin))
    assert created.stdout == f"Created topic {topic_name}.\n"
    listed = _ok(odradek(None, "topics", "list", *on, "--command-config", _username_file(secured, tmp_path, "admin")))
    assert topic_name in listed.stdout.split()

    produced = _ok(odradek(None, "produce", topic_name, *on, "--producer.config", admin, "--producer-property",
                           "acks=1", "--key-separator", ":", input="k1:one\nk2:two\nk3:three\n"))
    assert "Produced 3 record(s)" in produced.stderr
    group = f"g-{topic_name}"
    consumed = _ok(odradek(None, "consume", topic_name, *on, "--consumer.config", admin, "--consumer-property",
                           "client.id=secured-reader", "--group", group, "--from-beginning", "--max-messages", "3",
                           "--format", "json"))
    assert sorted(json.loads(line)["value"] for line in consumed.stdout.splitlines()) == ["one", "three", "two"]
    described = _ok(odradek(None, "groups", "describe", group, *on, "--command-config", admin))
    rows = [line.split() for line in described.stdout.splitlines()[2:]]
    assert sum(int(row[3]) for row in rows) == 3

    brokers = _ok(odradek(None, "brokers", "list", *on, "--command-config", admin))
    assert brokers.stdout.splitlines()[1].split()[:2] == ["ID", "HOST"]
    perf = _ok(odradek(None, "perf", "produce", "--topic", topic_name, "--num-records", "50", *on,
                       "--command-config", admin, "--producer-property", "acks=all"))
    assert perf.stdout.startswith("50 records sent")
    perf_read = _ok(odradek(None, "perf", "consume", "--topic", topic_name, "--messages", "53", *on,
                            "--consumer.config", admin))
    assert perf_read.stdout.splitlines()[1].split(", ")[4] == "53"

    mirrored = _ok(odradek(None, "mirror", *on, "--command-config", admin, "--target", broker.bootstrap_servers,
                           "--topics", topic_name, "--group", f"mirror-{topic_name}", "--idle-timeout-ms", "1000"))
    assert "Mirrored 53 record(s)." in mirrored.stderr
    assert Admin(broker.bootstrap_servers).partition_count(topic_name) == 2  # made as the source's topic is
    assert Admin(broker.bootstrap_servers).topic_configs(topic_name) == {"retention.ms": "3600000"}


def test_a_refused_login_a_wrong_port_and_a_missing_permission_are_said_at_once(secured_broker, tmp_path,
                                                                                topic_name):
    secured = secured_broker
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(secured.properties_file(tmp_path, "alice").read_text().replace(SCRAM_USERS["alice"], "nope"))
    on = ("--bootstrap-server", secured.bootstrap_servers)
    for command in (("topics", "list", *PATIENT), ("produce", topic_name)):
        started = time.monotonic()
        refused = odradek(None, *command, *on, "--command-config", wrong, input="x\n")
        assert time.monotonic() - started < 30, command  # not the 60 s timeout, nor librdkafka's minutes
        assert refused.returncode == 1, (command, refused.stderr)
        assert refused.stderr == ("odradek: SaslAuthenticationException: Authentication failed during authentication "
                                  "due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
                                  f"({secured.bootstrap_servers})\n"), command

    closed = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    nobody = odradek(None, "topics", "describe", *PATIENT, "--bootstrap-server", closed)
    assert time.monotonic() - started < 30
    assert nobody.returncode == 1 and nobody.stderr == f"odradek: connection refused: {closed}\n"

    alice = secured.properties_file(tmp_path, "alice")
    not_allowed = odradek(None, "acls", "list", *on, "--command-config", alice)
    assert not_allowed.returncode == 1 and not_allowed.stdout == ""
    assert not_allowed.stderr == "odradek: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed.\n"
    admin = secured.properties_file(tmp_path, "admin")
    assert _ok(odradek(None, "acls", "list", *on, "--command-config", admin)).stdout.startswith("RESOURCE")
