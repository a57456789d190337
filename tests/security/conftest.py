"""One broker for the security tests with a listener of each kind (PLAINTEXT first, then SSL with client auth
required, SASL_PLAINTEXT, SASL_SSL and SSL without client auth), and the certificates it and its clients use,
made here with the openssl command: a CA, the broker's certificate (for 127.0.0.1 and localhost), a client
certificate the CA signed and one from a stranger CA."""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.embedded import BrokerProcess

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(directory: Path, name: str, subject: str, ca: str, extensions: str = "") -> None:
    """A key and a certificate for `subject`, signed by the CA named `ca` (files <ca>.key, <ca>.pem)."""
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-subj", subject,
             "-out", f"{name}.csr", cwd=directory)
    extension_args = []
    if extensions:
        (directory / f"{name}.ext").write_text(extensions)
        extension_args = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-out", f"{name}.pem", *extension_args, cwd=directory)


@dataclass
class Certificates:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)


@pytest.fixture(scope="session")
def certificates(tmp_path_factory) -> Certificates:
    directory = tmp_path_factory.mktemp("certificates")
    for ca in ("ca", "stranger-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem",
                 "-days", "2", "-subj", f"/CN=odradek test {ca}", cwd=directory)
    _issue(directory, "broker", "/CN=localhost", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _issue(directory, "client", "/C=DE/O=acme/OU=eng/CN=alice", "ca")
    _issue(directory, "stranger", "/CN=mallory", "stranger-ca")
    # Kafka's PEM keystore: the private key and the certificate chain in one file
    (directory / "broker-keystore.pem").write_text(
        (directory / "broker.key").read_text() + (directory / "broker.pem").read_text())
    return Certificates(directory)


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
        "ssl.keystore.location": certificates.path("broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certificates.path("ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    }
    process = BrokerProcess(tmp_path_factory.mktemp("secure") / "data", settings=settings)
    process.start()
    ports["PLAINTEXT"] = process.port
    yield SecureBroker(process, ports)
    process.stop()
