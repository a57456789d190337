"""Incremental fetch sessions (KIP-227): the broker remembers what a consumer fetches so requests stay small.

Plain state, no I/O. A request names (session id, epoch): (0, -1) is a sessionless full fetch; (0, 0) opens a
session; (id, -1) closes one; (id, n > 0) is an incremental fetch that must carry the session's next epoch and only
the partitions that changed. The answer to an incremental fetch carries only partitions with something new: records,
a moved high watermark, last stable offset or log start offset, or an error. The cache is bounded
(max.incremental.fetch.session.cache.slots, 1000 in Kafka); when full, the least recently used session goes.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import OrderedDict

from odradek.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000

PartitionKey = tuple[str, int]  # (topic name, partition index)


@dataclasses.dataclass(slots=True)
class FetchTarget:
    """One partition to read: where from, how much, and (in a session) what the consumer was last told."""

    topic: str
    partition: int
    topic_id: object
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1  # Fetch v12+, checked for a consumer as Kafka's Partition.readRecords

    def moved(self, high_watermark: int, last_stable_offset: int, log_start_offset: int) -> bool:
        """Whether any watermark differs from what the consumer was last told."""
        return (high_watermark != self.high_watermark or last_stable_offset != self.last_stable_offset
                or log_start_offset != self.log_start_offset)

    def told(self, high_watermark: int, last_stable_offset: int, log_start_offset: int) -> None:
        self.high_watermark, self.last_stable_offset, self.log_start_offset = (
            high_watermark, last_stable_offset, log_start_offset)


@dataclasses.dataclass
class FetchSession:
    session_id: int
    epoch: int
    targets: "OrderedDict[PartitionKey, FetchTarget]"  # in the order the next fetch reads them

    def served_last(self, target: FetchTarget) -> None:
        """`target` just returned records: read it after the others next time (fetch limits favour the first)."""
        key = (target.topic, target.partition)
        if key in self.targets:
            self.targets.move_to_end(key)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS):
        self.max_sessions = max_sessions
        self.sessions: "OrderedDict[int, FetchSession]" = OrderedDict()
        self._ids = itertools.count(random.randrange(1, 2**30))

    def begin(self, session_id: int, epoch: int, requested: list[FetchTarget],
              forgotten: list[PartitionKey]) -> tuple[FetchSession | None, list[FetchTarget], bool]:
        """Resolve a request to (session or None, the targets to read, whether the answer is incremental).

        Raises KafkaError(FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH) for a request that does not
        match a session; the answer then carries that top-level error and no partitions.
        """
        if session_id == 0:
            if epoch == FINAL_EPOCH:
                return None, requested, False
            if epoch != INITIAL_EPOCH:
                raise KafkaError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            session = self._open(requested)
            return session, list(session.targets.values()), False
        if epoch == FINAL_EPOCH:
            self.sessions.pop(session_id, None)
            return None, requested, False
        session = self.sessions.get(session_id)
        if session is None:
            raise KafkaError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise KafkaError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        self.sessions.move_to_end(session_id)
        for key in forgotten:
            session.targets.pop(key, None)
        for target in requested:
            key = (target.topic, target.partition)
            known = session.targets.get(key)
            if known is None:
                session.targets[key] = target
            else:
                known.fetch_offset = target.fetch_offset
                known.max_bytes = target.max_bytes
                known.current_leader_epoch = target.current_leader_epoch
                known.last_fetched_epoch = target.last_fetched_epoch
        session.epoch = _next_epoch(epoch)
        return session, list(session.targets.values()), True

    def _open(self, requested: list[FetchTarget]) -> FetchSession:
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)
        session_id = next(self._ids) % (2**31 - 1) or next(self._ids)
        session = FetchSession(session_id, _next_epoch(INITIAL_EPOCH),
                               OrderedDict(((t.topic, t.partition), t) for t in requested))
        self.sessions[session_id] = session
        return session

    def forget_topic(self, topic: str) -> None:
        for session in self.sessions.values():
            for key in [k for k in session.targets if k[0] == topic]:
                del session.targets[key]


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1
