"""The checker: Jepsen's anomaly classes for a Kafka-like log, computed from a history alone.

A history is the list of operations the clients did, in the order they happened (`Op`): sends (`invoke`, then `ok`
with the partition and offset the delivery report gave, or `fail`/`info` with the error), polls (`ok` with the
(partition, offset, value) records one poll returned), the assignments a consumer was given (a rebalance may move its
position back, which is no anomaly), transactions' outcomes, and a final read of every partition to its end after
every fault was healed. Every sent value is unique, so a value names one send.

Plain code over plain data, so that tests drive it with synthetic histories and the chaos runs with real ones.
Classes, as Jepsen's Kafka workload names them:

- lost-write: a send acknowledged `ok`, or a value of a transaction committed `ok`, that no read (polls nor the
  final read) ever saw.
- duplicate: one value at two or more offsets.
- inconsistent-offsets: one (partition, offset) holding two values, across reads and acknowledgements (an ack that
  names an offset where the log holds another value; an ack without an offset, a retry the broker had already
  written, names none).
- nonmonotonic-poll: a consumer's offsets on a partition going back or repeating, within a poll or from one poll to
  the next, with no new assignment in between.
- poll-skip: within one poll, two consecutive records of a partition with an offset between them that some read saw
  (Kafka's offsets may have gaps, transaction markers, so only offsets known to hold a record count).
- aborted-read: a read_committed consumer seeing a value of a transaction that aborted.

Failed and indeterminate (`fail`, `info`) sends are no anomaly either way: a timed-out idempotent send may have been
written. `unacknowledged-seen` counts them when read, for the report.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field

ANOMALIES = ("lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-poll", "poll-skip", "aborted-read")

Record = tuple[int, int, bytes]  # (partition, offset, value)


@dataclass(frozen=True)
class Op:
    """One step of one client (`process`). `f`: send, poll, assign, txn. `type`: invoke, ok, fail, info.
    send: `value`, and on ok its `partition`/`offset`. poll: `records`; `read_committed` for that consumer's polls.
    assign: `partitions` newly assigned. txn: `values` written in it, ok (committed) or fail (aborted)."""

    process: str
    f: str
    type: str
    value: bytes | None = None
    partition: int | None = None
    offset: int | None = None
    records: tuple[Record, ...] = ()
    values: tuple[bytes, ...] = ()
    partitions: tuple[int, ...] = ()
    read_committed: bool = False
    error: str | None = None
    time: float = 0.0


@dataclass
class Report:
    """Anomalies by class (each a list of examples, the evidence a human needs), plus counts for the table."""

    anomalies: dict[str, list] = field(default_factory=lambda: {name: [] for name in ANOMALIES})
    acknowledged: int = 0
    failed: int = 0
    polled_records: int = 0
    final_records: int = 0
    unacknowledged_seen: int = 0
    transactions: dict[str, int] = field(default_factory=dict)  # ended ok (committed), fail (aborted), info

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def counts(self) -> dict[str, int]:
        return {name: len(found) for name, found in self.anomalies.items()}

    def summary(self) -> str:
        found = {name: count for name, count in self.counts().items() if count}
        if not found:
            return "no anomalies"
        return "; ".join(f"{name} {count} (e.g. {self.anomalies[name][:3]})" for name, count in found.items())


def check(history: list[Op]) -> Report:
    report = Report()
    acked = {op.value: (op.partition, op.offset) for op in history if op.f == "send" and op.type == "ok"}
    report.acknowledged = len(acked)
    sent_not_acked = {op.value for op in history if op.f == "send" and op.type in ("fail", "info")} - acked.keys()
    report.failed = len(sent_not_acked)
    reads = [op for op in history if op.f == "poll" and op.type == "ok"]

    positions_of: dict[bytes, set[tuple[int, int]]] = defaultdict(set)  # value -> where reads saw it
    values_at: dict[tuple[int, int], set[bytes]] = defaultdict(set)     # (partition, offset) -> values
    for op in reads:
        if op.process == "final":
            report.final_records += len(op.records)
        else:
            report.polled_records += len(op.records)
        for partition, offset, value in op.records:
            positions_of[value].add((partition, offset))
            values_at[partition, offset].add(value)
    for value, position in acked.items():
        if position[1] is not None:  # librdkafka gives no offset for a send the broker found already written
            values_at[position].add(value)

    committed = {value: None for op in history if op.f == "txn" and op.type == "ok" for value in op.values}
    report.acknowledged += len(committed)
    report.anomalies["lost-write"] = sorted(((value, position) for value, position in {**committed, **acked}.items()
                                             if value not in positions_of), key=lambda lost: lost[0])
    report.anomalies["duplicate"] = sorted((value, sorted(where)) for value, where in positions_of.items()
                                           if len(where) > 1)
    report.anomalies["inconsistent-offsets"] = sorted((position, sorted(values)) for position, values
                                                      in values_at.items() if len(values) > 1)
    report.unacknowledged_seen = len(sent_not_acked & positions_of.keys())

    known_offsets: dict[int, list[int]] = defaultdict(list)
    for partition, offset in values_at:
        known_offsets[partition].append(offset)
    for offsets in known_offsets.values():
        offsets.sort()
    report.anomalies["poll-skip"] = _skips(reads, known_offsets)
    report.anomalies["nonmonotonic-poll"] = _nonmonotonic(history)

    report.transactions = dict(Counter(op.type for op in history if op.f == "txn" and op.type != "invoke"))
    aborted = {value for op in history if op.f == "txn" and op.type == "fail" for value in op.values}
    report.anomalies["aborted-read"] = [(op.process, record) for op in reads if op.read_committed
                                        for record in op.records if record[2] in aborted]
    return report


def _by_partition(records) -> dict[int, list[Record]]:
    grouped: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        grouped[record[0]].append(record)
    return grouped


def _skips(reads: list[Op], known_offsets: dict[int, list[int]]) -> list:
    found = []
    for op in reads:
        for partition, records in _by_partition(op.records).items():
            offsets = known_offsets[partition]
            for (_, before, _), (_, after, _) in zip(records, records[1:]):
                if after <= before:
                    continue  # nonmonotonic, counted there
                between = bisect.bisect_right(offsets, before)
                if between < len(offsets) and offsets[between] < after:
                    found.append((op.process, partition, before, after, offsets[between]))
    return found


def _nonmonotonic(history: list[Op]) -> list:
    """Per consumer and partition, each offset read must be above the last one read since its last assignment."""
    last: dict[tuple[str, int], int] = {}
    found = []
    for op in history:
        if op.f == "assign" and op.type == "ok":
            for partition in op.partitions:
                last.pop((op.process, partition), None)
        elif op.f == "poll" and op.type == "ok":
            for partition, offset, _ in op.records:
                key = (op.process, partition)
                if key in last and offset <= last[key]:
                    found.append((op.process, partition, last[key], offset))
                last[key] = offset
    return found
