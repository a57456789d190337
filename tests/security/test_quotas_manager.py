"""The quota manager as plain code with a settable clock: Kafka's eight levels pick the quota, the sampled rate,
and the throttle time that brings the rate back to the quota."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from odradek.errors import KafkaError
from odradek.security.quotas import ClientQuotas, Rate, entity_of


def test_the_most_specific_level_applies_and_its_users_share_one_rate():
    configured = {entity_of([("user", "alice")]): {"producer_byte_rate": 100.0},
                  entity_of([("user", "alice"), ("client-id", "app")]): {"producer_byte_rate": 200.0},
                  entity_of([("client-id", None)]): {"producer_byte_rate": 300.0}}
    quotas = ClientQuotas(SimpleNamespace(client_quotas=configured), 11, 1000)
    assert quotas.applying("producer_byte_rate", "alice", "app")[1] == 200.0
    assert quotas.applying("producer_byte_rate", "alice", "other")[1] == 100.0
    assert quotas.applying("producer_byte_rate", "bob", "other")[1] == 300.0
    assert quotas.applying("consumer_byte_rate", "bob", "other") is None


def test_rate_counts_at_least_num_minus_one_windows():
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    assert rate.rate(0) == pytest.approx(1000.0)  # 10 kB over ten padded seconds
    for second in range(1, 20):
        rate.record(1000, second * 1000)
    assert rate.rate(19_000) == pytest.approx(1000.0, rel=0.1)


def test_throttle_brings_the_rate_back_to_the_quota():
    now = [0.0]
    quotas = ClientQuotas(SimpleNamespace(client_quotas={entity_of([("client-id", "c")]): {"producer_byte_rate": 1000.0}}),
                          3, 1000,
                          clock=lambda: now[0])
    assert quotas.record("producer_byte_rate", "u", "c", 1500) == 0  # within the first two padded seconds' worth
    throttle = quotas.record("producer_byte_rate", "u", "c", 1500)  # 3000 B over 2 s: 1500 B/s
    assert throttle == 1000  # (1500 - 1000) / 1000 * 2 s
    assert quotas.record("producer_byte_rate", "u", "other", 10**9) == 0  # no quota for that client


def test_entities_kafka_refuses():
    for parts in ([], [("ip", "1.2.3.4")], [("user", "a"), ("user", "b")]):
        with pytest.raises(KafkaError):
            entity_of(parts)


def test_without_quotas_requests_are_neither_timed_nor_counted(monkeypatch):
    """No quota anywhere (the common case): a request's handler runs bare and its bytes are not recorded; the
    check once compared the function that gave the quotas itself, which is always true, so every Produce and Fetch paid
    for the timing and two rate lookups."""
    from odradek.security.quotas import throttle_connection, with_request_quota

    configured: dict = {}
    quotas = ClientQuotas(SimpleNamespace(client_quotas=configured), 11, 1000)
    monkeypatch.setattr(ClientQuotas, "record", lambda *args: pytest.fail("recorded without any quota"))
    answer = with_request_quota(quotas, lambda connection, header, request: "answer")
    assert answer(None, None, None) == "answer"
    assert throttle_connection(quotas, None, None, "producer_byte_rate", 100.0) == 0
