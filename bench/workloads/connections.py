"""Many connections: 500 idle ones plus 20 busy producers, and the memory (RSS) the broker holds for them.

The idle connections are raw sockets that each complete an ApiVersions exchange (so the broker has set up
whatever it keeps per client) and then say nothing; after the busy phase every one of them must still answer
ApiVersions, so a broker that drops or starves idle clients fails the round instead of looking cheap. The 20
producers are separate librdkafka clients driven in turn from one thread (a chunk of records each), into a topic
of 8 partitions, acks=1. RSS is read from /proc before, with the idle connections open, and sampled every 20 ms
during the busy phase for its peak. Each round uses a freshly started broker so that rounds do not inherit memory;
a Kafka is not warmed up first (bench/peers.py), so its RSS at start is the one a user meets.
"""

from __future__ import annotations

import socket
import threading
import time

from bench import client, peers
from bench.measure import Results

WORKLOAD = "connections"
PARTITIONS = 8
MIB = 1 << 20


def open_idle(bootstrap_port: int, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", bootstrap_port), timeout=30)
        peers.api_versions(sock)
        sockets.append(sock)
    return sockets


def busy(broker: peers.Broker, topic: str, producers: int, records: int) -> float:
    """Records per second over all producers, each sending its share in chunks, turn by turn."""
    clients = [client.producer(broker.bootstrap, acks="1", **client.THROUGHPUT_PRODUCER) for _ in range(producers)]
    chunk = [{"value": b"x" * client.RECORD_SIZE} for _ in range(1000)]
    for p in clients:  # connect and learn metadata before the clock starts
        p.produce(topic, b"w", partition=0)
        p.flush(30)
    sent = 0
    turn = 0
    started = time.perf_counter()
    while sent < records:
        p = clients[turn % producers]
        sent += p.produce_batch(topic, chunk, partition=turn % PARTITIONS)
        for message in chunk:
            message.pop("_error", None)
        p.poll(0)
        turn += 1
    for p in clients:
        if p.flush(120):
            raise RuntimeError("records still unacknowledged after 120 s")
    return sent / (time.perf_counter() - started)


def one_round(results: Results, broker: peers.Broker, sizes) -> None:
    client.create_topic(broker.bootstrap, "busy", PARTITIONS)
    time.sleep(0.5)
    base = broker.rss_bytes()
    idle = open_idle(broker.port, sizes.idle_connections)
    try:
        time.sleep(0.5)
        with_idle = broker.rss_bytes()
        peak = [with_idle]
        done = threading.Event()

        def sample():
            while not done.wait(0.02):
                peak[0] = max(peak[0], broker.rss_bytes())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            rate = busy(broker, "busy", sizes.busy_producers, sizes.records)
        finally:
            done.set()
            sampler.join()
        for sock in idle:  # every idle client must still be served
            peers.api_versions(sock)
    finally:
        for sock in idle:
            sock.close()
    name = broker.name
    label = f"{sizes.idle_connections} idle + {sizes.busy_producers} busy"
    results.add(WORKLOAD, f"produce, {label}", name, rate, unit="records/s")
    results.add(WORKLOAD, "RSS at start (one topic)", name, base / MIB, unit="MiB", better="lower")
    results.add(WORKLOAD, f"RSS with {sizes.idle_connections} idle", name, with_idle / MIB, unit="MiB",
                better="lower")
    results.add(WORKLOAD, f"peak RSS, {label}", name, peak[0] / MIB, unit="MiB", better="lower")
    results.add(WORKLOAD, "RSS per idle connection", name, (with_idle - base) / sizes.idle_connections / 1024,
                unit="KiB", better="lower")


def run(results: Results, brokers: list[str], sizes) -> None:
    for _, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat, warm=False):
        try:
            one_round(results, broker, sizes)
        except Exception as exc:
            results.error(WORKLOAD, f"produce, {sizes.idle_connections} idle + {sizes.busy_producers} busy",
                          broker.name, repr(exc), unit="records/s")
