"""Waiting on the event loop for a partition to change: its next append or high watermark move.

Partitions only call back (Partition.on_next_append, run once at the next append or high watermark advance); what
a wake-up means for a coroutine is decided here, once, for the two that wait: a Fetch long poll and an acks=all
Produce waiting for the ISR.
"""

from __future__ import annotations

import asyncio


async def next_change(partitions, timeout_s: float) -> bool:
    """Wait until one of `partitions` appends or advances its high watermark; False when `timeout_s` ran out."""
    woken = asyncio.get_running_loop().create_future()

    def wake():
        if not woken.done():
            woken.set_result(None)

    for partition in partitions:
        partition.on_next_append(wake)
    try:
        await asyncio.wait_for(woken, max(0.0, timeout_s))
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        for partition in partitions:
            partition.cancel_wait(wake)
