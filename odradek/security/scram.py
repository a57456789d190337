"""SCRAM credentials (RFC 5802/7677) in Kafka's form, and the server side of a SCRAM exchange.

A credential is what Kafka keeps per user and mechanism: salt, StoredKey, ServerKey and iteration count, never the
password; its text form is Kafka's, "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>" (the value under
/config/users/<user> in ZooKeeper; here the catalogue keeps the same strings). AlterUserScramCredentials hands us the
salted password, so credentials are made from that; the CLI salts a password itself.

ScramServer is the RFC 5802 server state machine for one authentication: client-first -> server-first,
client-final -> server-final, with the proof compared in constant time (hmac.compare_digest). ScramClient is the
other side, for a broker authenticating to another (sasl.mechanism.inter.broker.protocol=SCRAM-SHA-*).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import os
import re
from collections.abc import Callable

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # the ids Kafka's ScramMechanism gives them
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # what Kafka accepts (ScramMechanism.minIterations, maxIterations)
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """The client's message is malformed or its proof is wrong."""


@dataclasses.dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        fields = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           hmac.digest(salted, b"Server Key", digest), iterations)


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    salt = os.urandom(32)
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                  iterations)


_CLIENT_FIRST = re.compile(r"^(?P<gs2>n,(?:a=(?P<authzid>[^,]*))?,)n=(?P<user>[^,]*),r=(?P<nonce>[^,]+)(?:,.*)?$")
_CLIENT_FINAL = re.compile(r"^c=(?P<binding>[^,]*),r=(?P<nonce>[^,]*)(?:,[^p][^,]*)*,p=(?P<proof>[^,]*)$")


def _unescape_user(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("Invalid user name in the first client message")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM authentication, server side. `step` takes each client message and returns the answer; after the
    second, `user` is the authenticated user. Raises ScramError (the exchange fails) on anything wrong."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]):
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism]
        self.lookup = lookup
        self.user: str | None = None
        self.done = False
        self._expect_final = False
        self._first_bare = self._server_first = self._nonce = self._gs2 = ""
        self._credential: ScramCredential | None = None

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self.done:
            raise ScramError("SCRAM exchange already complete")
        return self._client_final(text) if self._expect_final else self._client_first(text)

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise ScramError("Invalid SCRAM client first message")
        user = _unescape_user(match["user"])
        if match["authzid"] and match["authzid"] != user:
            raise ScramError("Authentication failed: Client requested an authorization id that is different from "
                             "username")
        credential = self.lookup(user, self.mechanism)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._credential, self._gs2 = credential, match["gs2"]
        self._nonce = match["nonce"] + base64.b64encode(os.urandom(18)).decode().replace("=", "")
        self._first_bare = text[len(match["gs2"]):]
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self.user = user
        self._expect_final = True
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise ScramError("Invalid SCRAM client final message")
        if match["nonce"] != self._nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        try:
            binding = base64.b64decode(match["binding"], validate=True)
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message") from None
        if binding != self._gs2.encode():
            raise ScramError("Invalid channel binding in the final client message")
        without_proof = text[:text.rindex(",p=")]
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        signature = hmac.digest(credential.stored_key, auth_message, self.digest)
        client_key = bytes(a ^ b for a, b in zip(proof, signature)) if len(proof) == len(signature) else b""
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), credential.stored_key):
            raise ScramError("Invalid client credentials")
        self.done = True
        server_signature = hmac.digest(credential.server_key, auth_message, self.digest)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """One SCRAM authentication, client side: `first()`, then `final(server_first)`, then `verify(server_final)`,
    which raises ScramError unless the server proved it knows the credential too."""

    GS2_HEADER = "n,,"

    def __init__(self, mechanism: str, user: str, password: str):
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism]
        self.password = password
        self._nonce = base64.b64encode(os.urandom(18)).decode()
        self._first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (self.GS2_HEADER + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        nonce = fields.get("r", "")
        if not nonce.startswith(self._nonce) or "s" not in fields or not fields.get("i", "").isdigit():
            raise ScramError(f"Invalid SCRAM server first message: {text!r}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(fields["s"]), int(fields["i"]))
        without_proof = f"c={base64.b64encode(self.GS2_HEADER.encode()).decode()},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        credential = credential_from_salted(self.mechanism, b"", salted, int(fields["i"]))
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        signature = hmac.digest(credential.stored_key, auth_message, self.digest)
        self._server_signature = hmac.digest(credential.server_key, auth_message, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not self._server_signature or not hmac.compare_digest(server_final, expected):
            raise ScramError("Invalid SCRAM server final message: the server's signature does not match")
