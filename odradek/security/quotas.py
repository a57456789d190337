"""Client quotas: which quota applies to a (user, client id), the rate each has used, and how long to throttle.

Kafka's ClientQuotaManager, in plain code: quotas are configured per entity (a user, a client id, or both; either
part may be the `<default>`, stored as None) and the one that applies is the first of Kafka's eight levels that
exists (user+client, user+default client, user, default user+client, default user+default client, default user,
client, default client). Everyone the matched entity covers shares its usage, as Kafka's sensors are named by the
matched entity. The usage is a rate over `quota.window.num` samples of `quota.window.size.seconds` (Kafka's Rate
over a SampledStat, its elapsed time never counted below `num - 1` whole windows); when a recording takes the rate
over the quota, the throttle time is (rate - quota) / quota * window, at most the whole sampled span. The broker
answers with that throttle_time_ms and, once the answer has gone out, reads nothing more from the connection for as
long (KIP-219; odradek/broker/network.py); an acks=0 Produce, which gets no answer, mutes it at once.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from odradek.errors import ErrorCode, KafkaError
from odradek.security.acl import principal_of

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
USER, CLIENT_ID = "user", "client-id"

Entity = tuple[tuple[str, "str | None"], ...]  # sorted (entity type, name or None for the default) pairs


def entity_of(parts) -> Entity:
    """An entity from (type, name) pairs, refused as Kafka refuses it: unknown or repeated types, none at all."""
    parts = list(parts)
    types = [kind for kind, _ in parts]
    if not parts:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    if len(set(types)) != len(types):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate entity type in {types}")
    for kind in types:
        if kind not in (USER, CLIENT_ID):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}")
    return tuple(sorted(parts))


def check_quota_value(key: str, value: float) -> None:
    if key not in QUOTA_KEYS:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be positive, not {value}")


def _levels(user: str, client_id: str) -> list[Entity]:
    """Kafka's eight quota levels for a connection, most specific first."""
    return [((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)), ((USER, user),),
            ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)), ((USER, None),),
            ((CLIENT_ID, client_id),), ((CLIENT_ID, None),)]


class Rate:
    """Kafka's Rate over a SampledStat of `samples` windows of `window_ms`: the per-second rate of what was
    recorded. As Kafka, one window more than `samples` is kept (the one overlapping the start of the span), and a
    window leaves when its last event is a whole span old."""

    __slots__ = ("samples", "window_ms", "_windows")

    def __init__(self, samples: int, window_ms: int):
        self.samples = samples
        self.window_ms = window_ms
        self._windows: list[list] = []  # [start ms, last event ms, total], oldest first

    def record(self, value: float, now_ms: float) -> None:
        if not self._windows or now_ms - self._windows[-1][0] >= self.window_ms:
            self._windows.append([now_ms, now_ms, 0.0])
            del self._windows[:-(self.samples + 1)]
        current = self._windows[-1]
        current[1] = now_ms
        current[2] += value

    def window_size_ms(self, now_ms: float) -> float:
        span = self.samples * self.window_ms
        self._windows = [w for w in self._windows if now_ms - w[1] < span]
        elapsed = now_ms - self._windows[0][0] if self._windows else 0.0
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        size = self.window_size_ms(now_ms)
        return sum(w[2] for w in self._windows) * 1000.0 / size


@dataclasses.dataclass
class ClientQuotas:
    """The configured quotas and each matched entity's usage. The quotas are `catalogue.client_quotas` (entity ->
    {key: value}), read where they are needed: a ZooKeeper cluster's catalogue replaces that dict whole from a watch.
    Every request asks whether there are any, so that is an attribute read, not a call."""

    catalogue: Any  # anything with a `client_quotas` attribute
    samples: int
    window_ms: int
    clock: object = time.monotonic

    def __post_init__(self):
        self._rates: dict[tuple[str, Entity], Rate] = {}

    def applying(self, key: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        """(the entity whose quota applies, the quota), or None when no level sets this key."""
        configured = self.catalogue.client_quotas
        if not configured:  # the common case: no quotas at all, nothing to look up per request
            return None
        for entity in _levels(user, client_id):
            value = configured.get(entity, {}).get(key)
            if value is not None:
                return entity, value
        return None

    def record(self, key: str, user: str, client_id: str, value: float) -> int:
        """Count `value` against the applying quota; the throttle time in ms it earns (0 within the quota)."""
        found = self.applying(key, user, client_id)
        if found is None:
            return 0
        entity, quota = found
        rate = self._rates.get((key, entity))
        if rate is None:
            rate = self._rates[(key, entity)] = Rate(self.samples, self.window_ms)
        now_ms = self.clock() * 1000.0
        rate.record(value, now_ms)
        observed = rate.rate(now_ms)
        if observed <= quota:
            return 0
        throttle = (observed - quota) / quota * rate.window_size_ms(now_ms)
        return int(min(throttle, self.samples * self.window_ms))


def _user_of(connection) -> str:
    principal = principal_of(connection)
    return principal.split(":", 1)[1] if ":" in principal else principal


def throttle_connection(quotas: ClientQuotas, connection, header, key: str, value: float) -> int:
    """Record one request's use against its connection's quota; the throttle time it earns, for the answer's
    throttle_time_ms (the network shell mutes the connection for that long once the answer has gone out)."""
    if not quotas.catalogue.client_quotas:
        return 0
    return quotas.record(key, _user_of(connection), header.client_id or "", value)


def forget_usage(quotas: ClientQuotas, connection, header, key: str, value: float) -> None:
    """Take back a recorded use whose answer was not sent after all (Kafka's unrecordQuotaSensor)."""
    quotas.record(key, _user_of(connection), header.client_id or "", -value)


def with_request_quota(quotas: ClientQuotas, handler):
    """The handler, with the time it takes counted against the client's request_percentage (Kafka's request
    quota: per second, the percentage of one request thread's time the client used); a throttle it earns goes into
    the answer's throttle_time_ms, as the larger of it and a byte-rate throttle, and mutes the connection. Only the
    handler's own running time counts, not a long poll's wait."""
    def answer(connection, header, request):
        if not quotas.catalogue.client_quotas:  # no quota anywhere: nothing to time or count (the common case)
            return handler(connection, header, request)
        started = time.perf_counter()
        response = handler(connection, header, request)
        throttle_ms = throttle_connection(quotas, connection, header, REQUEST_PERCENTAGE,
                                          (time.perf_counter() - started) * 100.0)
        if throttle_ms and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
        return response
    return answer
