"""Waiting on the event loop for a partition to change: its next append, high watermark move or new assignment,
or (for a Fetch) the end of a write of the writer thread that holds records it wants.

Partitions only call back (Partition.on_next_append, run once at the next append, high watermark advance or
assignment from the catalogue); what a wake-up means for a coroutine is decided here, once, for those that wait: a
Fetch long poll, an acks=all append waiting for the ISR (a Produce, an offset commit, a transaction coordinator's
write: `until_replicated`), and a Produce that reached a replica while the controller elects its leader (`until_led`).
`settled` waits for any future to end without being tied to it (an answer's, an earlier append's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from odradek.errors import ErrorCode, KafkaError
from odradek.storage.log import PendingWrite, call_when_written


async def next_change(partitions, timeout_s: float, writes: Iterable[PendingWrite] = (),
                      woken: asyncio.Future | None = None) -> bool:
    """Wait until one of `partitions` appends or advances its high watermark, or one of the writer thread's
    `writes` (records appended before, not in the file yet) is done, or `woken` (a future the caller may resolve
    from elsewhere: the share coordinator's records coming back) is; False when `timeout_s` ran out."""
    loop = asyncio.get_running_loop()
    if woken is None:
        woken = loop.create_future()

    def wake():
        resolve(woken)

    for partition in partitions:
        partition.on_next_append(wake)
    for write in writes:
        call_when_written(write, loop, lambda _error: wake())
    try:
        await asyncio.wait_for(woken, max(0.0, timeout_s))
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        for partition in partitions:
            partition.cancel_wait(wake)


async def until_replicated(partition_now: Callable[[], object], last_offset: int, deadline: float) -> KafkaError | None:
    """acks=all, as Kafka's DelayedProduce: wait until the in-sync replicas have every offset up to `last_offset` of
    the partition `partition_now()` returns (asked again at each wake-up: leadership can move meanwhile), i.e. its
    high watermark passed it; None then. Otherwise the error: NOT_LEADER_OR_FOLLOWER when leadership moved,
    REQUEST_TIMED_OUT at `deadline` (time.monotonic()), NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
    min.insync.replicas meanwhile."""
    while True:
        partition = partition_now()
        if partition is None or not partition.is_leader:
            return KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "Leadership moved before the ISR had the records")
        if partition.high_watermark > last_offset:
            try:
                partition.check_min_insync()
            except KafkaError as exc:
                return KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, exc.message)
            return None
        if not await next_change([partition], deadline - time.monotonic()):
            return KafkaError(ErrorCode.REQUEST_TIMED_OUT, "The ISR did not have the records in time")


async def until_led(partition, deadline: float) -> None:
    """Wait until `partition` leads here or its leader epoch moves on (another broker was elected), or `deadline`
    (time.monotonic()); the caller looks at the partition again."""
    epoch = partition.leader_epoch
    while not partition.is_leader and partition.leader_epoch == epoch:
        if not await next_change([partition], deadline - time.monotonic()):
            return


async def written(writes: Iterable[PendingWrite]) -> None:
    """Wait until each of the writer thread's `writes` is done, whatever its outcome (a failed write's bytes are
    held by the log again, and the next read tries them)."""
    loop = asyncio.get_running_loop()
    for write in writes:
        if not write.done():
            done = loop.create_future()
            call_when_written(write, loop, lambda _error, done=done: resolve(done))
            await done


async def settled(future: asyncio.Future) -> None:
    """Until `future` is done, however it ends, without taking its outcome, and without cancelling it when the task
    that waits is cancelled: what asyncio.wait((future,)) does, without its Python (a set, a counter, a closure and
    checks of every argument), which was a tenth of the calls of a produce request whose answer waits for the writer
    thread."""
    if not future.done():
        waiter = asyncio.get_running_loop().create_future()

        def wake(_done: asyncio.Future) -> None:
            resolve(waiter)

        future.add_done_callback(wake)
        try:
            await waiter
        except asyncio.CancelledError:
            future.remove_done_callback(wake)
            raise


def resolve(waiter: asyncio.Future) -> None:
    """A waiter's wake-up, unless it is done already (or cancelled: its task has gone)."""
    if not waiter.done():
        waiter.set_result(None)
