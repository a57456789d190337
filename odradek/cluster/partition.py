"""One partition as this broker holds it: the log plus what replication needs around it.

The log knows bytes and offsets; the partition adds the leader epoch, the replica set, the in-sync replicas and the
high watermark (the offset below which every in-sync replica has the data, so consumers may see it). With one broker
the in-sync set is this broker alone, so the high watermark follows the log end at every append; a follower fetch
path will move it instead once replication lands, without changing readers.

Idempotent and transactional appends pass the log's producer state first (odradek/storage/producer_state.py): a
client's retry of a recent batch is answered with that batch's offsets and not written again, and the first offset of
the earliest open transaction caps the last stable offset. Transaction markers are written here too, by the
transaction coordinator, and an abort is recorded in the active segment's `.txnindex`.

Waiters (fetch long polls) register a callback that runs once, after the next append; the partition does not know
about event loops, so the network shell decides what a wake-up means.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from odradek.cluster.metadata import PartitionAssignment
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import encode_control_batch, parse_header
from odradek.storage.log import AppendResult, Log
from odradek.storage.producer_state import AppendOrigin, CompletedTransaction


PREFERRED_ELECTION = 0  # ElectLeaders' election types (Kafka's ElectionType)
UNCLEAN_ELECTION = 1


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

    def elect_leader(self, election_type: int) -> None:
        """ElectLeaders for this partition, decided as Kafka's controller does (KIP-460): a preferred election (0)
        is not needed while the first replica leads, an unclean one (1) while there is a leader. Leadership only
        moves once there are other replicas to move it to (replication and a controller); with one broker the
        first replica always leads, so every election is ELECTION_NOT_NEEDED."""
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
        assignment = self.assignment
        if (assignment.leader == assignment.replicas[0] if election_type == PREFERRED_ELECTION
                else assignment.leader >= 0):
            raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        raise KafkaError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED_ELECTION
                         else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)

    @property
    def reassignment(self) -> tuple[list[int], list[int]] | None:
        """(adding, removing) replicas of a reassignment in progress, or None. Replicas move only once replication
        can copy a partition to another broker, so none is ever in progress yet."""
        return None

    def reassign(self, target_replicas: list[int] | None) -> None:
        """AlterPartitionReassignments for this partition (the target already passed the cluster's checks of a
        manual assignment): None cancels a reassignment in progress, a target equal to the replicas is a no-op."""
        if target_replicas is None:
            if self.reassignment is None:
                raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
        elif target_replicas != self.assignment.replicas:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Moving replicas to other brokers needs replication, which this broker does not have.")

    @property
    def last_stable_offset(self) -> int:
        """Below this offset no transaction is open: the first offset of the earliest open one, at most the high
        watermark."""
        return min(self.log.producer_state.first_unstable_offset(default=self.high_watermark), self.high_watermark)

    def append(self, data, headers, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendResult:
        """Append as leader; returns the log's AppendResult (a retried batch's original offsets, nothing written)
        and wakes every waiter. Batches of idempotent producers come one per append (Produce v3+)."""
        producer_state = self.log.producer_state
        for header in headers:
            if header.producer_id >= 0:
                duplicate = producer_state.check_batch(header, origin)
                if duplicate is not None:
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, self.log.log_start_offset)
        result = self.log.append(data, headers, partition_leader_epoch=self.assignment.leader_epoch)
        base_offset = result.first_offset
        for header in headers:
            if header.producer_id >= 0:
                producer_state.record_batch(header._replace(base_offset=base_offset))
            base_offset += header.last_offset_delta + 1
        self._appended()
        return result

    def write_transaction_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                                 coordinator_epoch: int) -> CompletedTransaction | None:
        """Append a COMMIT or ABORT control batch for the producer; the transaction it closed here, if any."""
        producer_state = self.log.producer_state
        producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        timestamp = time.time_ns() // 1_000_000
        data = encode_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, timestamp)
        result = self.log.append(data, [parse_header(data)], partition_leader_epoch=self.assignment.leader_epoch)
        completed = producer_state.record_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                                 result.first_offset, timestamp)
        if completed is not None and completed.aborted:
            self.log.segments[-1].transaction_index.append(producer_state.aborted_entry(completed))
        self._appended()
        return completed

    def _appended(self) -> None:
        if self.isr_is_self:
            self.high_watermark = self.log.log_end_offset
        self.wake()

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
