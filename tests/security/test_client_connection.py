"""odradek.client.connection's client (the Spark source's read tasks) on each kind of secured listener, set up from
Kafka's Java client properties as a --command-config file or Spark's kafka.* options give them (translated by
odradek.client.properties): SCRAM-SHA-256/512 and PLAIN over SASL_SSL and SASL_PLAINTEXT, TLS with the client
certificate a listener requires; and each refusal raised at once, as AuthenticationFailed with the broker's message:
a wrong password, a trust store without the CA that signed the broker, no client certificate."""

from __future__ import annotations

import time

import pytest

from odradek.client.properties import librdkafka_settings
from odradek.client.connection import AuthenticationFailed, Connection, server_address
from odradek.security.client import client_security
from tests.security.conftest import PLAIN_USERS
from tests.security.test_sasl import scram_users  # noqa: F401 (a fixture: bob's SCRAM-SHA-256/512 credentials)

LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
PROTOCOLS = {"SSL": "SSL", "OPEN_SSL": "SSL", "SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}
TIMEOUT_S = 30.0  # a refusal must come long before this


def properties(certificates, listener: str, mechanism: str | None = None, user: str = "", password: str = "", *,
               ca: str = "ca.pem") -> dict[str, str]:
    """Java client properties for `listener`, a login as `user` when `mechanism` is given."""
    result = {"security.protocol": PROTOCOLS[listener]}
    if mechanism is not None:
        result["sasl.mechanism"] = mechanism
        result["sasl.jaas.config"] = f'{LOGIN_MODULES[mechanism]} required username="{user}" password="{password}";'
    if "SSL" in listener:
        result.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": certificates.path(ca)})
    return result


def connect(secure_broker, listener: str, java_properties: dict[str, str]) -> Connection:
    return Connection(server_address(secure_broker.address(listener)), TIMEOUT_S, "odradek-test",
                      {"Metadata": (1, 12)}, client_security(librdkafka_settings(java_properties)))


def advertised_ports(connection: Connection) -> list[int]:
    return [broker.port for broker in connection.call("Metadata", topics=[], allow_auto_topic_creation=False).brokers]


@pytest.mark.parametrize("listener, mechanism", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "SCRAM-SHA-256"),
                                                 ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")])
def test_logs_in_and_is_answered(secure_broker, certificates, scram_users, listener, mechanism):  # noqa: F811
    user, password = ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else ("bob", scram_users["bob"])
    connection = connect(secure_broker, listener, properties(certificates, listener, mechanism, user, password))
    try:  # the broker answers nothing but the SASL exchange before it succeeds: Metadata means logged in
        assert advertised_ports(connection) == [secure_broker.ports[listener]]
    finally:
        connection.close()


def test_presents_the_client_certificate_a_listener_requires(secure_broker, certificates, tmp_path):
    keystore = tmp_path / "client-keystore.pem"  # Kafka's PEM keystore: key and certificate chain in one file
    keystore.write_text((certificates.directory / "client.key").read_text()
                        + (certificates.directory / "client.pem").read_text())
    java_properties = {**properties(certificates, "SSL"), "ssl.keystore.type": "PEM",
                       "ssl.keystore.location": str(keystore)}
    connection = connect(secure_broker, "SSL", java_properties)
    try:
        assert advertised_ports(connection) == [secure_broker.ports["SSL"]]
    finally:
        connection.close()


@pytest.mark.parametrize("listener, mechanism, user, ca, message", [
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "ca.pem", "SASL_AUTHENTICATION_FAILED: Authentication failed during "
     "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "PLAIN", "alice", "ca.pem",
     "SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid username or password"),
    ("SSL", None, "", "ca.pem", "TLS refused by the broker: TLSV13_ALERT_CERTIFICATE_REQUIRED"),
    ("OPEN_SSL", None, "", "stranger-ca.pem",
     "TLS: the broker's certificate is not trusted: self-signed certificate in certificate chain"),
], ids=["scram-wrong-password", "plain-wrong-password", "no-client-certificate", "untrusted-broker"])
def test_a_refusal_raises_the_brokers_reason_at_once(secure_broker, certificates, scram_users,  # noqa: F811
                                                     listener, mechanism, user, ca, message):
    started = time.monotonic()
    with pytest.raises(AuthenticationFailed, match=message):
        connect(secure_broker, listener, properties(certificates, listener, mechanism, user, "wrong", ca=ca))
    assert time.monotonic() - started < 5


def test_settings_it_cannot_use_are_named_without_the_password(certificates):
    secret = {"sasl.username": "bob", "sasl.password": "hunter2"}
    with pytest.raises(ValueError, match="^sasl.mechanism: GSSAPI is not spoken") as refused:
        client_security({"security.protocol": "SASL_PLAINTEXT", **secret})  # GSSAPI: both clients' default
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ValueError, match="^ssl.keystore.location: a PKCS12 keystore"):
        client_security(librdkafka_settings({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
                                             "ssl.keystore.location": "/x.p12"}))
    with pytest.raises(ValueError, match="^ssl.ca.location: cannot load it"):
        client_security({"security.protocol": "SSL", "ssl.ca.location": certificates.path("missing.pem")})
    security = client_security({"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", **secret,
                                "ssl.ca.location": certificates.path("ca.pem")})
    assert security.tls.check_hostname and "hunter2" not in repr(security)
