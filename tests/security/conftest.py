"""One broker for the security tests with a listener of each kind (PLAINTEXT first, then SSL with client auth
required, SASL_PLAINTEXT, SASL_SSL and SSL without client auth, OPEN_SSL, whose key is given inline), and the
certificates it and its clients use."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pytest

from odradek.embedded import BrokerProcess, free_port  # the one free-port probe
from tests.broker.raw_client import RawClient
from tests.security.certificates import Certificates, make_certificates

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def call_once(port: int, api_name: str, version: int, **fields):
    """One request on a fresh PLAINTEXT connection to the broker at `port`, and its answer."""
    client = RawClient(port)
    try:
        return client.call(api_name, version, **fields)
    finally:
        client.close()


@contextlib.contextmanager
def kazoo_client(connect: str):
    """A kazoo client of a cluster's ZooKeeper (inside its chroot), to read and write znodes as Kafka's tools do."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="session")
def certificates(tmp_path_factory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@dataclass
class SecureBroker:
    process: BrokerProcess
    ports: dict[str, int]

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, certificates) -> SecureBroker:
    ports = {name: free_port() for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL", "OPEN_SSL")}
    users = " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items())
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required {users};'
    settings = {
        "group.initial.rebalance.delay.ms": 0,
        "listeners": ",".join(["PLAINTEXT://127.0.0.1:0"] + [f"{name}://127.0.0.1:{port}"
                                                             for name, port in ports.items()]),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,OPEN_SSL:SSL",
        "ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": certificates.path("broker-keystore.pem"),
        "listener.name.sasl_ssl.ssl.keystore.location": certificates.path("broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certificates.path("ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        # OPEN_SSL takes its key and certificate inline (ssl.keystore.key / ssl.keystore.certificate.chain)
        "listener.name.open_ssl.ssl.keystore.key": (certificates.directory / "broker.key").read_text(),
        "listener.name.open_ssl.ssl.keystore.certificate.chain": (certificates.directory / "broker.pem").read_text(),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    }
    process = BrokerProcess(tmp_path_factory.mktemp("secure") / "data", settings=settings)
    process.start()
    ports["PLAINTEXT"] = process.port
    yield SecureBroker(process, ports)
    process.stop()
