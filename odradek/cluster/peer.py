"""Connections from this broker to another one, over the inter-broker listener, and requests over them.

`open_peer_connection` reaches a broker at its registered endpoint for the inter-broker listener
(odradek.security.inter_broker: inter.broker.listener.name or security.inter.broker.protocol), over TLS with that
listener's trust store when it is SSL/SASL_SSL, and on a SASL listener logs in as this broker's own user (SaslHandshake
v1, then SaslAuthenticate v2 carrying PLAIN's one message or SCRAM's two, with the server's final signature checked:
the tokens of odradek.security.client.sasl_tokens, the exchange every client of this process logs in with),
as Kafka's NetworkClient does for its replica fetchers and controller channel. A refused login raises
PeerAuthenticationFailed, a ConnectionError like any other failure to connect, with the other broker's message.
When the other broker limits SASL sessions (connections.max.reauth.ms, KIP-368), the connection says when to renew
it (`due_for_renewal`, at 85% of the lifetime granted); renewing is connecting again, which the replica fetchers do
between two fetches, rather than re-authenticating on the same connection.
`round_trip` is one request and its answer on such a connection (the replica fetchers keep theirs open);
`call_peer` is one request over a fresh connection: WriteTxnMarkers (a transaction coordinator closing a transaction
on partitions other brokers lead) is rare enough that a connection per request costs nothing worth a pool.
`PeerPool` keeps one connection per broker for requests that come often (the share persister's state writes, a
share group's lag), one request at a time on each, opened again when broken or due for a new SASL session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time
from collections.abc import Callable

from odradek.errors import ErrorCode
from odradek.protocol import RequestHeader, api, decode_response, encode_request
from odradek.security.inter_broker import InterBrokerSecurity
from odradek.security.client import sasl_tokens
from odradek.security.scram import ScramError

PEER_TIMEOUT_S = 10.0
SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION = api("SaslHandshake"), 1
SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION = api("SaslAuthenticate"), 2


REAUTHENTICATE_AT = 0.85  # of the session lifetime the other broker grants: reconnect then, as Kafka's clients
                          # re-authenticate between 85% and 95% of it (KIP-368)


class PeerAuthenticationFailed(ConnectionError):
    """The other broker refused this broker's SASL login (or could not prove its own SCRAM credential)."""


@dataclasses.dataclass
class PeerConnection:
    """An open connection to another broker; `renew_at` (time.monotonic) is when its SASL session should be
    renewed by connecting again, None when it does not expire (connections.max.reauth.ms unset there)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    renew_at: float | None = None

    def due_for_renewal(self) -> bool:
        return self.renew_at is not None and time.monotonic() >= self.renew_at

    def close(self) -> None:
        self.writer.close()


async def round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, spec, version: int, request, *,
                     client_id: str, timeout: float):
    """Send one request and read its answer (each read bounded by `timeout`)."""
    header = RequestHeader(api_key=spec.key, api_version=version, correlation_id=1, client_id=client_id)
    writer.write(encode_request(header, request))
    await writer.drain()
    try:
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout))
        return decode_response(spec.key, version, await asyncio.wait_for(reader.readexactly(size), timeout))[1]
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError("the broker closed the connection") from exc


async def open_peer_connection(security: InterBrokerSecurity, endpoint, *, client_id: str,
                               timeout: float = PEER_TIMEOUT_S) -> PeerConnection:
    """A connection to `endpoint` (a BrokerEndpoint) on the inter-broker listener, TLS and SASL done."""
    address = endpoint.address(security.listener_name)
    if address is None:
        raise ConnectionError(f"broker {endpoint.node_id} has no {security.listener_name} listener registered")
    host, port = address
    reader, writer = await asyncio.wait_for(asyncio.open_connection(
        host, port, ssl=security.tls, server_hostname=host if security.tls is not None else None), timeout)
    started = time.monotonic()
    try:
        lifetime_ms = await _log_in(reader, writer, security, client_id, timeout) if security.mechanism else 0
    except BaseException:
        writer.close()
        raise
    return PeerConnection(reader, writer, started + REAUTHENTICATE_AT * lifetime_ms / 1000 if lifetime_ms else None)


async def _log_in(reader, writer, security: InterBrokerSecurity, client_id: str, timeout: float) -> int:
    """The SASL exchange, its tokens odradek.security.client.sasl_tokens'; the session lifetime the other broker
    answered (0: none)."""
    handshake = await round_trip(reader, writer, SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION,
                                 SASL_HANDSHAKE.request(mechanism=security.mechanism), client_id=client_id,
                                 timeout=timeout)
    if handshake.error_code != ErrorCode.NONE:
        raise PeerAuthenticationFailed(f"{security.mechanism} refused ({ErrorCode(handshake.error_code).name}); "
                                       f"the broker offers {handshake.mechanisms}")
    tokens = sasl_tokens(security)
    token = next(tokens)
    while True:
        answer = await round_trip(reader, writer, SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION,
                                  SASL_AUTHENTICATE.request(auth_bytes=token), client_id=client_id, timeout=timeout)
        if answer.error_code != ErrorCode.NONE:
            raise PeerAuthenticationFailed(f"{ErrorCode(answer.error_code).name}: {answer.error_message}")
        try:
            token = tokens.send(answer.auth_bytes)
        except StopIteration:
            return answer.session_lifetime_ms
        except ScramError as exc:
            raise PeerAuthenticationFailed(str(exc)) from None


async def call_peer(security: InterBrokerSecurity, endpoint, api_name: str, version: int, request, *,
                    client_id: str, timeout: float = PEER_TIMEOUT_S):
    """The decoded response; OSError (or asyncio.TimeoutError) when the broker cannot be reached or answer."""
    async def exchange():
        connection = await open_peer_connection(security, endpoint, client_id=client_id, timeout=timeout)
        try:
            return await round_trip(connection.reader, connection.writer, api(api_name), version, request,
                                    client_id=client_id, timeout=timeout)
        finally:
            connection.close()

    return await asyncio.wait_for(exchange(), timeout)


class PeerPool:
    """One kept connection per broker. `security()` is the inter-broker listener's security (known once the broker
    has started), `endpoint_of(node_id)` a live broker's registered endpoint (None when it is not live)."""

    def __init__(self, security: Callable[[], InterBrokerSecurity], endpoint_of: Callable[[int], object], *,
                 client_id: str, timeout: float = PEER_TIMEOUT_S):
        self._security, self._endpoint_of = security, endpoint_of
        self.client_id, self.timeout = client_id, timeout
        self._peers: dict[int, tuple[PeerConnection | None, asyncio.Lock]] = {}  # node id -> (connection, its lock)

    async def request(self, node_id: int, spec, version: int, request):
        """One request to broker `node_id` and its decoded answer; OSError or asyncio.TimeoutError when it cannot
        be reached or answer (the connection is then dropped, to be opened again by the next request)."""
        _, lock = self._peers.setdefault(node_id, (None, asyncio.Lock()))
        async with lock:
            connection = self._peers[node_id][0]
            if connection is None or connection.due_for_renewal():
                if connection is not None:
                    connection.close()
                    self._peers[node_id] = (None, lock)
                endpoint = self._endpoint_of(node_id)
                if endpoint is None:
                    raise ConnectionError(f"broker {node_id} is not live")
                connection = await open_peer_connection(self._security(), endpoint, client_id=self.client_id,
                                                        timeout=self.timeout)
                self._peers[node_id] = (connection, lock)
            try:
                return await round_trip(connection.reader, connection.writer, spec, version, request,
                                        client_id=self.client_id, timeout=self.timeout)
            except BaseException:
                connection.close()
                self._peers[node_id] = (None, lock)
                raise

    def close(self) -> None:
        for connection, _ in self._peers.values():
            if connection is not None:
                connection.close()
        self._peers.clear()
