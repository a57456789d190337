"""The network shell in-process, for what a real broker's handlers cannot be made to do on purpose: a handler whose
answer is still being awaited when its connection ends."""

from __future__ import annotations

import asyncio
import socket

from odradek.broker.network import ConnectionQuotas, NetworkServer, listen
from odradek.config import Listener
from odradek.protocol import RequestHeader, api, encode_request

API_VERSIONS = api("ApiVersions")


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

        quotas = ConnectionQuotas(max_connections=10, max_per_ip=10, per_ip_overrides={}, max_creation_rate=1000)
        server = NetworkServer({API_VERSIONS.key: lambda connection, header, request: stubborn_answer()},
                               max_request_bytes=1 << 20, idle_ms=0, unsupported_version_answer=lambda h: None,
                               quotas=quotas)
        server_socket = listen("127.0.0.1", 0)
        port = server_socket.getsockname()[1]
        server.accept_on(server_socket, Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port))
        serving = asyncio.ensure_future(server.serve())
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(encode_request(RequestHeader(api_key=18, api_version=0, correlation_id=1, client_id="t"),
                                      API_VERSIONS.request()))
        while not server.connections or not any(c._pending for c in server.connections):
            await asyncio.sleep(0.01)
        client.close()
        await asyncio.wait_for(cancelled.wait(), 5)
        for _ in range(20):  # let the writer run to its end
            await asyncio.sleep(0.01)
        serving.cancel()
        await server.close()
        server_socket.close()

    asyncio.run(main())
    assert not [e for e in errors if isinstance(e.get("exception"), IndexError)], errors
