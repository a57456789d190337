"""Connections that cost the broker more than they send (issue 12): memory follows the bytes received, not the
sizes announced, and Kafka's connection limits hold (max.connections, max.connections.per.ip and its overrides,
max.connection.creation.rate), while a well-behaved client keeps being served."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer

from odradek.embedded import BrokerProcess
from odradek.protocol import RequestHeader, api, encode_request

from .raw_client import read_frame

API_VERSIONS = api("ApiVersions")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def connect(port: int, source_ip: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source_ip, 0))


def answers(sock: socket.socket, timeout: float = 10.0) -> bool:
    """Whether an ApiVersions request on this connection is answered within `timeout`: False when the broker
    closed the connection, and when no answer came in time."""
    header = RequestHeader(api_key=API_VERSIONS.key, api_version=0, correlation_id=1, client_id="limits")
    sock.settimeout(timeout)
    try:
        sock.sendall(encode_request(header, API_VERSIONS.request()))
        read_frame(sock)
        return True
    except (ConnectionError, socket.timeout):
        return False


def produce_and_consume(bootstrap: str, topic: str, count: int = 20) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for index in range(count):
        producer.produce(topic, value=b"%d" % index)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 20
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_stalled_frames_announcing_100_mb_cost_what_they_sent(broker):
    """1,000 connections send a frame header announcing 100 MB and then nothing. The broker's RSS grew by about
    1 GB for them (a buffer per announced frame); now it grows by the pages that the bytes which arrived were
    written to, about 15 MB."""
    before = rss_mb(broker.process.pid)
    stalled = []
    try:
        for _ in range(1000):
            sock = connect(broker.port)
            sock.sendall(struct.pack(">i", 100_000_000) + b"\x00" * 100)
            stalled.append(sock)
        assert produce_and_consume(broker.bootstrap_servers, "beside-stalled") == [b"%d" % i for i in range(20)]
        growth = rss_mb(broker.process.pid) - before
        print(f"RSS {before:.0f} MB -> +{growth:.0f} MB with 1000 stalled 100 MB frames")
        assert growth < 100
    finally:
        for sock in stalled:
            sock.close()


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("limited") / "data", settings={
        "max.connections": 12, "max.connections.per.ip": 3,
        "max.connections.per.ip.overrides": "127.0.0.3:5", "group.initial.rebalance.delay.ms": 0})
    process.start()
    yield process
    process.stop()


def fill_to_the_limit(port: int, ip: str, limit: int) -> list[socket.socket]:
    """Open `limit` connections from `ip`, all served; one more is closed at once. Returns the open ones."""
    held = [connect(port, ip) for _ in range(limit)]
    assert all(answers(sock) for sock in held)
    extra = connect(port, ip)
    assert not answers(extra)
    extra.close()
    return held


@pytest.mark.parametrize("ip, limit", [("127.0.0.2", 3), ("127.0.0.3", 5)], ids=["default", "override"])
def test_over_the_per_ip_limit_a_connection_is_closed_at_once(limited, ip, limit):
    held = fill_to_the_limit(limited.port, ip, limit)
    try:
        # a client from another address is served meanwhile
        assert produce_and_consume(limited.bootstrap_servers, f"beside-{ip}") == [b"%d" % i for i in range(20)]
        held.pop().close()
        time.sleep(0.2)
        replacement = connect(limited.port, ip)  # the slot freed by the closed one is usable again
        held.append(replacement)
        assert answers(replacement)
    finally:
        for sock in held:
            sock.close()


def test_at_max_connections_a_new_one_waits_for_a_slot(limited):
    time.sleep(0.3)  # the previous tests' connections are gone
    held = [connect(limited.port, f"127.0.1.{index // 3 + 1}") for index in range(12)]
    try:
        assert all(answers(sock) for sock in held)
        waiting = connect(limited.port, "127.0.2.1")  # in the listen backlog, not refused
        assert not answers(waiting, timeout=1.0)
        held.pop().close()
        waiting.settimeout(10)
        read_frame(waiting)  # the request sent above is answered once a slot frees
        waiting.close()
    finally:
        for sock in held:
            sock.close()


def test_the_creation_rate_spreads_new_connections_over_time(tmp_path):
    with BrokerProcess(tmp_path / "data", settings={"max.connection.creation.rate": 5}) as process:
        time.sleep(1.1)  # a full bucket
        started = time.monotonic()
        sockets = [connect(process.port) for _ in range(15)]
        assert all(answers(sock) for sock in sockets)
        elapsed = time.monotonic() - started
        for sock in sockets:
            sock.close()
    assert elapsed > 1.2  # 5 at once, then 10 at 5 per second (about 2 s)


def test_a_per_ip_limit_of_zero_needs_overrides(tmp_path):
    """As Kafka's KafkaConfig: with max.connections.per.ip=0 and no overrides nobody could connect, so the broker
    refuses to start; with an override the named address gets in and every other one is closed at once."""
    with pytest.raises(RuntimeError, match="max.connections.per.ip can be set to zero only if"):
        BrokerProcess(tmp_path / "refused", settings={"max.connections.per.ip": 0}).start()
    with BrokerProcess(tmp_path / "data", settings={"max.connections.per.ip": 0,
                                                    "max.connections.per.ip.overrides": "127.0.0.5:1"}) as process:
        allowed = connect(process.port, "127.0.0.5")
        refused = connect(process.port, "127.0.0.6")
        assert answers(allowed) and not answers(refused)
        allowed.close()
        refused.close()
