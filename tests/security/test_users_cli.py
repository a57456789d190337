"""`odradek users`: SCRAM users added, listed and removed from the command line, and the credentials it sets are the
ones SASL/SCRAM checks (over a SASL_SSL listener reached with --command-config)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tests.cli.run import odradek


def run_users(secure_broker, *args, listener="PLAINTEXT", command_config=None):
    class Target:
        bootstrap_servers = secure_broker.address(listener)
    extra = ["--command-config", str(command_config)] if command_config else []
    return odradek(Target, "users", *args, *extra)


def test_users_are_added_listed_and_removed(secure_broker, certificates, tmp_path):
    added = run_users(secure_broker, "add", "erin", "--password", "erin-secret", "--mechanism", "SCRAM-SHA-512",
                      "--iterations", "8192")
    assert added.returncode == 0, added.stderr
    listed = run_users(secure_broker, "list", "erin")
    assert listed.stdout.split() == ["USER", "MECHANISM", "ITERATIONS", "erin", "SCRAM-SHA-512", "8192"]

    config = {"security.protocol": "SASL_SSL", "ssl.ca.location": certificates.path("ca.pem"),
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "erin", "sasl.password": "erin-secret"}
    assert AdminClient({"bootstrap.servers": secure_broker.address("SASL_SSL"), **config}).list_topics(
        timeout=10).brokers
    properties = tmp_path / "erin.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
    over_sasl_ssl = run_users(secure_broker, "list", listener="SASL_SSL", command_config=properties)
    assert over_sasl_ssl.returncode == 0, over_sasl_ssl.stderr
    assert "erin" in over_sasl_ssl.stdout

    removed = run_users(secure_broker, "remove", "erin", "--mechanism", "SCRAM-SHA-512")
    assert removed.returncode == 0, removed.stderr
    missing = run_users(secure_broker, "list", "erin")
    assert missing.returncode != 0 and "does not exist" in missing.stderr


def test_too_few_iterations_are_refused_with_kafkas_message(secure_broker):
    refused = run_users(secure_broker, "add", "frank", "--password", "pw", "--iterations", "100")
    assert refused.returncode != 0 and "Too few iterations" in refused.stderr
