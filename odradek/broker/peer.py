"""Requests from this broker to another one: one request over a fresh connection, answered or failed.

The only broker-to-broker request so far is WriteTxnMarkers (a transaction coordinator closing a transaction on
partitions other brokers lead), rare enough that a connection per request costs nothing worth a pool; this is the
event loop's edge for it, with the protocol's own codec.
"""

from __future__ import annotations

import asyncio
import struct

from odradek.protocol import RequestHeader, api, decode_response, encode_request

PEER_TIMEOUT_S = 10.0


async def call_peer(host: str, port: int, api_name: str, version: int, request, *, client_id: str,
                    timeout: float = PEER_TIMEOUT_S):
    """The decoded response; OSError (or asyncio.TimeoutError) when the broker cannot be reached or answer."""
    target = api(api_name)
    header = RequestHeader(api_key=target.key, api_version=version, correlation_id=1, client_id=client_id)

    async def exchange():
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(encode_request(header, request))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            return decode_response(target.key, version, await reader.readexactly(size))[1]
        finally:
            writer.close()

    try:
        return await asyncio.wait_for(exchange(), timeout)
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError(f"broker {host}:{port} closed the connection") from exc
