"""A blocking Kafka client connection: one TCP socket (TLS-wrapped for SSL and SASL_SSL), requests encoded and
answers decoded by this package's codec, answered in order.

Shared by the readers that speak Kafka themselves rather than through confluent-kafka (the Spark source's fetcher and
the client's SimpleConsumer): each says which versions of which APIs it reads with, and the connection agrees on the
highest of each that the broker serves too (ApiVersions v0, which every Kafka answers) before anything else is sent.
A secured connection (odradek.security.client.ClientSecurity, from the same settings as a confluent-kafka client)
does its TLS handshake first, and on a SASL listener logs in after ApiVersions as Kafka's Java client does:
SaslHandshake v1 naming the mechanism, then SaslAuthenticate (v0-v2) carrying each token of the exchange. A broker
that refuses the handshake (its certificate not trusted, or not ours) or the login raises AuthenticationFailed with
the broker's own message (SASL_AUTHENTICATION_FAILED's error message, SaslAuthenticationException's in Java), at
once: a reader must not retry it as it retries a lost connection.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections import deque

from odradek.errors import ErrorCode, error_name
from odradek.protocol import ProtocolError, RequestHeader, api, decode_response, encode_request
from odradek.security.client import PLAINTEXT, ClientSecurity, sasl_tokens
from odradek.security.scram import ScramError

_FRAME_SIZE = struct.Struct(">i")


class Unreachable(Exception):
    """The broker could not be reached or asked: worth another attempt, after finding the broker again."""


class UnsupportedApi(Exception):
    """The broker serves none of the versions of an API that the reader asked for."""


class AuthenticationFailed(Exception):
    """The broker refused this client's TLS handshake or SASL login (Kafka's AuthenticationException): the same
    settings will be refused again, so this is not retried."""


SASL_HANDSHAKE_VERSION = 1  # v0 is followed by bare tokens; v1 by SaslAuthenticate requests (KIP-152)
SASL_AUTHENTICATE_VERSIONS = (0, 2)


class Connection:
    """One broker connection, secured as `security` says, at the highest version of each API in `versions`
    ({name: (lowest, highest)}) that both sides serve."""

    def __init__(self, address: tuple[str, int], timeout_s: float, client_id: str,
                 versions: dict[str, tuple[int, int]], security: ClientSecurity = PLAINTEXT):
        self.address = address
        self.client_id = client_id
        self._correlation_id = 0
        self._waiting: deque[tuple[int, object, int]] = deque()  # (correlation id, api, version) sent, unanswered
        try:
            self._socket = socket.create_connection(address, timeout=timeout_s)
        except OSError as exc:
            raise Unreachable(f"cannot connect to {address[0]}:{address[1]}: {exc}") from None
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if security.tls is not None:
                try:
                    self._socket = security.tls.wrap_socket(self._socket, server_hostname=address[0])
                except OSError as exc:
                    raise self._failure(exc, "TLS handshake with") from None
            self.versions = {"ApiVersions": 0}
            served = {entry.api_key: entry for entry in self.call("ApiVersions").api_keys}
            if security.mechanism is not None:
                self._log_in(security, served)
            for name, (lowest, highest) in versions.items():
                self.versions[name] = self._agreed(served, name, lowest, highest)
        except BaseException:
            self.close()
            raise

    def _agreed(self, served: dict, name: str, lowest: int, highest: int) -> int:
        """The highest version of `name` in lowest..highest that the broker serves too."""
        entry = served.get(api(name).key)
        top = min(highest, entry.max_version) if entry else -1
        if entry is None or top < max(lowest, entry.min_version):
            raise UnsupportedApi(f"the broker at {self.where} does not serve {name} v{lowest}-{highest}")
        return top

    def _log_in(self, security: ClientSecurity, served: dict) -> None:
        """The SASL exchange: SaslHandshake v1, then one SaslAuthenticate per token."""
        self.versions["SaslHandshake"] = self._agreed(served, "SaslHandshake", SASL_HANDSHAKE_VERSION,
                                                      SASL_HANDSHAKE_VERSION)
        self.versions["SaslAuthenticate"] = self._agreed(served, "SaslAuthenticate", *SASL_AUTHENTICATE_VERSIONS)
        handshake = self.call("SaslHandshake", mechanism=security.mechanism)
        if handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationFailed(f"{self.where}: UNSUPPORTED_SASL_MECHANISM: Client SASL mechanism "
                                       f"'{security.mechanism}' not enabled in the server, enabled mechanisms are "
                                       f"{list(handshake.mechanisms)}")
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationFailed(f"{self.where}: {error_name(handshake.error_code)} answering SaslHandshake "
                                       f"for {security.mechanism}")
        tokens = sasl_tokens(security)
        token = next(tokens)
        while True:
            answer = self.call("SaslAuthenticate", auth_bytes=token)
            if answer.error_code != ErrorCode.NONE:
                raise AuthenticationFailed(f"{self.where}: {error_name(answer.error_code)}: "
                                           f"{answer.error_message or 'no message'}")
            try:
                token = tokens.send(answer.auth_bytes)
            except StopIteration:
                return
            except ScramError as exc:
                raise AuthenticationFailed(f"{self.where}: {exc}") from None

    def _failure(self, exc: OSError, doing: str) -> Exception:
        """What a socket error means: TLS refused (an alert, a certificate not trusted) is AuthenticationFailed, as
        Kafka's SslAuthenticationException; anything else (closed, timed out, reset) Unreachable."""
        if isinstance(exc, ssl.SSLCertVerificationError):
            return AuthenticationFailed(f"{self.where}: TLS: the broker's certificate is not trusted: "
                                        f"{exc.verify_message}")
        if isinstance(exc, ssl.SSLError) and not isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return AuthenticationFailed(f"{self.where}: TLS refused by the broker: {exc.reason or exc}")
        return Unreachable(f"{doing} {self.where}: {exc}")

    def send(self, name: str, **fields) -> None:
        target, version = api(name), self.versions[name]
        self._correlation_id += 1
        header = RequestHeader(api_key=target.key, api_version=version, correlation_id=self._correlation_id,
                               client_id=self.client_id)
        try:
            self._socket.sendall(encode_request(header, target.request(**fields)))
        except OSError as exc:
            raise self._failure(exc, f"sending {name} to") from None
        self._waiting.append((self._correlation_id, target, version))

    def receive(self):
        """The answer to the oldest request still unanswered."""
        correlation_id, target, version = self._waiting.popleft()
        try:
            (size,) = _FRAME_SIZE.unpack(self._read_exactly(4))
            answered, body = decode_response(target.key, version, self._read_exactly(size))
        except OSError as exc:
            raise self._failure(exc, f"reading {target.name} from") from None
        except ProtocolError as exc:
            raise Unreachable(f"reading {target.name} from {self.where}: {exc}") from None
        if answered != correlation_id:
            raise Unreachable(f"{self.where} answered request {answered} where {correlation_id} was due")
        return body

    def call(self, name: str, **fields):
        self.send(name, **fields)
        return self.receive()

    def close(self) -> None:
        self._socket.close()

    @property
    def where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def _read_exactly(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view = memoryview(buffer)
        filled = 0
        while filled < size:
            received = self._socket.recv_into(view[filled:])
            if not received:
                raise ConnectionError("closed by the broker")
            filled += received
        return buffer


def server_address(server: str) -> tuple[str, int]:
    """host:port from one bootstrap.servers entry (a PLAINTEXT:// prefix allowed, IPv6 hosts in brackets)."""
    host, _, port = server.strip().rpartition("://")[2].rpartition(":")
    return host.strip("[]"), int(port)
