"""One partition as this broker holds it: the log plus what replication needs around it.

The log knows bytes and offsets; the partition adds the leader epoch, the replica set, the in-sync replicas and the
high watermark (the offset below which every in-sync replica has the data, so consumers may see it). With one broker
the in-sync set is this broker alone, so the high watermark follows the log end at every append; a follower fetch
path will move it instead once replication lands, without changing readers.

Waiters (fetch long polls) register a callback that runs once, after the next append; the partition does not know
about event loops, so the network shell decides what a wake-up means.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from odradek.cluster.metadata import PartitionAssignment
from odradek.errors import ErrorCode, KafkaError
from odradek.storage.log import Log


class Partition:
    __slots__ = ("topic", "index", "topic_id", "log", "assignment", "node_id", "high_watermark", "_waiters")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log,
                 assignment: PartitionAssignment, node_id: int):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.assignment = assignment
        self.node_id = node_id
        self.high_watermark = log.log_end_offset if self.isr_is_self else log.recovery_point
        self._waiters: list[Callable[[], None]] = []

    @property
    def isr_is_self(self) -> bool:
        return self.assignment.isr == [self.node_id]

    @property
    def is_leader(self) -> bool:
        return self.assignment.leader == self.node_id

    @property
    def leader_epoch(self) -> int:
        return self.assignment.leader_epoch

    def check_leader_epoch(self, requested: int) -> None:
        """KIP-320: a client that names a leader epoch must name ours (-1: it does not care)."""
        if requested >= 0 and requested != self.assignment.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH if requested < self.assignment.leader_epoch
                             else ErrorCode.UNKNOWN_LEADER_EPOCH)

    @property
    def last_stable_offset(self) -> int:
        """Below this offset no transaction is open; equal to the high watermark until transactions land."""
        return self.high_watermark

    def append(self, data, headers):
        """Append as leader; returns the log's AppendResult and wakes every waiter."""
        result = self.log.append(data, headers, partition_leader_epoch=self.assignment.leader_epoch)
        if self.isr_is_self:
            self.high_watermark = self.log.log_end_offset
        self.wake()
        return result

    def on_next_append(self, callback: Callable[[], None]) -> None:
        self._waiters.append(callback)

    def cancel_wait(self, callback: Callable[[], None]) -> None:
        try:
            self._waiters.remove(callback)
        except ValueError:
            pass

    def wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for callback in waiters:
                callback()
