"""The network shell: accepts connections, cuts frames, runs handlers, writes answers in order.

Built on raw non-blocking sockets driven by the event loop (uvloop where installed) rather than asyncio streams,
because a fetch answer's records must go from the segment file to the socket with `os.sendfile`, and that needs the
socket itself, with nothing buffered in front of it. Each connection has a reader that cuts frames and starts their
handlers in arrival order, and a writer that sends the answers in that same order; many requests may be in flight on
one connection (up to MAX_IN_FLIGHT), so pipelining producers never wait for a round trip.

A frame that is malformed, oversized (socket.request.max.bytes) or names an API or version we do not serve closes
that one connection with a logged reason (ApiVersions with an unknown version gets its KIP-511 answer instead);
nothing a peer sends can stop the server or touch another connection.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.protocol import ProtocolError, RequestHeader, UnsupportedVersion, decode_request, encode_response
from odradek.records.region import FileRegion

log = logging.getLogger("odradek.network")

MAX_IN_FLIGHT = 128
RECV_SIZE = 256 * 1024
LARGE_FRAME_FIRST_BYTES = 1024 * 1024  # a large frame's buffer starts here and doubles as its bytes arrive
_SIZE = struct.Struct(">i")

# A handler answers one decoded request: a response body, None for no answer (Produce with acks=0), or an
# awaitable of either (Fetch long polls).
Handler = Callable[["Connection", RequestHeader, Any], Any]


class CloseConnection(Exception):
    """Raised by a handler that wants this connection closed (with the reason logged)."""


class Connection:
    __slots__ = ("server", "sock", "peer", "task", "last_active", "closed", "_pending", "_slot_freed",
                 "_answer_ready", "fetch_sessions", "muted_until")

    def __init__(self, server: "NetworkServer", sock: socket.socket, peer: str):
        self.server = server
        self.sock = sock
        self.peer = peer
        self.last_active = time.monotonic()
        self.task: asyncio.Task | None = None
        self.closed = False
        self._pending: deque = deque()
        self._slot_freed = asyncio.Event()
        self._answer_ready = asyncio.Event()
        self.fetch_sessions: dict = {}
        self.muted_until = 0.0  # time.monotonic() before which no request is read (a client quota's throttle)

    async def run(self) -> None:
        writer = asyncio.ensure_future(self._write_answers())
        try:
            await self._read_requests()
        except (ConnectionError, OSError) as exc:
            log.debug("connection from %s ended: %s", self.peer, exc)
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        finally:
            writer.cancel()
            self._abort()

    def _abort(self) -> None:
        """Drop whatever is still in flight and close the socket."""
        for item in self._pending:
            if isinstance(item[1], asyncio.Future):
                item[1].cancel()
        self._pending.clear()
        if not self.closed:
            self.closed = True
            self.server.connections.discard(self)
            try:
                self.sock.close()
            except OSError:
                pass

    async def _read_requests(self) -> None:
        """Cut frames out of what each receive returns. A frame that arrived whole is handed on as a view of the
        received bytes, without a copy; only a frame split across receives is assembled in `partial`, and a frame
        larger than RECV_SIZE gets its own bytearray that the socket fills directly (growing as the bytes come,
        see `_receive_large`). An idle connection holds no buffer at all."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        max_request = self.server.max_request_bytes
        partial = bytearray()
        while True:
            data = await loop.sock_recv(sock, RECV_SIZE)
            if not data:
                return
            self.last_active = time.monotonic()
            if partial:  # frames cut from it are views, so it is replaced (never resized) once they exist
                partial += data
                data = partial
            view = memoryview(data)
            start, end = 0, len(data)
            while end - start >= 4:
                (size,) = _SIZE.unpack_from(data, start)
                if size < 0 or size > max_request:
                    raise CloseConnection(
                        f"request size {size} is outside 0..{max_request} (socket.request.max.bytes)")
                if end - start - 4 >= size:
                    frame = view[start + 4:start + 4 + size]
                    start += 4 + size
                elif 4 + size > RECV_SIZE:
                    frame = await self._receive_large(loop, view[start + 4:end], size)
                    start = end
                else:
                    break
                if self.muted_until > time.monotonic():  # a throttled client's channel is muted
                    await asyncio.sleep(self.muted_until - time.monotonic())
                self._dispatch(frame)
                while len(self._pending) >= MAX_IN_FLIGHT:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
            if start == 0 and data is partial:  # nothing cut yet: keep collecting in the same bytearray
                view.release()
            else:
                partial = bytearray(view[start:end])

    async def _receive_large(self, loop, received: memoryview, size: int) -> bytearray:
        """A frame larger than one receive: its first bytes, then the rest straight from the socket into it. The
        buffer doubles as bytes arrive instead of taking the announced size at once, so memory follows what a
        client sent, not what it claimed: a header announcing 100 MB and then silence costs 1 MiB, not 100 MB."""
        got = len(received)
        frame = bytearray(min(size, max(got, LARGE_FRAME_FIRST_BYTES)))
        frame[:got] = received
        while got < size:
            if got == len(frame):
                frame += bytes(min(len(frame), size - len(frame)))
            target = memoryview(frame)[got:]
            try:
                count = await loop.sock_recv_into(self.sock, target)
            finally:
                target.release()
            if not count:
                raise ConnectionError("connection closed inside a request")
            got += count
        self.last_active = time.monotonic()
        return frame

    def _dispatch(self, frame: bytes) -> None:
        """Decode one frame and start its handler; the answer (or its future) joins the ordered queue."""
        started = time.perf_counter()
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
        if asyncio.iscoroutine(answer):
            answer = asyncio.ensure_future(answer)
        self._queue(header, answer, started)

    def _queue(self, header: RequestHeader, answer: Any, started: float) -> None:
        self._pending.append((header, answer, started))
        self._answer_ready.set()

    async def _write_answers(self) -> None:
        pending = self._pending
        while True:
            while not pending:
                self._answer_ready.clear()
                await self._answer_ready.wait()
            header, answer, started = pending[0]
            if isinstance(answer, asyncio.Future):
                try:
                    answer = await answer
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self.task.cancel()
                    return
                except Exception:
                    log.exception("handler for api key %d failed; closing connection from %s",
                                  header.api_key, self.peer)
                    self.task.cancel()
                    return
            pending.popleft()
            self._slot_freed.set()
            if answer is None:
                self._observe(header, started)
                continue
            try:
                frame = encode_response(header, answer)
            except Exception:
                log.exception("cannot encode the answer to api key %d v%d; closing connection from %s",
                              header.api_key, header.api_version, self.peer)
                self.task.cancel()
                return
            try:
                await self.send(frame)
            except (ConnectionError, OSError) as exc:
                log.debug("connection from %s lost while answering: %s", self.peer, exc)
                self.task.cancel()
                return
            self.last_active = time.monotonic()
            throttle_ms = getattr(answer, "throttle_time_ms", 0)
            if throttle_ms > 0:  # KIP-219: a throttled client's channel is muted once its answer has gone out
                self.mute(throttle_ms)
            self._observe(header, started)

    def mute(self, throttle_ms: int) -> None:
        """Read no further request from this connection for throttle_ms (a client quota's throttle)."""
        self.muted_until = max(self.muted_until, time.monotonic() + throttle_ms / 1000)

    def _observe(self, header: RequestHeader, started: float) -> None:
        """Metrics, one call per request: from its arrival until its answer was written (Kafka's TotalTimeMs)."""
        observe = self.server.observe_request
        if observe is not None:
            observe(header.api_key, time.perf_counter() - started)

    async def send(self, chunks: list) -> None:
        """Write byte chunks with sendmsg and FileRegions with sendfile, in order, waiting when the socket is full."""
        buffers: list = []
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                if buffers:
                    await self._sendmsg(buffers)
                    buffers = []
                await self._sendfile(chunk)
            else:
                buffers.append(chunk)
        if buffers:
            await self._sendmsg(buffers)

    async def _sendmsg(self, buffers: list) -> None:
        sock = self.sock
        views = [memoryview(b) for b in buffers]
        while views:
            try:
                sent = sock.sendmsg(views)
            except BlockingIOError:
                sent = 0
            while sent and views:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0
            if views:
                await self._writable()

    async def _sendfile(self, region: FileRegion) -> None:
        fd = self.sock.fileno()
        offset, remaining = region.position, region.length
        while remaining:
            try:
                sent = os.sendfile(fd, region.fd, offset, remaining)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                if exc.errno in (errno.EINVAL, errno.ENOSYS):  # no sendfile for this pair: copy instead
                    await self._sendmsg([os.pread(region.fd, remaining, offset)])
                    return
                raise
            if sent == 0 and remaining:
                if offset >= os.fstat(region.fd).st_size:
                    raise ConnectionError("segment file shorter than the region handed out")
                await self._writable()
            offset += sent
            remaining -= sent

    async def _writable(self) -> None:
        loop = asyncio.get_running_loop()
        fd = self.sock.fileno()
        if fd < 0:
            raise ConnectionError("socket closed")
        waiter = loop.create_future()
        loop.add_writer(fd, _resolve, waiter)
        try:
            await waiter
        finally:
            loop.remove_writer(fd)


def _resolve(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


class NetworkServer:
    """Listens on one address and runs a Connection per accepted socket."""

    def __init__(self, handlers: dict[int, Handler], *, max_request_bytes: int, idle_ms: int,
                 unsupported_version_answer: Callable[[RequestHeader], Any]):
        self.handlers = handlers
        self.max_request_bytes = max_request_bytes
        self.idle_seconds = idle_ms / 1000 if idle_ms > 0 else None
        self.unsupported_version_answer = unsupported_version_answer
        self.observe_request: Callable[[int, float], None] | None = None  # (api key, seconds) per request
        self.connections: set[Connection] = set()
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task] = set()

    def bind(self, host: str, port: int) -> tuple[str, int]:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
        listener.setblocking(False)
        self._listener = listener
        return listener.getsockname()[:2]

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        if self.idle_seconds:
            self._spawn(self._close_idle())
        while True:
            try:
                sock, address = await loop.sock_accept(self._listener)
            except OSError as exc:
                if self._listener is None or self._listener.fileno() < 0:
                    return
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.05)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection(self, sock, f"{address[0]}:{address[1]}")
            self.connections.add(connection)
            connection.task = self._spawn(connection.run())

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
                    connection.task.cancel()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
