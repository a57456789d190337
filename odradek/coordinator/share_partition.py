"""One share-partition (KIP-932): the in-flight window of a (share group, topic partition) and each record's state.

Plain code with explicit `now_ms`, as Kafka's SharePartition without its I/O. The window runs from the start offset
(every record before it is done: acknowledged or archived) to the end offset (the next record never fetched). A
record in the window is AVAILABLE (to be delivered, again if its delivery count is above 0), ACQUIRED by one member
until its lock expires, ACKNOWLEDGED or ARCHIVED; the ids are Kafka's RecordState ids, which the state topic stores.
Acquiring a record counts a delivery; a record a fetch must not deliver (a control batch's, an aborted transaction's
under share.isolation.level read_committed) is archived instead. A record released (RELEASE, its lock expiring, its
holder leaving) becomes AVAILABLE again, or ARCHIVED once its delivery count has reached the delivery limit; REJECT
and GAP archive it, ACCEPT acknowledges it, RENEW extends its lock. The start offset moves past every record that is
done, so the window holds at most `max_locks` records not yet done (group.share.partition.max.record.locks), as
Kafka bounds it.

An acknowledgement takes effect in two steps, as Kafka's state transitions do: `acknowledge` marks its records
pending (still acquired, their lock neither expiring nor released, no second acknowledgement taken, but written
with their new state), and once the state write is done `complete` settles them, or `roll_back` leaves them as they
were when it failed, acquired by their member, whose client was told the acknowledgement failed.

`state` is what is persisted (odradek/coordinator/share_state.py): the start offset and runs of equal (state,
delivery count), an acquired record stored as AVAILABLE with the count of its current delivery, as Kafka's persister
writes it. A share-partition restored from them (`restored`) delivers every record that was not done again, and
counts it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from odradek.errors import ErrorCode, KafkaError

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_DONE = (ACKNOWLEDGED, ARCHIVED)


@dataclasses.dataclass(slots=True)
class InFlight:
    state: int = AVAILABLE
    delivery_count: int = 0
    member: str | None = None
    lock_deadline_ms: int = 0
    pending: int | None = None  # ACCEPT, RELEASE, REJECT or GAP: an acknowledgement awaiting its state write


class SharePartition:
    def __init__(self, start_offset: int, *, lock_duration_ms: int, delivery_limit: int, max_locks: int):
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_ms = lock_duration_ms
        self.delivery_limit = delivery_limit
        self.max_locks = max_locks
        self.records: dict[int, InFlight] = {}  # every offset in [start_offset, end_offset)

    @classmethod
    def restored(cls, start_offset: int, batches: Iterable[tuple[int, int, int, int]], **limits) -> "SharePartition":
        """From persisted (first, last, state, delivery count) runs; offsets past the start they leave out are
        AVAILABLE, never delivered."""
        partition = cls(start_offset, **limits)
        for first, last, state, count in batches:
            for offset in range(max(first, start_offset), last + 1):
                partition.records[offset] = InFlight(AVAILABLE if state == ACQUIRED else state, count)
        if partition.records:
            partition.end_offset = max(partition.records) + 1
            for offset in range(start_offset, partition.end_offset):
                partition.records.setdefault(offset, InFlight())
        partition._advance()
        return partition

    # ------------------------------------------------------------------------------------------ fetching
    def next_fetch_offset(self) -> int | None:
        """Where a fetch reads from: the first AVAILABLE record in the window, else the end offset; None when the
        window is full of records not done."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == AVAILABLE:
                return offset
        if self.end_offset - self.start_offset >= self.max_locks:
            return None
        return self.end_offset

    def acquire(self, member: str, batches: Iterable[tuple[int, int]], max_records: int, now_ms: int,
                skipped: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int, int]]:
        """Acquire for `member` up to `max_records` records of the log batches (first, last offset) a fetch read;
        the acquired runs as (first, last, delivery count). The `skipped` batches it read (control batches, an
        aborted transaction's under read_committed) and the offsets between batches (compacted away) are archived
        as the window passes them, never delivered."""
        acquired: list[tuple[int, int, int]] = []
        taken = 0
        deadline = now_ms + self.lock_duration_ms
        ranges = sorted([(first, last, True) for first, last in batches]
                        + [(first, last, False) for first, last in skipped])
        for first, last, deliverable in ranges:
            for offset in range(max(first, self.start_offset), last + 1):
                if taken >= max_records:
                    break
                record = self.records.get(offset)
                if record is None:
                    if offset < self.end_offset or self.end_offset - self.start_offset >= self.max_locks:
                        continue
                    for missing in range(self.end_offset, offset):
                        self.records[missing] = InFlight(ARCHIVED)
                    record = self.records[offset] = InFlight()
                    self.end_offset = offset + 1
                if record.state != AVAILABLE:
                    continue
                if not deliverable:
                    record.state = ARCHIVED
                    continue
                record.state, record.member, record.lock_deadline_ms = ACQUIRED, member, deadline
                record.delivery_count += 1
                taken += 1
                if acquired and acquired[-1][1] == offset - 1 and acquired[-1][2] == record.delivery_count:
                    acquired[-1] = (acquired[-1][0], offset, record.delivery_count)
                else:
                    acquired.append((offset, offset, record.delivery_count))
        self._advance()
        return acquired

    # ------------------------------------------------------------------------------------ acknowledging
    def acknowledge(self, member: str, first: int, last: int, types: list[int], now_ms: int) -> list[int]:
        """One acknowledgement batch: one type for the whole range, or one per offset. Every record must be
        acquired by `member` and not pending (INVALID_RECORD_STATE otherwise, and nothing changes), as Kafka
        checks. RENEW takes effect at once; the offsets it returns are pending, for `complete` or `roll_back`."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "acknowledgement batch does not match its offsets")
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type in {types}")
        if first < self.start_offset or last >= self.end_offset:
            raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                             f"offsets {first}-{last} are not all in flight [{self.start_offset}, {self.end_offset})")
        for offset in range(first, last + 1):
            record = self.records.get(offset)
            if record is None or record.state != ACQUIRED or record.member != member or record.pending is not None:
                raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                                 f"offset {offset} is not acquired by this member")
        pending = []
        for offset in range(first, last + 1):
            kind = types[0] if len(types) == 1 else types[offset - first]
            if kind == RENEW:
                self.records[offset].lock_deadline_ms = now_ms + self.lock_duration_ms
            else:
                self.records[offset].pending = kind
                pending.append(offset)
        return pending

    def complete(self, offsets: Iterable[int]) -> None:
        """The state write carrying these pending acknowledgements is done: they take effect."""
        for offset in offsets:
            record = self.records.get(offset)
            if record is None or record.pending is None:
                continue
            state = self._written_state(record)  # the state the write carried for it
            record.pending = None
            self._settle(record, state)
        self._advance()

    def roll_back(self, offsets: Iterable[int]) -> None:
        """The state write failed: these records stay acquired, as before their acknowledgement."""
        for offset in offsets:
            record = self.records.get(offset)
            if record is not None:
                record.pending = None

    def release_member(self, member: str) -> bool:
        """The member left or its session ended: its records come back (or are archived at the limit)."""
        released = False
        for record in self.records.values():
            if record.state == ACQUIRED and record.member == member and record.pending is None:
                self._release(record)
                released = True
        self._advance()
        return released

    def expire_locks(self, now_ms: int) -> bool:
        """Release every record whose lock has run out; whether any was."""
        expired = False
        for record in self.records.values():
            if record.state == ACQUIRED and record.lock_deadline_ms <= now_ms and record.pending is None:
                self._release(record)
                expired = True
        self._advance()
        return expired

    def move_start(self, offset: int) -> None:
        """A new start offset (AlterShareGroupOffsets, or the log start moving past the window): the records
        before it leave the window, done."""
        if offset >= self.end_offset:
            self.records.clear()
            self.start_offset = self.end_offset = offset
            return
        for gone in range(self.start_offset, offset):
            del self.records[gone]
        self.start_offset = max(self.start_offset, offset)

    # -------------------------------------------------------------------------------------------- views
    def state(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """What is written: the start offset and (first, last, state, delivery count) runs covering the window from
        it, as they will be once the pending acknowledgements take effect (a pending one as the state it leads to,
        the start offset past the records it completes), ACQUIRED written as AVAILABLE."""
        states = [self._written_state(self.records[offset]) for offset in range(self.start_offset, self.end_offset)]
        skipped = next((at for at, state in enumerate(states) if state not in _DONE), len(states))
        runs: list[list[int]] = []
        for offset in range(self.start_offset + skipped, self.end_offset):
            state, count = states[offset - self.start_offset], self.records[offset].delivery_count
            if runs and runs[-1][2] == state and runs[-1][3] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, state, count])
        return self.start_offset + skipped, [tuple(run) for run in runs]

    def acquired_count(self) -> int:
        return sum(1 for record in self.records.values() if record.state == ACQUIRED)

    def next_lock_deadline(self) -> int | None:
        return min((r.lock_deadline_ms for r in self.records.values() if r.state == ACQUIRED and r.pending is None),
                   default=None)

    # ---------------------------------------------------------------------------------------- internals
    def _released_state(self, record: InFlight) -> int:
        return ARCHIVED if record.delivery_count >= self.delivery_limit else AVAILABLE

    def _written_state(self, record: InFlight) -> int:
        if record.pending is not None:
            return ACKNOWLEDGED if record.pending == ACCEPT else \
                self._released_state(record) if record.pending == RELEASE else ARCHIVED
        return AVAILABLE if record.state == ACQUIRED else record.state

    def _release(self, record: InFlight) -> None:
        self._settle(record, self._released_state(record))

    @staticmethod
    def _settle(record: InFlight, state: int) -> None:
        record.state, record.member, record.lock_deadline_ms = state, None, 0

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in _DONE:
            del self.records[self.start_offset]
            self.start_offset += 1
