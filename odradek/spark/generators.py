"""Small, realistic event generators for the pipelines: orders, page views, customer-profile changes.

Each writes JSON events with confluent-kafka (`config`: settings beside bootstrap.servers, such as a secured
cluster's, in librdkafka's names) and returns what a correct pipeline must produce from them (a count,
the views per page and minute, the latest profile per customer), so the CLI can demo a pipeline and the tests can
check one against a known answer. Seeded, so a run is repeatable.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter

from confluent_kafka import Producer

from odradek.spark.kafka_io import ensure_topic

PAGES = ("/", "/pricing", "/docs", "/docs/quickstart", "/blog", "/signup", "/login", "/careers")
CURRENCIES = ("EUR", "USD", "GBP")
MINUTE_MS = 60_000


class EventWriter:
    """A producer that keeps going when its queue is full and fails if anything was not acknowledged."""

    def __init__(self, client_config: dict[str, str]):
        self._producer = Producer({"linger.ms": 5, "acks": "all", "log.connection.close": False, **client_config})
        self._failures: list[str] = []

    def send(self, topic: str, key: str | None, value: dict | None, timestamp_ms: int | None = None) -> None:
        payload = None if value is None else json.dumps(value, separators=(",", ":")).encode()
        extra = {"timestamp": timestamp_ms} if timestamp_ms is not None else {}
        while True:
            try:
                self._producer.produce(topic, payload, key.encode() if key is not None else None,
                                       on_delivery=self._delivered, **extra)
                return
            except BufferError:
                self._producer.poll(0.05)

    def close(self) -> None:
        if self._producer.flush(60) or self._failures:
            raise RuntimeError(f"events not acknowledged: {(self._failures or ['flush timed out'])[0]}")

    def _delivered(self, error, message) -> None:
        if error is not None:
            self._failures.append(error.str())


def produce_orders(bootstrap_servers: str, topic: str, count: int, *, partitions: int = 4, seed: int = 0,
                   config: dict[str, str] | None = None) -> int:
    """Order events keyed by customer; returns how many were written."""
    client_config = {**(config or {}), "bootstrap.servers": bootstrap_servers}
    ensure_topic(client_config, topic, partitions)
    rng = random.Random(seed)
    writer = EventWriter(client_config)
    now_ms = int(time.time() * 1000)
    for number in range(count):
        customer = f"customer-{rng.randrange(1000):04d}"
        writer.send(topic, customer, {
            "order_id": f"order-{seed}-{number}", "customer": customer,
            "items": rng.randint(1, 5), "amount": round(rng.uniform(5, 500), 2),
            "currency": rng.choice(CURRENCIES), "created_ms": now_ms + number})
    writer.close()
    return count


def produce_page_views(bootstrap_servers: str, topic: str, count: int, *, start_ms: int, minutes: int,
                       partitions: int = 2, seed: int = 0, config: dict[str, str] | None = None) -> Counter:
    """Page views spread over `minutes` minutes from start_ms, in time order as a site would send them, each
    record's timestamp being the view's time. Returns the views per (page, minute start in ms).
    """
    client_config = {**(config or {}), "bootstrap.servers": bootstrap_servers}
    ensure_topic(client_config, topic, partitions)
    rng = random.Random(seed)
    writer = EventWriter(client_config)
    expected: Counter = Counter()
    for at in sorted(start_ms + rng.randrange(minutes * MINUTE_MS) for _ in range(count)):
        page = rng.choices(PAGES, weights=range(len(PAGES), 0, -1))[0]
        user = f"user-{rng.randrange(500)}"
        writer.send(topic, user, {"page": page, "user": user, "referrer": rng.choice(("", "search", "social"))},
                    timestamp_ms=at)
        expected[(page, at - at % MINUTE_MS)] += 1
    writer.close()
    return expected


def produce_profile_changes(bootstrap_servers: str, topic: str, customers: int, changes: int, *,
                            delete_share: float = 0.1, partitions: int = 2, seed: int = 0,
                            config: dict[str, str] | None = None) -> dict[str, dict]:
    """Customer-profile upserts and deletes (tombstones) on a compacted topic keyed by customer.

    Returns the latest profile of every customer that still exists: what a changelog snapshot must hold.
    """
    client_config = {**(config or {}), "bootstrap.servers": bootstrap_servers}
    ensure_topic(client_config, topic, partitions, {"cleanup.policy": "compact"})
    rng = random.Random(seed)
    writer = EventWriter(client_config)
    state: dict[str, dict] = {}
    for version in range(changes):
        customer = f"customer-{rng.randrange(customers):04d}"
        if customer in state and rng.random() < delete_share:
            writer.send(topic, customer, None)
            del state[customer]
        else:
            profile = {"customer": customer, "tier": rng.choice(("free", "pro", "enterprise")),
                       "email": f"{customer}@example.com", "version": version}
            writer.send(topic, customer, profile)
            state[customer] = profile
    writer.close()
    return state
