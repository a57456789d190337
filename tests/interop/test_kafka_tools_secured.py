"""Kafka 4.3.1's command-line tools over SASL_SSL with SCRAM-SHA-512 and ACLs enforced (secured_broker), each given
its user's --command-config: kafka-acls granting, listing and revoking what a user may do (and `odradek acls list`
seeing the same ACLs), the console clients and kafka-consumer-groups bound by them, and a SCRAM user made with
kafka-configs logging in."""

from __future__ import annotations

import uuid

import pytest

from tests.interop.kafka_tools import ToolShell, odradek, table


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    tools = ToolShell(tmp_path_factory.mktemp("kafka-tools-secured") / "tools.log")
    yield tools
    tools.close()


def test_acls_grant_list_and_revoke_what_alice_may_do(secured_broker, shell, tmp_path):
    bootstrap, topic, group = secured_broker.bootstrap_servers, f"secured-{uuid.uuid4().hex[:6]}", "alice-readers"
    admin = ("--bootstrap-server", bootstrap, "--command-config", secured_broker.properties_file(tmp_path, "admin"))
    alice_config = secured_broker.properties_file(tmp_path, "alice")
    alice = ("--bootstrap-server", bootstrap, "--command-config", alice_config)
    shell.run("kafka-topics", *admin, "--create", "--topic", topic, "--partitions", 2)
    shell.run("kafka-console-producer", *admin, "--topic", topic, input="one\ntwo\nthree\n")
    denied = shell.run("kafka-topics", *alice, "--describe", "--topic", topic, expect_failure=True)
    assert f"Topic '{topic}' does not exist as expected" in denied.stdout  # Metadata hides it, as Kafka's does

    added = shell.run("kafka-acls", *admin, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--operation", "Describe", "--topic", topic, "--group", group).stdout
    assert f"name={topic}" in added and f"name={group}" in added
    listed = shell.run("kafka-acls", *admin, "--list", "--topic", topic).stdout
    for operation in ("READ", "DESCRIBE"):
        assert f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)" in listed
    ours = odradek("acls", "list", "--topic", topic, "-b", bootstrap, "--command-config",
                   secured_broker.properties_file(tmp_path, "admin"))
    assert "User:alice" in ours and "READ" in ours.upper() and "DESCRIBE" in ours.upper()

    no_configs = shell.run("kafka-topics", *alice, "--describe", "--topic", topic, expect_failure=True)
    # its Configs: column needs DescribeConfigs, refused in Kafka's words
    assert "Error while executing topic command : Topic authorization failed." in no_configs.stdout
    shell.run("kafka-acls", *admin, "--add", "--allow-principal", "User:alice", "--operation", "DescribeConfigs",
              "--topic", topic)
    described = shell.run("kafka-topics", *alice, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 2" in described
    written = shell.run("kafka-console-producer", *alice, "--topic", topic, input="not allowed\n",
                        expect_failure=None)
    # Read and Describe only: no Write on any topic, so no IdempotentWrite either, as Kafka's InitProducerId
    # decides; the tool logs it, and exits 0 when the refusal comes after its send, 1 when before (the producer
    # already in its fatal error state), as it does against Kafka
    assert "ClusterAuthorizationException: Cluster authorization failed." in written.stderr
    printed = shell.run("kafka-console-consumer", *alice, "--topic", topic, "--group", group, "--from-beginning",
                        "--max-messages", 3, "--timeout-ms", 30000).stdout
    assert sorted(printed.split()[:3]) == ["one", "three", "two"]
    offsets = table(shell.run("kafka-consumer-groups", *alice, "--describe", "--group", group, "--offsets").stdout,
                    "GROUP")
    assert sum(int(row["CURRENT-OFFSET"]) for row in offsets) == 3 and {row["LAG"] for row in offsets} == {"0"}

    shell.run("kafka-acls", *admin, "--remove", "--force", "--allow-principal", "User:alice", "--operation",
              "Read", "--operation", "Describe", "--operation", "DescribeConfigs", "--topic", topic)
    assert "User:alice" not in shell.run("kafka-acls", *admin, "--list", "--topic", topic).stdout
    again = shell.run("kafka-topics", *alice, "--describe", "--topic", topic, expect_failure=True)
    assert f"Topic '{topic}' does not exist as expected" in again.stdout


def test_a_scram_user_made_by_kafka_configs_logs_in(secured_broker, shell, tmp_path):
    bootstrap, user = secured_broker.bootstrap_servers, f"bob-{uuid.uuid4().hex[:6]}"
    admin = ("--bootstrap-server", bootstrap, "--command-config", secured_broker.properties_file(tmp_path, "admin"))
    shell.run("kafka-configs", *admin, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
              "SCRAM-SHA-512=[password=bob-secret]")
    assert "SCRAM-SHA-512=iterations=4096" in shell.run("kafka-configs", *admin, "--describe", "--entity-type",
                                                        "users", "--entity-name", user).stdout

    def login(password: str):
        config = tmp_path / f"{user}-{password}.properties"
        properties = {**secured_broker.client_properties("alice"),
                      "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                          f'username="{user}" password="{password}";'}
        config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        return ("--bootstrap-server", bootstrap, "--command-config", config)
    shell.run("kafka-topics", *login("bob-secret"), "--list")  # in, and shown no topic: no ACL grants one
    refused = shell.run("kafka-topics", *login("wrong"), "--list", expect_failure=True)
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-512" in refused.stdout
    not_admin = shell.run("kafka-configs", *login("bob-secret"), "--describe", "--entity-type", "users",
                          "--entity-name", user, expect_failure=True)
    assert "ClusterAuthorizationException" in not_admin.stdout + not_admin.stderr
