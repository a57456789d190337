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

from .run import odradek, odradek_together

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
    listed, produced = map(_ok, odradek_together(
        ("topics", "list", *on, "--command-config", _username_file(secured, tmp_path, "admin")),
        ("produce", topic_name, *on, "--producer.config", admin, "--producer-property", "acks=1",
         "--key-separator", ":"), input="k1:one\nk2:two\nk3:three\n"))
    assert topic_name in listed.stdout.split()
    assert "Produced 3 record(s)" in produced.stderr
    group = f"g-{topic_name}"
    consumed = _ok(odradek(None, "consume", topic_name, *on, "--consumer.config", admin, "--consumer-property",
                           "client.id=secured-reader", "--group", group, "--from-beginning", "--max-messages", "3",
                           "--format", "json"))
    assert sorted(json.loads(line)["value"] for line in consumed.stdout.splitlines()) == ["one", "three", "two"]

    described, brokers, perf = map(_ok, odradek_together(
        ("groups", "describe", group, *on, "--command-config", admin),
        ("brokers", "list", *on, "--command-config", admin),
        ("perf", "produce", "--topic", topic_name, "--num-records", "50", *on, "--command-config", admin,
         "--producer-property", "acks=all")))
    assert sum(int(row[3]) for row in (line.split() for line in described.stdout.splitlines()[2:])) == 3
    assert brokers.stdout.splitlines()[1].split()[:2] == ["ID", "HOST"]
    assert perf.stdout.startswith("50 records sent")

    perf_read, mirrored = map(_ok, odradek_together(
        ("perf", "consume", "--topic", topic_name, "--messages", "53", *on, "--consumer.config", admin),
        ("mirror", *on, "--command-config", admin, "--target", broker.bootstrap_servers, "--topics", topic_name,
         "--group", f"mirror-{topic_name}", "--idle-timeout-ms", "1000")))
    assert perf_read.stdout.splitlines()[1].split(", ")[4] == "53"
    assert "Mirrored 53 record(s)." in mirrored.stderr
    assert Admin(broker.bootstrap_servers).partition_count(topic_name) == 2  # made as the source's topic is
    assert Admin(broker.bootstrap_servers).topic_configs(topic_name) == {"retention.ms": "3600000"}


def test_a_refused_login_a_wrong_port_and_a_missing_permission_are_said_at_once(secured_broker, tmp_path,
                                                                                topic_name):
    secured = secured_broker
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(secured.properties_file(tmp_path, "alice").read_text().replace(SCRAM_USERS["alice"], "nope"))
    on = ("--bootstrap-server", secured.bootstrap_servers)
    closed = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    *refused, nobody, not_allowed, allowed = odradek_together(
        ("topics", "list", *PATIENT, *on, "--command-config", wrong),
        ("produce", topic_name, *on, "--command-config", wrong),
        ("topics", "describe", *PATIENT, "--bootstrap-server", closed),
        ("acls", "list", *on, "--command-config", secured.properties_file(tmp_path, "alice")),
        ("acls", "list", *on, "--command-config", secured.properties_file(tmp_path, "admin")), input="x\n")
    assert time.monotonic() - started < 40  # not the 60 s timeout, nor librdkafka's minutes of retries
    for result in refused:
        assert result.returncode == 1, result
        assert result.stderr == ("odradek: SaslAuthenticationException: Authentication failed during authentication "
                                 "due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
                                 f"({secured.bootstrap_servers})\n"), result
    assert nobody.returncode == 1 and nobody.stderr == f"odradek: connection refused: {closed}\n"
    assert not_allowed.returncode == 1 and not_allowed.stdout == ""
    assert not_allowed.stderr == "odradek: CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed.\n"
    assert _ok(allowed).stdout.startswith("RESOURCE")
