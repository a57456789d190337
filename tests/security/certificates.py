"""Certificates for TLS tests and benchmarks, made with the openssl command: a CA, the broker's certificate (for
127.0.0.1 and localhost) with its PEM keystore (key and chain in one file, as Kafka's ssl.keystore.type=PEM takes),
a client certificate the CA signed (subject C=DE, O=acme, OU=eng, CN=alice) and one from a stranger CA."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


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


def make_certificates(directory: Path) -> Certificates:
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
