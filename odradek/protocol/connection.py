"""A blocking Kafka client connection: one plain TCP socket, requests encoded and answers decoded by this package's
codec, answered in order.

Shared by the readers that speak Kafka themselves rather than through confluent-kafka (the Spark source's fetcher and
the client's SimpleConsumer): each says which versions of which APIs it reads with, and the connection agrees on the
highest of each that the broker serves too (ApiVersions v0, which every Kafka answers) before anything else is sent.
"""

from __future__ import annotations

import socket
import struct
from collections import deque

from odradek.protocol import ProtocolError, RequestHeader, api, decode_response, encode_request

_FRAME_SIZE = struct.Struct(">i")


class Unreachable(Exception):
    """The broker could not be reached or asked: worth another attempt, after finding the broker again."""


class UnsupportedApi(Exception):
    """The broker serves none of the versions of an API that the reader asked for."""


class Connection:
    """One broker connection, at the highest version of each API in `versions` ({name: (lowest, highest)}) that
    both sides serve."""

    def __init__(self, address: tuple[str, int], timeout_s: float, client_id: str,
                 versions: dict[str, tuple[int, int]]):
        self.address = address
        self.client_id = client_id
        self._correlation_id = 0
        self._waiting: deque[tuple[int, object, int]] = deque()  # (correlation id, api, version) sent, unanswered
        try:
            self._socket = socket.create_connection(address, timeout=timeout_s)
        except OSError as exc:
            raise Unreachable(f"cannot connect to {address[0]}:{address[1]}: {exc}") from None
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.versions = {"ApiVersions": 0}
        served = {entry.api_key: entry for entry in self.call("ApiVersions").api_keys}
        for name, (lowest, highest) in versions.items():
            entry = served.get(api(name).key)
            top = min(highest, entry.max_version) if entry else -1
            if entry is None or top < max(lowest, entry.min_version):
                self.close()
                raise UnsupportedApi(f"the broker at {self.where} does not serve {name} v{lowest}-{highest}")
            self.versions[name] = top

    def send(self, name: str, **fields) -> None:
        target, version = api(name), self.versions[name]
        self._correlation_id += 1
        header = RequestHeader(api_key=target.key, api_version=version, correlation_id=self._correlation_id,
                               client_id=self.client_id)
        try:
            self._socket.sendall(encode_request(header, target.request(**fields)))
        except OSError as exc:
            raise Unreachable(f"sending {name} to {self.where}: {exc}") from None
        self._waiting.append((self._correlation_id, target, version))

    def receive(self):
        """The answer to the oldest request still unanswered."""
        correlation_id, target, version = self._waiting.popleft()
        try:
            (size,) = _FRAME_SIZE.unpack(self._read_exactly(4))
            answered, body = decode_response(target.key, version, self._read_exactly(size))
        except (OSError, ProtocolError) as exc:
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
