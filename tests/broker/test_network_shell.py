"""The network shell in-process, for what a real broker's handlers cannot be made to do on purpose (a handler whose
answer is still being awaited when its connection ends) or a real broker does not show from outside (how many
writes its answers take)."""

from __future__ import annotations

import asyncio
import socket

from odradek.broker.network import Connection, ConnectionQuotas, NetworkServer, listen
from odradek.config import Listener
from odradek.protocol import RequestHeader, api, encode_request

API_VERSIONS = api("ApiVersions")


def serving(handler) -> tuple[NetworkServer, socket.socket, asyncio.Future]:
    """A server answering ApiVersions with `handler` on a port of its own: (server, listening socket, its task)."""
    quotas = ConnectionQuotas(max_connections=10, max_per_ip=10, per_ip_overrides={}, max_creation_rate=1000)
    server = NetworkServer({API_VERSIONS.key: handler}, max_request_bytes=1 << 20, idle_ms=0,
                           unsupported_version_answer=lambda h: None, quotas=quotas)
    server_socket = listen("127.0.0.1", 0)
    server.accept_on(server_socket, Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", server_socket.getsockname()[1]))
    return server, server_socket, asyncio.ensure_future(server.serve())


def api_versions_request(correlation_id: int) -> bytes:
    return encode_request(RequestHeader(api_key=18, api_version=0, correlation_id=correlation_id, client_id="t"),
                          API_VERSIONS.request())


def test_an_answer_finished_after_its_connection_closed_is_dropped_quietly():
    """The writer awaits a handler's answer; the peer closes; the connection ends and its queue is cleared. A handler
    that finishes anyway (it returns a value when cancelled, as a long poll cut short may) must not make the writer
    take from the cleared queue (an IndexError in a task nobody awaits: the chaos runs logged it)."""
    errors: list = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        cancelled = asyncio.Event()

        async def stubborn_answer():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                return API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)

        server, server_socket, task = serving(lambda connection, header, request: stubborn_answer())
        client = socket.create_connection(server_socket.getsockname()[:2])
        client.sendall(api_versions_request(1))
        while not server.connections or not any(c._pending for c in server.connections):
            await asyncio.sleep(0.01)
        client.close()
        await asyncio.wait_for(cancelled.wait(), 5)
        for _ in range(20):  # let the writer run to its end
            await asyncio.sleep(0.01)
        task.cancel()
        await server.close()
        server_socket.close()

    asyncio.run(main())
    assert not [e for e in errors if isinstance(e.get("exception"), IndexError)], errors


def test_a_pipelined_burst_is_answered_in_one_write(monkeypatch):
    """64 requests sent in one piece are answered in order, in one sendmsg (a few at most, should the burst arrive
    in several receives), not one write per answer: each write is a system call, which for one-record produce
    requests was a fifth of the broker's CPU."""
    writes: list[int] = []
    original = Connection._sendmsg

    def counted(connection, buffers):
        writes.append(len(buffers))
        return original(connection, buffers)

    monkeypatch.setattr(Connection, "_sendmsg", counted)
    answer = API_VERSIONS.response(error_code=0, api_keys=[], throttle_time_ms=0)

    async def main() -> list[int]:
        server, server_socket, task = serving(lambda connection, header, request: answer)
        reader, writer = await asyncio.open_connection(*server_socket.getsockname()[:2])
        writer.write(b"".join(api_versions_request(n) for n in range(64)))
        correlation_ids = []
        for _ in range(64):
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 5), "big")
            correlation_ids.append(int.from_bytes((await reader.readexactly(size))[:4], "big"))
        writer.close()
        task.cancel()
        await server.close()
        server_socket.close()
        return correlation_ids

    assert asyncio.run(main()) == list(range(64))
    assert len(writes) <= 3, writes
