"""Committed offsets held in memory: what OffsetFetch answers from, and the rules for when they expire.

The durable copy is the __consumer_offsets log (offsets_topic.py writes and reads it); this store is the cache the
coordinator fills from that log at start and updates after each successful append. Each offset is kept with the log
offset of the record that committed it, and a commit whose record is older than the one held is ignored, as Kafka's
GroupMetadata (olderThan): appends waiting for the in-sync replicas, and transactions waiting for their markers,
complete out of order, and the cache must hold the last commit written, not the last one completed. Plain code with
explicit `now_ms`, so retention is testable without waiting a week.
"""

from __future__ import annotations

from typing import NamedTuple

TopicPartition = tuple[str, int]


class OffsetAndMetadata(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # set only by OffsetCommit v2-v4 with an explicit retention time


class OffsetStore:
    def __init__(self):
        self._groups: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._record_offsets: dict[tuple[str, TopicPartition], int] = {}

    def commit(self, group_id: str, partition: TopicPartition, committed: OffsetAndMetadata,
               record_offset: int) -> bool:
        """Take `committed`, written at `record_offset` of the group's __consumer_offsets partition, unless the
        offset held was written later; whether it was taken."""
        if self._record_offsets.get((group_id, partition), -1) > record_offset:
            return False
        self._groups.setdefault(group_id, {})[partition] = committed
        self._record_offsets[(group_id, partition)] = record_offset
        return True

    def remove(self, group_id: str, partition: TopicPartition) -> None:
        offsets = self._groups.get(group_id)
        self._record_offsets.pop((group_id, partition), None)
        if offsets is not None:
            offsets.pop(partition, None)
            if not offsets:
                del self._groups[group_id]

    def get(self, group_id: str, partition: TopicPartition) -> OffsetAndMetadata | None:
        return self._groups.get(group_id, {}).get(partition)

    def of_group(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._groups.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def expired(self, group_id: str, now_ms: int, retention_ms: int, empty_since_ms: int | None) -> list[TopicPartition]:
        """Offsets of an empty group that are past retention (KIP-211): counted from when the group became empty,
        or from the commit itself for a group that never had members (`empty_since_ms` None); an explicit expire
        timestamp wins."""
        expired = []
        for partition, committed in self._groups.get(group_id, {}).items():
            if committed.expire_timestamp_ms >= 0:
                due = committed.expire_timestamp_ms
            else:
                due = (committed.commit_timestamp_ms if empty_since_ms is None else empty_since_ms) + retention_ms
            if due <= now_ms:
                expired.append(partition)
        return expired
