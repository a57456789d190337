"""connections.max.reauth.ms (KIP-368): the session lifetime is announced, an expired session is closed at its next
request, clients re-authenticate in place, and a re-authentication may not change the principal."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from odradek.embedded import BrokerProcess
from odradek.errors import ErrorCode
from tests.broker.raw_client import RawClient
from tests.security.conftest import free_port

LIFETIME_MS = 1500
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    port = free_port()
    users = " ".join(f'user_{user}="{password}"' for user, password in USERS.items())
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms": "PLAIN", "connections.max.reauth.ms": LIFETIME_MS,
                "plain.sasl.jaas.config": f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"}
    with BrokerProcess(tmp_path_factory.mktemp("reauth") / "data", settings=settings) as process:
        yield process, port


def authenticated_client(port: int, user: str = "alice") -> tuple[RawClient, int]:
    client = RawClient(port)
    assert client.call("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    answer = client.call("SaslAuthenticate", 1, auth_bytes=f"\0{user}\0{USERS[user]}".encode())
    assert answer.error_code == 0
    return client, answer.session_lifetime_ms


def metadata(client: RawClient):
    return client.call("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)


def test_an_expired_session_is_closed_at_its_next_request(reauth_broker):
    client, lifetime_ms = authenticated_client(reauth_broker[1])
    assert lifetime_ms == LIFETIME_MS
    assert metadata(client).brokers
    time.sleep(LIFETIME_MS / 1000 + 0.3)
    with pytest.raises(ConnectionError):
        metadata(client)


def test_reauthentication_renews_the_session(reauth_broker):
    client, _ = authenticated_client(reauth_broker[1])
    time.sleep(LIFETIME_MS / 1000 + 0.3)
    assert client.call("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    again = client.call("SaslAuthenticate", 1, auth_bytes=f"\0alice\0{USERS['alice']}".encode())
    assert (again.error_code, again.session_lifetime_ms) == (0, LIFETIME_MS)
    assert metadata(client).brokers


def test_reauthentication_may_not_change_the_principal(reauth_broker):
    client, _ = authenticated_client(reauth_broker[1])
    assert client.call("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    other = client.call("SaslAuthenticate", 1, auth_bytes=f"\0bob\0{USERS['bob']}".encode())
    assert (other.error_code, other.error_message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "Cannot change principals during re-authentication from User:alice: User:bob")


def test_confluent_kafka_keeps_producing_across_reauthentications(reauth_broker):
    process, port = reauth_broker
    errors, delivered = [], []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": USERS["alice"],
                         "error_cb": errors.append})
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    while time.monotonic() - started < 4 * LIFETIME_MS / 1000:
        producer.produce(topic, b"v", on_delivery=lambda error, message: delivered.append(error))
        producer.poll(0.1)
    assert producer.flush(10) == 0
    assert delivered and all(error is None for error in delivered)
    assert process.log_path.read_text().count("re-authenticated as User:alice") >= 2
