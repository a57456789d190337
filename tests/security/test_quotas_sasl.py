"""A user's client quota applies to that user's authenticated connections, TLS ones included: alice, logged in with
SASL/PLAIN over SASL_SSL, is throttled by the producer_byte_rate set for User alice (confluent-kafka reports the
answers' throttle_time_ms), while the same records from ANONYMOUS on PLAINTEXT are not."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.security.conftest import PLAIN_USERS
from tests.security.test_quotas import alter

RECORD = b"x" * 10_000


def throttle_times(config: dict, topic: str, records: int = 30) -> list[int]:
    """The throttle times (ms) the broker's answers carried while `records` 10 kB records were produced."""
    throttled = []
    producer = Producer({**config, "linger.ms": 0, "batch.size": len(RECORD) + 200,
                         "throttle_cb": lambda event: throttled.append(event.throttle_time)})
    for _ in range(records):
        producer.produce(topic, RECORD)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0.5)  # throttle events still queued
    return throttled


def test_a_users_byte_rate_throttles_its_sasl_ssl_connections_only(secure_broker, certificates):
    class Plaintext:
        port = secure_broker.ports["PLAINTEXT"]
    assert alter(Plaintext, [("user", "alice")], [("producer_byte_rate", 10_000.0, False)]).error_code == 0
    anonymous = throttle_times({"bootstrap.servers": secure_broker.address("PLAINTEXT")}, "quota-anonymous")
    assert not any(anonymous)
    alice = throttle_times({
        "bootstrap.servers": secure_broker.address("SASL_SSL"), "security.protocol": "SASL_SSL",
        "ssl.ca.location": certificates.path("ca.pem"), "sasl.mechanism": "PLAIN", "sasl.username": "alice",
        "sasl.password": PLAIN_USERS["alice"]}, "quota-alice")
    assert any(time_ms > 0 for time_ms in alice), alice
