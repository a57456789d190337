"""Periodic work on the event loop: sleep, run `work(now_ms)`, log a failure and carry on.

Retention, checkpoints, offset expiry and transaction timeouts are all "every N ms, do this"; one loop serves them
so a failing pass is logged the same way everywhere and never stops the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.clock import now_ms

log = logging.getLogger("odradek.periodic")


async def every(interval_ms: float, work: Callable[[int], object], what: str) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            work(now_ms())
        except Exception:
            log.exception("%s failed", what)
