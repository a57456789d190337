"""A TCP proxy on 127.0.0.1 whose forwarding the nemesis cuts and heals: the network faults of the chaos runs.

One `Proxy` fronts one address (a broker's listener, ZooKeeper). Brokers advertise their proxy's port, so clients
and the other brokers (WriteTxnMarkers, and replica fetches once replication lands) reach a broker only through it,
and each broker's zookeeper.connect is a proxy of its own to ZooKeeper. Cutting a broker's proxy isolates it from
everyone; cutting its ZooKeeper proxy isolates it from ZooKeeper alone (its session expires, the controller moves
its partitions).

Two kinds of cut, as a real network fails:
- `blackhole`: bytes stop moving in both directions and new connections hang (accepted, never connected onward);
  nothing is closed, so peers notice only by their own timeouts. At `heal` everything held moves on, as TCP
  retransmits after a partition ends.
- `drop`: every connection through the proxy is closed now and new ones are closed at once (a reset link).
A `connect_delay` makes every new connection take that long to open (a slow, distant link).

Threads, not asyncio: the proxy must keep forwarding while the test's own thread blocks on clients, and it
carries little traffic; two threads per connection, blocking sockets, no per-byte work.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

BUFFER = 65536


class Proxy:
    def __init__(self, upstream: Callable[[], tuple[str, int]], name: str = "proxy", connect_delay: float = 0.0):
        """`upstream` is asked at each new connection (a broker's port is known only once it started)."""
        self.upstream = upstream
        self.name = name
        self.connect_delay = connect_delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]  # known before the upstream starts, so it can be advertised
        self._flowing = threading.Event()
        self._flowing.set()
        self._dropping = False
        self._closed = False
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        threading.Thread(target=self._accept, name=f"{name}-accept", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self, mode: str = "blackhole") -> None:
        if mode not in ("blackhole", "drop"):
            raise ValueError(f"no such cut: {mode}")
        self._flowing.clear()
        if mode == "drop":
            self._dropping = True
            self._close_connections()

    def heal(self) -> None:
        self._dropping = False
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()  # release every held pump so its thread ends
        self._listener.close()
        self._close_connections()

    def _close_connections(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, set()
        for sock in connections:
            _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._dropping:
                _close(client)
                continue
            threading.Thread(target=self._connect, args=(client,), name=f"{self.name}-connect", daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._track(client)
        time.sleep(self.connect_delay)
        self._flowing.wait()  # a blackholed link: the connection hangs, as a SYN lost
        if self._dropping or self._closed:
            _close(client)
            return
        try:
            server = socket.create_connection(self.upstream(), timeout=10)
            server.settimeout(None)
        except OSError:
            _close(client)
            return
        self._track(server)
        for source, target in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(source, target), name=f"{self.name}-pump", daemon=True).start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.add(sock)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(BUFFER)
                if not data:
                    break
                self._flowing.wait()  # held while blackholed; TCP's own window stops the sender meanwhile
                if self._dropping or self._closed:
                    break
                target.sendall(data)
        except OSError:
            pass
        _close(source)
        _close(target)
        with self._lock:
            self._connections.discard(source)
            self._connections.discard(target)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
