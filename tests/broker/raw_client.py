"""A bare protocol client for tests that must send what no real client would: our codec over a plain socket."""

from __future__ import annotations

import socket
import struct

from odradek.protocol import RequestHeader, api, decode_response, encode_request


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame's body; ConnectionError if the broker closes first."""
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class RawClient:
    def __init__(self, port: int, client_id: str = "raw-test"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation_id = 0
        self.client_id = client_id

    def call(self, api_name: str, version: int, **fields):
        target = api(api_name)
        self.correlation_id += 1
        header = RequestHeader(api_key=target.key, api_version=version, correlation_id=self.correlation_id,
                               client_id=self.client_id)
        self.sock.sendall(encode_request(header, target.request(**fields)))
        correlation_id, body = decode_response(target.key, version, read_frame(self.sock))
        assert correlation_id == self.correlation_id
        return body

    def pipeline(self, api_name: str, version: int, requests: list[dict]) -> list:
        """Send every request before reading any answer (as a pipelining producer does); the answers in order."""
        target = api(api_name)
        first = self.correlation_id + 1
        frames = []
        for fields in requests:
            self.correlation_id += 1
            header = RequestHeader(api_key=target.key, api_version=version, correlation_id=self.correlation_id,
                                   client_id="raw-test")
            frames.append(encode_request(header, target.request(**fields)))
        self.sock.sendall(b"".join(frames))
        answers = []
        for expected in range(first, self.correlation_id + 1):
            correlation_id, body = decode_response(target.key, version, read_frame(self.sock))
            assert correlation_id == expected
            answers.append(body)
        return answers

    def close(self) -> None:
        self.sock.close()
