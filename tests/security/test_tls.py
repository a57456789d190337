"""TLS listeners: confluent-kafka, kafka-python, aiokafka and kcat read and write over SSL, client certificates are
required where configured and name the principal, and Metadata on each listener advertises that listener."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from tests.security.clients import EXPECTED, aiokafka_round_trip, kafka_python_round_trip


def ssl_config(certificates, *, client: str | None = "client") -> dict:
    config = {"security.protocol": "SSL", "ssl.ca.location": certificates.path("ca.pem")}
    if client is not None:
        config["ssl.certificate.location"] = certificates.path(f"{client}.pem")
        config["ssl.key.location"] = certificates.path(f"{client}.key")
    return config


def produce_and_consume(bootstrap: str, config: dict, count: int = 200, size: int = 0) -> list[bytes]:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **config})
    for index in range(count):
        producer.produce(topic, f"value-{index}".encode().ljust(size, b"."))
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                         **config})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None, f"only {len(values)} of {count} records came back"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_confluent_kafka_writes_and_reads_over_ssl_with_a_client_certificate(secure_broker, certificates):
    values = produce_and_consume(secure_broker.address("SSL"), ssl_config(certificates))
    assert values == [f"value-{index}".encode() for index in range(200)]


def test_requests_larger_than_one_receive_arrive_whole_over_ssl(secure_broker, certificates):
    """~1 MB produce requests (many TLS records, many receives) are put together in place, byte for byte."""
    values = produce_and_consume(secure_broker.address("SSL"), ssl_config(certificates), count=20_000, size=100)
    assert values == [f"value-{index}".encode().ljust(100, b".") for index in range(20_000)]


def test_a_client_without_a_certificate_is_refused_where_client_auth_is_required(secure_broker, certificates):
    admin = AdminClient({"bootstrap.servers": secure_broker.address("SSL"), **ssl_config(certificates, client=None)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_a_certificate_from_an_untrusted_ca_is_refused(secure_broker, certificates):
    admin = AdminClient({"bootstrap.servers": secure_broker.address("SSL"),
                         **ssl_config(certificates, client="stranger")})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_ssl_without_client_auth_serves_clients_without_certificates(secure_broker, certificates):
    values = produce_and_consume(secure_broker.address("OPEN_SSL"), ssl_config(certificates, client=None), 20)
    assert len(values) == 20


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL", "OPEN_SSL"])
def test_metadata_advertises_the_listener_the_client_came_in_on(secure_broker, certificates, listener):
    config = {} if listener == "PLAINTEXT" else ssl_config(certificates)
    admin = AdminClient({"bootstrap.servers": secure_broker.address(listener), **config})
    brokers = admin.list_topics(timeout=10).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secure_broker.ports[listener])]


def test_kafka_python_writes_and_reads_over_ssl_with_a_client_certificate(secure_broker, certificates):
    config = {"bootstrap_servers": secure_broker.address("SSL"), "security_protocol": "SSL",
              "ssl_cafile": certificates.path("ca.pem"), "ssl_certfile": certificates.path("client.pem"),
              "ssl_keyfile": certificates.path("client.key")}
    assert kafka_python_round_trip(config) == EXPECTED


def test_aiokafka_writes_and_reads_over_ssl_with_a_client_certificate(secure_broker, certificates):
    from aiokafka.helpers import create_ssl_context

    context = create_ssl_context(cafile=certificates.path("ca.pem"), certfile=certificates.path("client.pem"),
                                 keyfile=certificates.path("client.key"))
    config = {"bootstrap_servers": secure_broker.address("SSL"), "security_protocol": "SSL", "ssl_context": context}
    assert aiokafka_round_trip(config) == EXPECTED


def test_kcat_writes_and_reads_over_ssl_with_a_client_certificate(secure_broker, certificates):
    topic = f"kcat-ssl-{uuid.uuid4().hex[:8]}"
    options = ["-b", secure_broker.address("SSL"), "-X", "security.protocol=SSL",
               "-X", f"ssl.ca.location={certificates.path('ca.pem')}",
               "-X", f"ssl.certificate.location={certificates.path('client.pem')}",
               "-X", f"ssl.key.location={certificates.path('client.key')}"]
    produced = subprocess.run(["kcat", *options, "-P", "-t", topic], input="one\ntwo\nthree\n", capture_output=True,
                              text=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", *options, "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e"],
                              capture_output=True, text=True, timeout=30)
    assert consumed.stdout.split() == ["one", "two", "three"], consumed.stderr


def test_plaintext_or_garbage_on_a_tls_listener_is_closed_and_the_broker_stays_up(secure_broker, certificates):
    import random
    import socket

    from tests.broker.raw_client import RawClient

    rng = random.Random(7)
    for payload in [b"\x00\x00\x00\x15\x00\x12\x00\x03" + bytes(17), b"\x16\x03\x01\x00\x05hello",
                    bytes(rng.randrange(256) for _ in range(2000))]:
        with socket.create_connection(("127.0.0.1", secure_broker.ports["OPEN_SSL"]), timeout=10) as sock:
            sock.sendall(payload)
            try:
                while sock.recv(4096):  # at most a TLS alert, then the close
                    pass
            except ConnectionResetError:
                pass
    assert RawClient(secure_broker.ports["PLAINTEXT"]).call(
        "Metadata", 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False).brokers
    admin = AdminClient({"bootstrap.servers": secure_broker.address("OPEN_SSL"), **ssl_config(certificates)})
    assert admin.list_topics(timeout=10).brokers


def test_a_refused_client_is_told_why_by_a_tls_alert(secure_broker, certificates):
    import socket
    import ssl

    context = ssl.create_default_context(cafile=certificates.path("ca.pem"))
    with socket.create_connection(("127.0.0.1", secure_broker.ports["SSL"]), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED|certificate required"):
                tls.sendall(b"\x00\x00\x00\x00")
                tls.recv(1)
