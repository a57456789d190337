"""The network shell: accepts connections, cuts frames, runs handlers, writes answers in order.

Built on raw non-blocking sockets driven by the event loop (uvloop where installed) rather than asyncio streams,
because a fetch answer's records must go from the segment file to the socket with `os.sendfile`, and that needs the
socket itself, with nothing buffered in front of it. Each connection's requests are read by the socket's read
callback (`_on_data`, one registration with the event loop for the connection's life, where sock_recv registers
and unregisters at every wait: six epoll_ctl): it receives once, cuts frames and starts their handlers in arrival
order, all without a task switch and without a receive that finds nothing, which a reader task paid per wake-up
(a turn of the loop, a failed recv's exception, a future). A reader task remains for what has to wait (a muted or
closing connection, a full queue) and hands reading back to the callback after it; a frame larger than one receive
is received in place by the callback too, into a buffer of its own.
The answers go out in arrival order; many requests may be in flight on one connection (up to MAX_IN_FLIGHT), so
pipelining producers never wait for a round trip. Answers ready at once (a Produce, a Fetch with data) are sent
from the reading itself, those of one receive's requests with one sendmsg; a writer task sends only what has to
wait (a long poll, an acks=all append, what a full socket did not take): waking a task per answer cost each small
request a task switch and an event's bookkeeping. The appends of one receive's requests are written together (the
log manager's DeferredWrites window, opened before a request is handed on when more bytes follow it in the receive
or it is large, and closed by `_send_queued`, before any answer leaves and before any wait): a pipelining producer's
requests to a partition cost one pwritev instead of one each, and a lone small request appends with its own pwrite
(the window's bookkeeping, a third of what one receive adds to a request, buys nothing there). A large window's
writes go to the log manager's writer thread, and its answers wait in the queue behind a barrier that the writes
settle (`_answers_wait_for`) while the loop goes on to other requests. Closing (a stopping broker) reads no new
request and answers those read, up to a bound, before the connections close (`close`).

A frame that is malformed, oversized (socket.request.max.bytes) or names an API or version we do not serve closes
that one connection with a logged reason (ApiVersions with an unknown version gets its KIP-511 answer instead);
nothing a peer sends can stop the server or touch another connection. Memory follows the bytes peers actually
sent, never the sizes they announce. How many connections there are, over all listeners together, is Kafka's
ConnectionQuotas (below).

One server accepts on every entry of `listeners`. A TLS listener's connections (TlsConnection) run the same reader
and writer over an ssl.SSLObject between two memory BIOs, so the socket stays a plain non-blocking one in the same
loop; only their receive and send primitives differ, and their fetch answers are read into memory and encrypted,
since sendfile cannot pass through TLS. On a SASL listener a connection carries its SASL session (`authenticating`)
until the exchange succeeds: before that, a request the session does not expect (anything but ApiVersions and
SaslHandshake first, then only SaslAuthenticate) closes it (ILLEGAL_SASL_STATE, as Kafka), and so does not
finishing within the SASL deadline. Until then a frame may be no larger than sasl.server.max.receive.size (512 KiB,
Kafka's SaslServerAuthenticator: larger closes at once), and the frames that unauthenticated connections are still
receiving may hold no more than UNAUTHENTICATED_MEMORY_BYTES together: one that would go past it is closed, so
connections that never log in cannot make the broker buffer more than that, however many there are.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import math
import os
import socket
import ssl
import struct
import time
import traceback
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping
from types import CoroutineType
from typing import Any

from odradek.broker._frame_buffer import frame_buffer
from odradek.cluster.append_waits import resolve, settled
from odradek.config import Listener
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import ProtocolError, RequestHeader, UnsupportedVersion, decode_request, encode_response
from odradek.records.region import FileRegion
from odradek.security.sasl import SaslAuthenticationFailed
from odradek.storage.log import WRITER_THREAD_MIN_BYTES, DeferredWrites, PendingWrite, call_when_written

log = logging.getLogger("odradek.network")

MAX_IN_FLIGHT = 128
RECV_SIZE = 256 * 1024
# What a receive asks for while the peer sends little: under glibc malloc's mmap threshold (128 KiB), so the
# buffer comes from the heap and shrinking it to what arrived is no mremap and munmap (two system calls and a page
# fault per receive at 256 KiB). A receive that comes back full asks for RECV_SIZE next.
SMALL_RECV_SIZE = 64 * 1024
_SIZE = struct.Struct(">i")
_NOTHING = b""  # `_partial` while it holds nothing: a receive taken whole leaves no buffer behind
ANONYMOUS = "User:ANONYMOUS"
REAUTHENTICATION_KEYS = frozenset({17, 36})  # SaslHandshake, SaslAuthenticate: what an expired session may send
TLS_RECORD_SIZE = 16384  # the most plaintext one TLS record carries
INLINE_REGION_BYTES = 16384  # file regions up to this size are copied into the answer's write, not sendfile'd
SEND_BUFFERS_MAX = os.sysconf("SC_IOV_MAX")  # buffers one sendmsg takes (Linux: 1024; more is EMSGSIZE)
DRAIN_POLL_SECONDS = 0.01  # how often a closing server looks whether every connection has answered
AUTHENTICATION_TIMEOUT_SECONDS = 10.0  # SASL must be done within this (or connections.max.idle.ms if shorter)
UNAUTHENTICATED_MEMORY_BYTES = 32 * 1024 * 1024  # what frames still arriving before authentication hold, all together

# A handler answers one decoded request: a response body, None for no answer (Produce with acks=0), or an
# awaitable of either (Fetch long polls).
Handler = Callable[["Connection", RequestHeader, Any], Any]


class CloseConnection(Exception):
    """Raised by a handler that wants this connection closed (with the reason logged)."""


class ConnectionQuotas:
    """Kafka's ConnectionQuotas, broker-wide over every listener, as plain state the accept loops ask (no I/O here).

    - max.connections: at the limit the acceptor stops accepting until a connection closes, so new ones wait in the
      listen backlog (Kafka blocks its acceptor the same way) rather than being refused.
    - max.connections.per.ip, with max.connections.per.ip.overrides ("host:count,..."): a connection over its
      address's limit is closed at once, as Kafka's TooManyConnectionsException does.
    - max.connection.creation.rate: a token bucket of one second's worth; past it the acceptor waits, as Kafka's
      connection rate throttle delays its acceptor.
    """

    def __init__(self, *, max_connections: int, max_per_ip: int, per_ip_overrides: Mapping[str, int],
                 max_creation_rate: int, clock: Callable[[], float] = time.monotonic):
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self.max_creation_rate = max_creation_rate
        self.total = 0
        self._per_ip: Counter = Counter()
        self._clock = clock
        self._tokens = float(max_creation_rate)
        self._refilled_at = clock()

    @classmethod
    def from_config(cls, config: Mapping) -> "ConnectionQuotas":
        """From the broker's settings, refused as Kafka refuses them (INVALID_CONFIG): a per-IP limit of 0 makes
        sense only beside overrides that let some address in."""
        overrides = parse_ip_overrides(config["max.connections.per.ip.overrides"])
        if config["max.connections.per.ip"] == 0 and not overrides:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "max.connections.per.ip can be set to zero only if "
                                                       "max.connections.per.ip.overrides property is set.")
        return cls(max_connections=config["max.connections"], max_per_ip=config["max.connections.per.ip"],
                   per_ip_overrides=overrides, max_creation_rate=config["max.connection.creation.rate"])

    def slot_available(self) -> bool:
        return self.total < self.max_connections

    def creation_delay(self) -> float:
        """Take the next connection's token; the seconds to wait before accepting it (0 under the rate; at most
        one second, Kafka's longest connection throttle, when the rate is 0)."""
        now = self._clock()
        rate = self.max_creation_rate
        if not rate:
            return 1.0
        self._tokens = min(float(rate), self._tokens + (now - self._refilled_at) * rate) - 1
        self._refilled_at = now
        return -self._tokens / rate if self._tokens < 0 else 0.0

    def admit(self, ip: str) -> int | None:
        """Count a new connection from `ip`; None if admitted, else the limit it would pass (not counted)."""
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if self._per_ip[ip] >= limit:
            return limit
        self._per_ip[ip] += 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]
        self.total -= 1


def parse_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides, "host:count,...", keyed by the addresses each host resolves to."""
    overrides: dict[str, int] = {}
    for entry in filter(None, (item.strip() for item in text.split(","))):
        host, _, count = entry.rpartition(":")
        if not host or not count.strip().isdigit():
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {text!r} for configuration "
                                                       f"max.connections.per.ip.overrides: expected host:count,...")
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host.strip().strip("[]"), None)}
        except socket.gaierror as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"max.connections.per.ip.overrides: cannot resolve "
                                                       f"{host!r}: {exc}") from None
        for address in addresses:
            overrides[address] = int(count)
    return overrides


class Connection:
    __slots__ = ("server", "sock", "ip", "peer", "task", "last_active", "closed", "_pending", "_slot_freed",
                 "_answer_ready", "_writer_idle", "_unsent", "_watching_reads", "_reading", "_partial",
                 "_wanted", "_ready_frame", "_large", "fetch_sessions",
                 "principal", "listener", "authenticating", "close_after_answer", "sasl", "session_expires_at",
                 "muted_until", "_held")

    def __init__(self, server: "NetworkServer", sock: socket.socket, address: tuple, listener: Listener,
                 authenticating: Any = None):
        self.server = server
        self.sock = sock
        self.ip = address[0]
        self.peer = f"{address[0]}:{address[1]}"
        self.listener = listener
        # the SASL session (odradek.security.sasl.SaslSession) until it authenticates; None when nothing is owed
        self.authenticating = authenticating
        self.sasl = authenticating  # the connection's SASL session, kept for re-authentication (KIP-368)
        self.session_expires_at: float | None = None  # connections.max.reauth.ms, on the monotonic clock
        self.close_after_answer = False  # set by a handler whose answer is the last (failed authentication)
        self.last_active = time.monotonic()
        self.task: asyncio.Task | None = None
        self.closed = False
        self._pending: deque = deque()
        self._slot_freed = asyncio.Event()
        self._answer_ready = asyncio.Event()  # wakes the writer task
        self._writer_idle = True  # the writer task waits for work and holds no answer (the reader may send)
        self._unsent: tuple | None = None  # (chunks, written, throttle_ms) the reader left to the writer
        self._watching_reads = False  # the socket's read registration with the event loop
        self._reading: asyncio.Future | None = None  # the reader task's wait while `_on_data` takes what arrives
        self._partial = _NOTHING  # received bytes not yet cut into frames (a frame's start, or after a wait)
        self._wanted = SMALL_RECV_SIZE  # what the next receive asks for
        self._ready_frame: Any = None  # a frame cut (or received whole) but not handed on yet, kept over a wait
        self._large: _LargeFrame | None = None  # a frame larger than one receive, being received in place
        self.fetch_sessions: dict = {}
        # who is asking, as Kafka's KafkaPrincipal text: "User:ANONYMOUS" until a certificate or SASL says otherwise
        self.principal = ANONYMOUS
        self.muted_until = 0.0  # time.monotonic() before which no request is read (a client quota's throttle)
        self._held = 0  # bytes of the frame being received counted in the server's unauthenticated_held

    async def run(self) -> None:
        writer = asyncio.ensure_future(self._write_answers())
        deadline = None
        if self.authenticating is not None:
            deadline = asyncio.get_running_loop().call_later(self.server.authentication_seconds,
                                                             self._authentication_due)
        try:
            await self._start()
            await self._read_requests()
        except (OSError, CloseConnection) as exc:  # ssl.SSLError and ConnectionError are OSErrors
            self._log_end(exc)
            _clear_frames(exc)
        finally:
            if deadline is not None:
                deadline.cancel()
            writer.cancel()
            self._abort()

    def _log_end(self, exc: OSError | CloseConnection) -> None:
        if isinstance(exc, ssl.SSLError):
            log.info("TLS with %s failed: %s", self.peer, exc)
        elif isinstance(exc, CloseConnection):
            log.warning("closing connection from %s: %s", self.peer, exc)
        else:
            log.debug("connection from %s ended: %s", self.peer, exc)

    async def _start(self) -> None:
        """What comes before the first request: nothing on plaintext, the handshake on TLS."""

    def close_soon(self) -> None:
        """End the connection: no request is read from now on (the read callback is unregistered at once), and its
        task, cancelled, closes it."""
        self._stop_watching_reads()
        self.task.cancel()

    def _authentication_due(self) -> None:
        if self.authenticating is not None and not self.closed:
            log.warning("closing connection from %s: SASL authentication did not finish in %.1f s",
                        self.peer, self.server.authentication_seconds)
            self.close_soon()

    def _stop_watching_reads(self) -> None:
        if self._watching_reads:
            self._watching_reads = False
            asyncio.get_running_loop().remove_reader(self.sock.fileno())

    def _abort(self) -> None:
        """Drop whatever is still in flight and close the socket; a DeferredWrites window a failed request left open
        is closed and written."""
        self._write_deferred_or_log()
        for item in self._pending:
            if isinstance(item[1], asyncio.Future):
                item[1].cancel()
        self._pending.clear()
        self._unsent = None
        self._large = None
        self._reading = None
        if self._held:
            self._release_held()
        if not self.closed:
            self.closed = True
            self.server.forget(self)
            self._stop_watching_reads()  # before the close: the descriptor's number is free for reuse after it
            try:
                self.sock.close()
            except OSError:
                pass

    async def _read_requests(self) -> None:
        """Requests are taken by `_on_data`, the socket's read callback, as bytes arrive, with no task switch and no
        receive that finds nothing; this task only waits until the peer closes, or does what the callback cannot
        (a wait `_take` needs), then hands reading back to the callback."""
        loop = asyncio.get_running_loop()
        while True:
            reading = self._reading = loop.create_future()
            loop.add_reader(self.sock.fileno(), self._on_data)
            self._watching_reads = True
            wait = await reading
            if wait is None:
                return
            await self._waited(wait)

    def _on_data(self) -> None:
        """The socket is readable: receive once (into the large frame being received, if there is one) and take
        what came. The peer's close, a failure, or a wait that `_take` needs resolve the reader task's `_reading`
        (reads unwatched meanwhile)."""
        reading = self._reading
        try:
            large = self._large
            if large is not None:
                wait = self._large_received(self.sock.recv_into(large.view[large.got:]))
                if wait is None:
                    return
            else:
                data = self.sock.recv(self._wanted)
                if not data:
                    wait = None
                else:
                    wait = self._take(data)
                    if wait is None:
                        return
        except BlockingIOError:
            return
        except Exception as exc:  # `_take` closed the DeferredWrites window before raising
            self._stop_watching_reads()
            if not reading.done():
                reading.set_exception(exc)
            return
        self._stop_watching_reads()
        if not reading.done():
            reading.set_result(wait)

    async def _waited(self, wait: Awaitable) -> None:
        """Wait as `_take` asked, then take what it kept (a frame, bytes), as long as that asks for more waits."""
        while wait is not None:
            await wait
            wait = self._take(b"")

    def _take(self, data) -> Awaitable | None:
        """Cut frames out of `data` (after the bytes kept from before) and hand each to its handler in order, as far
        as that goes without waiting; None when all is taken or kept, else the wait it needs (a muted or closing
        connection, a full queue), for the reader task, with what is left kept for the `_take(b"")` after it. A
        frame that arrived whole is handed on as a view of the received bytes, without a copy; only a frame split
        across receives is assembled in `_partial`, and a frame larger than RECV_SIZE is received in place into a
        buffer of its own by the receives that follow (see `_start_large`). An idle connection holds no buffer at
        all, and a quiet one asks for SMALL_RECV_SIZE at a time. The DeferredWrites window the handlers' appends
        use (opened at a request that more bytes follow or that is large enough for the writer thread) is closed
        (`_send_queued`) before this returns, and reads are unwatched before a wait."""
        if data:
            self._wanted = RECV_SIZE if len(data) >= self._wanted else SMALL_RECV_SIZE
            self.last_active = time.monotonic()
        partial = self._partial
        if partial:  # frames cut from it are views, so it is replaced (never resized) once they exist
            partial += data
            data = partial
        view = memoryview(data)
        start, end = 0, len(data)
        deferred = self.server.deferred_writes
        window_start = len(self._pending)  # where the answers of the window `_send_queued` closes begin
        wait = None
        try:
            while True:
                frame = self._ready_frame
                if frame is None:
                    if end - start < 4:
                        break
                    (size,) = _SIZE.unpack_from(data, start)
                    if size < 0 or size > self.server.max_request_bytes:
                        raise CloseConnection(f"request size {size} is outside 0..{self.server.max_request_bytes} "
                                              f"(socket.request.max.bytes)")
                    if self.authenticating is not None and size > self.server.max_unauthenticated_bytes:
                        raise CloseConnection(f"request size {size} before authentication is larger than "
                                              f"{self.server.max_unauthenticated_bytes} (sasl.server.max.receive.size)")
                    if end - start - 4 >= size:
                        frame = self._ready_frame = view[start + 4:start + 4 + size]
                        start += 4 + size
                    else:
                        if self.authenticating is not None and not self._held:
                            self._hold(size)
                        if 4 + size > RECV_SIZE:
                            self._start_large(view[start + 4:end], size)
                            start = end
                        break
                if self.muted_until and self.muted_until > time.monotonic():  # a throttled client's channel is muted
                    wait = self._muted()
                    break
                if self.server.closing:  # no new work once the server closes: wait there until it ends this task
                    wait = asyncio.get_running_loop().create_future()
                    break
                self._ready_frame = None
                if self._held:
                    self._release_held()
                if deferred is not None and deferred.thread is None and (
                        start < end or len(frame) >= WRITER_THREAD_MIN_BYTES):  # more requests follow, or a large one
                    deferred.open()  # closed by `_send_queued` below, before any wait and any answer
                self._dispatch(frame)
                if len(self._pending) >= MAX_IN_FLIGHT:
                    wait = self._slot_freed_wait()
                    break
        except BaseException:
            self._write_deferred_or_log()
            raise
        self._send_queued(window_start)
        if wait is not None:
            self._stop_watching_reads()
        if start == end:  # all taken (what a client waiting for its answer sends): nothing to copy or keep
            self._partial = _NOTHING
        elif start == 0 and data is partial:  # nothing cut yet: keep collecting in the same bytearray
            view.release()
        else:
            self._partial = bytearray(view[start:end])
        return wait

    def _hold(self, size: int) -> None:
        """An unauthenticated connection is receiving a frame of `size` bytes: count it against what all of them may
        hold (UNAUTHENTICATED_MEMORY_BYTES), or close this one if that is full."""
        server = self.server
        if server.unauthenticated_held + size > UNAUTHENTICATED_MEMORY_BYTES:
            raise CloseConnection(f"unauthenticated connections already hold {server.unauthenticated_held} bytes of "
                                  f"requests; a request of {size} bytes more is refused")
        server.unauthenticated_held += size
        self._held = size

    def _release_held(self) -> None:
        self.server.unauthenticated_held -= self._held
        self._held = 0

    async def _muted(self) -> None:
        while (left := self.muted_until - time.monotonic()) > 0:  # uvloop's timers round to whole ms:
            await asyncio.sleep(left)                                # less than 0.5 ms sleeps about 0

    async def _slot_freed_wait(self) -> None:
        while len(self._pending) >= MAX_IN_FLIGHT:
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def _start_large(self, received: memoryview, size: int) -> None:
        """A frame larger than one receive: its first bytes go into a buffer of the frame's size whose bytes are not
        zeroed first (broker/_frame_buffer.c), and the receives that follow go in place after them, each handed to
        `_large_received` (by the read callback; by the reader task on TLS). Memory follows what the client sent,
        not what it claimed: a buffer's pages become resident only as receives write them, so a header announcing
        100 MB and then silence costs about what arrived. Against receiving piece by piece and joining the pieces,
        this saves a copy of every byte of the frame (8% of the broker's CPU under 1 MB produce batches); against a
        task receiving the rest, the read callback's registration and the loop's turns a task's wake-ups cost."""
        try:
            frame = frame_buffer(size)
        except MemoryError:
            raise CloseConnection(f"no memory for a request of {size} bytes") from None
        large = self._large = _LargeFrame(frame)
        large.got = len(received)
        large.view[:large.got] = received  # one copy (a bytearray's slice assignment copies a memoryview twice)

    def _large_received(self, count: int) -> Awaitable | None:
        """`count` more bytes of the large frame came, in place (0: the peer closed, ConnectionError); once it is
        whole it is taken like any frame (what `_take` returns)."""
        if not count:
            raise ConnectionError("connection closed inside a request")
        large = self._large
        large.got += count
        if large.got < len(large.view):
            return None
        large.view.release()
        self._large = None
        self.last_active = time.monotonic()
        self._ready_frame = large.frame
        self._wanted = 4  # the next frame's size alone: a large one is then received in place from its start
        return self._take(b"")

    def _dispatch(self, frame: bytes) -> None:
        """Decode one frame and start its handler; the answer (or its future) joins the ordered queue."""
        started = time.perf_counter()
        if self.authenticating is not None and self.authenticating.raw_tokens:  # SaslHandshake v0's bare tokens
            self._queue(None, self._raw_sasl_token(bytes(frame)), started)
            return
        try:
            header, request = decode_request(frame)
        except UnsupportedVersion as exc:
            answer = self.server.unsupported_version_answer(exc.header)
            if answer is None:
                raise CloseConnection(f"{exc}") from None
            self._queue(exc.header, answer, started)
            return
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request: {exc}") from None
        expires = self.session_expires_at
        if expires is not None and header.api_key not in REAUTHENTICATION_KEYS and time.monotonic() > expires:
            raise CloseConnection("its SASL session expired without re-authentication (connections.max.reauth.ms)")
        if self.authenticating is not None and header.api_key not in self.authenticating.allowed_api_keys:
            raise CloseConnection(f"api key {header.api_key} during SASL authentication (ILLEGAL_SASL_STATE)")
        handler = self.server.handlers.get(header.api_key)
        if handler is None:
            raise CloseConnection(f"no handler for api key {header.api_key}")
        try:
            answer = handler(self, header, request)
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("handler for api key %d v%d failed", header.api_key, header.api_version)
            raise CloseConnection(f"handler failed: {exc!r}") from None
        if type(answer) is CoroutineType:  # an async handler (asyncio.iscoroutine costs an ABC check per answer)
            answer = asyncio.ensure_future(answer)
        self._queue(header, answer, started)

    def _raw_sasl_token(self, token: bytes) -> bytes:
        """A bare token after SaslHandshake v0: Kafka answers with the bare challenge and, on failure, only closes."""
        try:
            answer = self.authenticating.step(token)
        except SaslAuthenticationFailed as exc:
            raise CloseConnection(f"SASL authentication failed: {exc}") from None
        self.note_authentication()
        return answer

    def note_authentication(self) -> None:
        """Once the SASL exchange has succeeded: its user becomes the principal and requests are open."""
        session = self.authenticating
        principal = session.principal
        if principal is not None:
            log.info("%s %s as %s with %s", self.peer,
                     "authenticated" if session.authenticated_as is None else "re-authenticated",
                     principal, session.mechanism)
            self.principal = principal
            self.authenticating = None
            if session.lifetime_ms > 0:
                self.session_expires_at = time.monotonic() + session.lifetime_ms / 1000

    def _queue(self, header: RequestHeader | None, answer: Any, started: float) -> None:
        """An answer joins the ordered queue. One still being worked on wakes the writer task, which waits for it;
        a ready one waits for the reader to send it with the rest of its receive's answers (`_send_queued`)."""
        self._pending.append((header, answer, started))
        if isinstance(answer, asyncio.Future):
            self._answer_ready.set()

    def _send_queued(self, window_start: int) -> None:
        """The answers the reader queued, sent now if the writer task is idle (it holds none, so none can go out
        ahead of them); otherwise the writer sends them after what it holds. First the bytes the handlers' appends
        deferred are written, or handed to the writer thread with the window's answers (from `window_start` in the
        queue) behind its writes: nothing is acknowledged before it is in the file."""
        deferred = self.server.deferred_writes
        if deferred is not None and deferred.thread is not None:
            writes = self._write_deferred()
            if writes:
                self._answers_wait_for(writes, window_start)
        if self._writer_idle and self._pending and self._unsent is None:
            self._write_ready()

    def _write_deferred(self) -> tuple[PendingWrite, ...]:
        """Close the server's DeferredWrites window, writing what it holds (or handing it to the writer thread: the
        futures of those writes). If a write fails, the answers queued meanwhile may acknowledge records that are not
        in the file: the connection closes without them (its client sends them again), and the logs keep the bytes
        for their next operation to try again."""
        try:
            return self.server.deferred_writes.write()
        except OSError as exc:
            raise _unwritten(exc) from None

    def _answers_wait_for(self, writes: tuple[PendingWrite, ...], window_start: int) -> None:
        """The window's answers, queued from `window_start` on, go out once the writer thread's `writes` are done:
        a barrier for each goes in front of them, which the writer task waits for like a handler's answer that has
        nothing to send (or, if the write failed, a CloseConnection). A barrier is a future of its own, not one
        chained to the write: cancelling it when the connection ends must not cancel the write."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        for write in writes:
            barrier = loop.create_future()
            call_when_written(write, loop, functools.partial(_settle, barrier))
            self._pending.insert(window_start, (None, barrier, started))
        self._answer_ready.set()

    def _write_deferred_or_log(self) -> None:
        """`_write_deferred` where the connection ends anyway: a failure is logged."""
        if self.server.deferred_writes is not None:
            try:
                self._write_deferred()
            except CloseConnection as exc:
                log.error("connection from %s: %s", self.peer, exc)

    def _write_ready(self) -> None:
        """Send the ready answers at the head of the queue without waiting (`_send_now`: one sendmsg, and sendfile
        for large file regions): what the socket does not take is left to the writer task."""
        chunks, written, throttle_ms = self._take_ready()
        if not chunks:
            return
        rest = self._send_now(chunks)
        if rest:
            self._unsent = (rest, written, throttle_ms)
            self._answer_ready.set()
        else:
            self._answered(written, throttle_ms)

    def _take_ready(self) -> tuple[list, list, int]:
        """Take the answers at the head of the queue up to the first still being worked on, encoded in order:
        (chunks, [(header, started)] of each answer in them, the longest throttle among them). CloseConnection if
        one cannot be sent (its handler failed, or it cannot be encoded)."""
        pending = self._pending
        queued = len(pending)
        chunks: list = []
        written: list = []
        throttle_ms = 0
        while pending:
            header, answer, started = pending[0]
            if isinstance(answer, asyncio.Future):
                if not answer.done():
                    break
                answer = _handler_answer(answer, header)
            pending.popleft()
            if answer is None:
                self._observe(header, started)
                continue
            try:
                chunks += (encode_response(header, answer) if header is not None
                           else [_SIZE.pack(len(answer)), answer])
            except Exception as exc:
                log.exception("cannot encode the answer to api key %d v%d", header.api_key, header.api_version)
                raise CloseConnection(f"cannot encode the answer to api key {header.api_key} v{header.api_version}: "
                                      f"{exc!r}") from None
            written.append((header, started))
            answer_throttle_ms = getattr(answer, "throttle_time_ms", 0)
            if answer_throttle_ms > throttle_ms:
                throttle_ms = answer_throttle_ms
        if queued >= MAX_IN_FLIGHT > len(pending):  # the reader may wait for a free slot only at a full queue
            self._slot_freed.set()
        return chunks, written, throttle_ms

    def _answered(self, written: list, throttle_ms: int) -> None:
        """After answers went out: activity, the throttle's mute, metrics, and the close a failed authentication
        asked for."""
        self.last_active = time.monotonic()
        if throttle_ms > 0:  # KIP-219: a throttled client's channel is muted once its answer has gone out
            self.mute(throttle_ms)
        if self.server.observe_request is not None:
            for header, started in written:
                self._observe(header, started)
        if self.close_after_answer:
            log.info("closing connection from %s after its failed authentication", self.peer)
            self.close_soon()

    async def _write_answers(self) -> None:
        """The writer task: sends, in request order, what the reader could not send at once. An answer still being
        worked on (a long poll, an acks=all wait) is waited for, and then it goes out in one write with every
        answer ready behind it; so does what a full socket did not take."""
        pending = self._pending
        while True:
            if self._unsent is None and not pending:
                self._writer_idle = True
                self._answer_ready.clear()
                await self._answer_ready.wait()
                self._writer_idle = False
                continue
            if self._unsent is not None:
                (chunks, written, throttle_ms), self._unsent = self._unsent, None
            else:
                head = pending[0][1]
                if isinstance(head, asyncio.Future) and not head.done():
                    await settled(head)
                    if self.closed:  # the connection ended meanwhile and dropped its queue: nowhere to answer
                        return
                    continue
                try:
                    chunks, written, throttle_ms = self._take_ready()
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self.close_soon()
                    return
                if not chunks:
                    continue
            try:
                await self.send(chunks)
            except (ConnectionError, OSError) as exc:
                log.debug("connection from %s lost while answering: %s", self.peer, exc)
                self.close_soon()
                return
            self._answered(written, throttle_ms)
            if self.close_after_answer:
                return

    @property
    def answering(self) -> bool:
        """Whether a request read is not answered yet (queued, being handled or its answer being sent)."""
        return bool(self._pending) or self._unsent is not None or not self._writer_idle

    def mute(self, throttle_ms: int) -> None:
        """Read no further request from this connection for throttle_ms (a client quota's throttle)."""
        self.muted_until = max(self.muted_until, time.monotonic() + throttle_ms / 1000)

    def _observe(self, header: RequestHeader, started: float) -> None:
        """Metrics, one call per request: from its arrival until its answer was written (Kafka's TotalTimeMs)."""
        observe = self.server.observe_request
        if observe is not None and header is not None:
            observe(header.api_key, time.perf_counter() - started)

    async def send(self, chunks: list) -> None:
        """Write an answer's chunks (bytes and FileRegions), in order, waiting when the socket is full."""
        await self._write_all(chunks)

    async def _write_all(self, chunks: list) -> None:
        """Write chunks in order: `_send_now` until the socket has taken everything, waiting whenever it is full."""
        chunks = self._send_now(chunks)
        while chunks:
            await self._writable()
            chunks = self._send_now(chunks)

    def _send_now(self, chunks: list) -> list:
        """Send `chunks` in order, without waiting, as far as the socket takes them: bytes with sendmsg (at most
        SEND_BUFFERS_MAX at a time: a Fetch of 1,000 partitions answers over 2,000 chunks), a file region of at most
        INLINE_REGION_BYTES read into the same sendmsg as the bytes around it (for a few KB a copy costs less than
        two more system calls on the socket), a larger one with sendfile. What is left to send (empty once all went
        out)."""
        while chunks:
            head = chunks[0]
            if isinstance(head, FileRegion) and head.length > INLINE_REGION_BYTES:
                left = self._sendfile_now(head)
                if isinstance(left, FileRegion):
                    return [left, *chunks[1:]]
                chunks = chunks[1:] if left is None else [left, *chunks[1:]]
                continue
            buffers: list = []
            for chunk in chunks:
                if isinstance(chunk, FileRegion):
                    if chunk.length > INLINE_REGION_BYTES:
                        break
                    chunk = _region_bytes(chunk)
                buffers.append(chunk)
                if len(buffers) == SEND_BUFFERS_MAX:
                    break
            try:  # one buffer (a small request's answer) with send: sendmsg's iovec costs a third more
                sent = self.sock.send(buffers[0]) if len(buffers) == 1 else self.sock.sendmsg(buffers)
            except BlockingIOError:
                sent = 0
            unsent = _after_sent(buffers, sent)
            chunks = chunks[len(buffers):]
            if unsent:
                return unsent + chunks
        return []

    def _sendfile_now(self, region: FileRegion) -> FileRegion | bytes | None:
        """`region` with sendfile, without waiting: None once the socket took all of it, else what is left to send:
        the rest of the region when the socket is full, or its bytes where this file and socket allow no
        sendfile."""
        fd = self.sock.fileno()
        offset, remaining = region.position, region.length
        while remaining:
            try:
                sent = os.sendfile(fd, region.fd, offset, remaining)
            except BlockingIOError:
                return FileRegion(region.fd, offset, remaining)
            except OSError as exc:
                if exc.errno in (errno.EINVAL, errno.ENOSYS):
                    return _region_bytes(FileRegion(region.fd, offset, remaining))
                raise
            if not sent:  # the file ends here (a full socket is BlockingIOError)
                raise ConnectionError("segment file shorter than the region handed out")
            offset += sent
            remaining -= sent
        return None

    async def _writable(self) -> None:
        loop = asyncio.get_running_loop()
        fd = self.sock.fileno()
        if fd < 0:
            raise ConnectionError("socket closed")
        waiter = loop.create_future()
        loop.add_writer(fd, resolve, waiter)
        try:
            await waiter
        finally:
            loop.remove_writer(fd)


class TlsConnection(Connection):
    """A connection on a TLS listener: the TLS state machine (ssl.SSLObject) sits between two memory BIOs, fed by
    the plain non-blocking socket. Encrypted bytes leave only through `_flush`, under one lock, so the reader (which
    may owe the peer TLS records, e.g. TLS 1.3 key updates) and the writer never interleave records."""

    __slots__ = ("_tls", "_incoming", "_outgoing", "_flushing", "_read_waiter")

    def __init__(self, server: "NetworkServer", sock: socket.socket, address: tuple, listener: Listener,
                 authenticating: Any, context: ssl.SSLContext):
        super().__init__(server, sock, address, listener, authenticating)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._flushing = asyncio.Lock()
        self._read_waiter: asyncio.Future | None = None  # the reader's wait for the socket to become readable

    async def _start(self) -> None:
        """The TLS handshake, then the principal from the client's certificate if it presented one."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush_owed()
                if not await self._feed(loop):
                    raise ConnectionError("connection closed during the TLS handshake")
            except ssl.SSLError:
                await self._flush_owed()  # the alert that tells the client why (e.g. certificate required)
                raise
        await self._flush_owed()
        certificate = self._tls.getpeercert()
        if certificate:
            from odradek.security.tls import principal_of_certificate
            self.principal = principal_of_certificate(certificate)

    def _write_ready(self) -> None:
        """Answers are encrypted and sent by the writer task alone, so that TLS records leave in the order they
        were made (see `_flush`)."""
        self._answer_ready.set()

    async def _read_requests(self) -> None:
        """The same frames and handlers, but the bytes come decrypted from `_receive`, which this task awaits: a
        TLS record's bytes are not read by a callback."""
        loop = asyncio.get_running_loop()
        while True:
            large = self._large
            if large is not None:
                wait = self._large_received(await self._receive_into(loop, large.view[large.got:]))
            else:
                data = await self._receive(loop, self._wanted)
                if not data:
                    return
                wait = self._take(data)
            await self._waited(wait)

    async def _received(self, loop) -> bytes:
        """Encrypted bytes from the non-blocking socket, waiting through `_readable` while none are there."""
        while True:
            try:
                return self.sock.recv(RECV_SIZE)
            except BlockingIOError:
                await self._readable(loop)

    async def _readable(self, loop) -> None:
        """Until the socket has something to read. The registration with the event loop stays for later waits (not
        the six epoll_ctl of a sock_recv's each time); since it is level-triggered, it is dropped before anything
        else is waited on (`_stop_watching_reads`), or a peer's unread bytes would wake the loop on every turn."""
        if not self._watching_reads:
            loop.add_reader(self.sock.fileno(), self._on_readable)
            self._watching_reads = True
        waiter = self._read_waiter = loop.create_future()
        await waiter

    def _on_readable(self) -> None:
        waiter = self._read_waiter
        if waiter is not None:
            self._read_waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def _feed(self, loop) -> bool:
        """Received bytes into the TLS state machine; False when the peer closed."""
        data = await self._received(loop)
        if not data:
            return False
        self._incoming.write(data)
        return True

    async def _receive(self, loop, size: int) -> bytes:
        """Up to `size` decrypted bytes: all that the TLS records received so far hold."""
        pieces: list = []
        await self._decrypt(loop, size, pieces, None)
        return b"".join(pieces)  # one piece is returned as it is

    async def _receive_into(self, loop, view: memoryview) -> int:
        """A large frame's next decrypted records, decrypted straight into `view`."""
        return await self._decrypt(loop, len(view), None, view)

    async def _decrypt(self, loop, size: int, pieces: list | None, view: memoryview | None) -> int:
        """Read up to `size` decrypted bytes, into `view` if there is one (a large frame's buffer: no bytes object
        made and copied again per TLS record), else into a list of pieces, waiting for the socket only while there
        are none. One SSLObject.read yields at most one TLS record (16 KiB), so reads go on while received bytes
        remain. Returns how many bytes came (0: the peer closed)."""
        length = 0
        while length < size:
            try:
                if view is None:
                    piece = self._tls.read(min(size - length, TLS_RECORD_SIZE))
                    pieces.append(piece)
                    count = len(piece)
                else:
                    count = self._tls.read(size - length, view[length:])
            except ssl.SSLWantReadError:
                if length:
                    break
                if self._outgoing.pending:
                    await self._flush_owed()
                if not await self._feed(loop):
                    return 0
                continue
            except ssl.SSLZeroReturnError:
                break
            if not count:
                break
            length += count
            if not self._incoming.pending and not self._tls.pending():
                break
        if self._outgoing.pending:
            await self._flush_owed()
        return length

    async def send(self, chunks: list) -> None:
        """Encrypt the answer as one piece, file regions read into memory first (no sendfile through TLS)."""
        self._tls.write(b"".join(_region_bytes(chunk) if isinstance(chunk, FileRegion) else chunk for chunk in chunks))
        await self._flush()

    async def _flush_owed(self) -> None:
        """The reader sends the TLS records it owes the peer (the handshake's, a key update's), its read
        registration dropped meanwhile (see `_readable`)."""
        self._stop_watching_reads()
        await self._flush()

    async def _flush(self) -> None:
        async with self._flushing:
            while self._outgoing.pending:
                await self._write_all([self._outgoing.read()])


class _LargeFrame:
    """A frame larger than one receive, received in place: its buffer, a view of it, and how much of it came."""

    __slots__ = ("frame", "view", "got")

    def __init__(self, frame: bytearray):
        self.frame = frame
        self.view = memoryview(frame)
        self.got = 0


def _after_sent(views: list, sent: int) -> list:
    """What is left of `views` (bytes-like, one byte per item) once the first `sent` bytes of them went out, the
    first cut as a memoryview (no copy). An empty one is taken as sent once those before it are, or it would be
    waited on forever."""
    if len(views) == 1 and sent == len(views[0]):  # one answer's frame, taken whole: the usual send
        return []
    if sent == sum(map(len, views)):  # all taken: no walk in Python over a large answer's thousands of chunks
        return []
    index, count = 0, len(views)
    while index < count and sent >= len(views[index]):
        sent -= len(views[index])
        index += 1
    rest = views[index:]
    if sent:
        rest[0] = memoryview(rest[0])[sent:]
    return rest


def _clear_frames(exc: BaseException | None) -> None:
    """Clear the locals of the finished frames that the exception which ended a connection went through, and those
    of the exceptions it was raised while handling. They hold what they worked on, a large frame's buffer among
    them, and the exception, kept by the reader's future, is in a cycle with its connection: only the cyclic
    collector would free them, after dozens of such connections (4 malformed 5 MB frames, 20 MB held)."""
    while exc is not None:
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__context__


def _handler_answer(future: asyncio.Future, header: RequestHeader):
    """The answer of a handler's finished future; CloseConnection if there is none to send."""
    if future.cancelled():
        raise CloseConnection(f"the answer to api key {header.api_key} was cancelled")
    error = future.exception()
    if error is None:
        return future.result()
    if isinstance(error, CloseConnection):
        raise error
    log.error("handler for api key %d v%d failed", header.api_key, header.api_version, exc_info=error)
    raise CloseConnection(f"handler for api key {header.api_key} failed: {error!r}")


def _region_bytes(region: FileRegion) -> bytes:
    data = region.read_bytes()
    if len(data) != region.length:
        raise ConnectionError("segment file shorter than the region handed out")
    return data


def _settle(barrier: asyncio.Future, error: OSError | None) -> None:
    if barrier.done():  # cancelled: its connection ended
        return
    if error is None:
        barrier.set_result(None)
    else:
        barrier.set_exception(_unwritten(error))


def _unwritten(error: OSError) -> CloseConnection:
    """Why a connection closes without the answers to appends whose bytes could not be written."""
    return CloseConnection(f"the records its requests appended could not be written: {error}")


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound before the broker touches its data so that a port in use fails a
    start with nothing on disk changed. OSError naming the address if it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
    except OSError as exc:
        listener.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    listener.setblocking(False)
    return listener


class NetworkServer:
    """Runs a Connection (a TlsConnection on TLS listeners) per socket accepted on any of its listening sockets
    (see `listen`), which it owns from then on. `accept_on` hands it one with its listener, TLS context and SASL
    session factory (None where unused); the connection quotas count all of them together."""

    def __init__(self, handlers: dict[int, Handler], *, max_request_bytes: int, idle_ms: int,
                 unsupported_version_answer: Callable[[RequestHeader], Any], quotas: ConnectionQuotas,
                 max_unauthenticated_bytes: int, deferred_writes: DeferredWrites | None = None):
        self.quotas = quotas
        self.deferred_writes = deferred_writes
        self._slot_freed = asyncio.Event()
        self.handlers = handlers
        self.max_request_bytes = max_request_bytes
        self.max_unauthenticated_bytes = max_unauthenticated_bytes  # sasl.server.max.receive.size
        self.unauthenticated_held = 0  # bytes the frames being received by unauthenticated connections hold
        self.idle_seconds = idle_ms / 1000 if idle_ms > 0 else None
        self.authentication_seconds = min(AUTHENTICATION_TIMEOUT_SECONDS, self.idle_seconds or math.inf)
        self.unsupported_version_answer = unsupported_version_answer
        self.observe_request: Callable[[int, float], None] | None = None  # (api key, seconds) per request
        self.connections: set[Connection] = set()
        self.closing = False  # once set, requests still arriving are not read (see close)
        self._listeners: list[tuple[socket.socket, Listener, ssl.SSLContext | None, Callable | None]] = []
        self._tasks: set[asyncio.Task] = set()

    def accept_on(self, server_socket: socket.socket, listener: Listener, tls_context: ssl.SSLContext | None = None,
                  new_sasl_session: Callable[[], Any] | None = None) -> None:
        self._listeners.append((server_socket, listener, tls_context, new_sasl_session))

    async def serve(self) -> None:
        if self.idle_seconds:
            self._spawn(self._close_idle())
        await asyncio.gather(*(self._accept(*entry) for entry in self._listeners))

    async def _accept(self, server_socket: socket.socket, listener: Listener, tls_context: ssl.SSLContext | None,
                      new_sasl_session: Callable[[], Any] | None) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        while True:
            while not quotas.slot_available():  # max.connections: wait, leaving new ones in the backlog
                self._slot_freed.clear()
                await self._slot_freed.wait()
            delay = quotas.creation_delay()
            if delay:
                await asyncio.sleep(delay)
            try:
                sock, address = await loop.sock_accept(server_socket)
            except OSError as exc:
                if server_socket.fileno() < 0:
                    return
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.05)
                continue
            limit = quotas.admit(address[0])
            if limit is not None:
                log.info("Rejected connection from %s, address already has the configured maximum of %d "
                         "connections (max.connections.per.ip)", address[0], limit)
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = new_sasl_session() if new_sasl_session is not None else None
            if tls_context is None:
                connection = Connection(self, sock, address, listener, session)
            else:
                connection = TlsConnection(self, sock, address, listener, session, tls_context)
            self.connections.add(connection)
            connection.task = self._spawn(connection.run())

    def forget(self, connection: Connection) -> None:
        """A connection closed: its quota slot is free."""
        self.connections.discard(connection)
        self.quotas.release(connection.ip)
        self._slot_freed.set()

    def _spawn(self, coro: Awaitable) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _close_idle(self) -> None:
        """connections.max.idle.ms: a connection with nothing in flight and no traffic for that long is closed."""
        interval = min(self.idle_seconds / 4, 10.0)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - self.idle_seconds
            for connection in list(self.connections):
                if connection.last_active < deadline and not connection._pending:
                    log.info("closing idle connection from %s (connections.max.idle.ms)", connection.peer)
                    connection.close_soon()

    async def close(self, drain_seconds: float = 0.0) -> None:
        """Stop accepting and reading requests, answer those already read (for up to `drain_seconds`: a stopping
        broker's clients get their answer, NOT_LEADER_OR_FOLLOWER for partitions led elsewhere now, rather than a
        dropped connection), then close the connections. As Kafka's SocketServer at shutdown, a request that
        arrives meanwhile is not read: a stopping broker takes no new work, and a client that keeps sending cannot
        hold it up; the client sends it again elsewhere once the connection closes."""
        self.closing = True
        for server_socket, *_ in self._listeners:
            server_socket.close()
        deadline = time.monotonic() + drain_seconds
        while time.monotonic() < deadline and any(connection.answering for connection in self.connections):
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
