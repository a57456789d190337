"""The fault proxy against an echo server: it forwards, a blackhole holds bytes and new connections until healed
(then they arrive), a drop closes every connection and refuses new ones until healed."""

from __future__ import annotations

import socket
import threading

import pytest

from .proxy import Proxy


@pytest.fixture
def echo_proxy():
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(connection,), daemon=True).start()

    def echo(connection):
        with connection:
            while data := connection.recv(1024):
                connection.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    proxy = Proxy(lambda: server.getsockname())
    yield proxy
    proxy.close()
    server.close()


def connect(proxy: Proxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=2)


def test_it_forwards_both_ways(echo_proxy):
    with connect(echo_proxy) as sock:
        sock.sendall(b"ping")
        assert sock.recv(4) == b"ping"


def test_a_blackhole_holds_traffic_and_new_connections_until_healed(echo_proxy):
    with connect(echo_proxy) as old:
        old.sendall(b"one")
        assert old.recv(3) == b"one"
        echo_proxy.cut("blackhole")
        old.sendall(b"two")
        new = connect(echo_proxy)  # the listener accepts; nothing goes onward
        new.sendall(b"three")
        for sock in (old, new):
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                sock.recv(5)
        echo_proxy.heal()
        old.settimeout(5)
        new.settimeout(5)
        assert old.recv(3) == b"two"
        assert new.recv(5) == b"three"
        new.close()


def test_a_drop_closes_connections_and_refuses_new_ones_until_healed(echo_proxy):
    with connect(echo_proxy) as old:
        old.sendall(b"one")
        assert old.recv(3) == b"one"
        echo_proxy.cut("drop")
        assert old.recv(3) == b""
    with connect(echo_proxy) as refused:
        refused.sendall(b"x")
        assert refused.recv(1) == b""
    echo_proxy.heal()
    with connect(echo_proxy) as new:
        new.sendall(b"back")
        assert new.recv(4) == b"back"
