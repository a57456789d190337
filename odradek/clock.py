"""The wall clock in milliseconds since the epoch: Kafka's unit for timestamps, retention and timeouts.

One function that every layer calls (and that tests replace by passing their own `now_ms` callable), so there is
one notion of "now" in the broker.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
