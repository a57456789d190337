"""The share coordinator's state side: the share-partition states kept in the __share_group_state partitions this
broker leads, and the five state operations of KIP-932 on them, with Kafka's fencing.

A share-partition's leader (the broker leading the data partition: share_coordinator.py) keeps the state it must not
lose (the start offset, and above it each record's delivery state and count) here, through share_persister.py,
which calls this object directly when this broker leads the state partition and sends WriteShareGroupState & co.
(handlers/share_state.py) to the broker that does otherwise: the way Kafka's ShareCoordinatorShard keeps it. Every
change is written as a snapshot record (share_state.py) to the state partition and answered only once the partition's
in-sync replicas have it (the high watermark is past it), so a state partition's new leader, which reads the
partition back on first use, has every state acknowledged before. Reading is done once per state partition and
leadership term (its leader epoch): a broker that loses and regains a state partition reads it again.

Fencing, as Kafka's: a write or read with a leader epoch below the one stored is FENCED_LEADER_EPOCH (a data
partition's former leader still writing), a write with a state epoch below the stored one FENCED_STATE_EPOCH (a
share-partition whose offsets an administrator has reset since: InitializeShareGroupState raises the state epoch);
a read with a newer leader epoch stores it (the new leader has taken over), so the old leader is fenced from then.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from odradek.clock import now_ms
from odradek.cluster.append_waits import until_replicated
from odradek.coordinator.share_state import (SHARE_STATE_TOPIC, SNAPSHOT_TYPE, delivery_complete_count,
                                             merge_batches, parse_record, snapshot_record, state_partition_for,
                                             tombstone)
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import Record, decode_batch, encode_batch, validate_batches

Key = tuple[str, uuid.UUID, int]
Batches = list[tuple[int, int, int, int]]


@dataclasses.dataclass
class StoredState:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: Batches
    snapshot_epoch: int = 0
    create_ms: int = 0

    @property
    def delivery_complete_count(self) -> int:
        return delivery_complete_count(self.batches)


class ShareStateCoordinator:
    def __init__(self, broker):
        self.broker = broker
        self._loaded: dict[int, tuple[int, dict[Key, StoredState]]] = {}  # index -> (leader epoch, states)

    @property
    def num_partitions(self) -> int:
        topic = self.broker.metadata.topics.get(SHARE_STATE_TOPIC)
        return len(topic.partitions) if topic is not None else \
            self.broker.config["share.coordinator.state.topic.num.partitions"]

    def partition_for(self, key: Key) -> int:
        return state_partition_for(*key, self.num_partitions)

    def ensure_topic(self) -> None:
        """__share_group_state with Kafka's topic configs for it (ShareCoordinatorService's: compacted, compression
        of the producer, share.coordinator.state.topic.segment.bytes) and min.insync.replicas =
        share.coordinator.state.topic.min.isr in a cluster (1 on a single node, whose replication factor is 1)."""
        config = self.broker.config
        min_isr = 1 if self.broker.controller is None else config["share.coordinator.state.topic.min.isr"]
        self.broker.ensure_internal_topic(SHARE_STATE_TOPIC, config["share.coordinator.state.topic.num.partitions"], {
            "cleanup.policy": "compact", "compression.type": "producer", "min.insync.replicas": str(min_isr),
            "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"])},
            "share.coordinator.state.topic.replication.factor")

    # ------------------------------------------------------------------------------------------ operations
    def read(self, key: Key, leader_epoch: int) -> tuple[StoredState | None, object]:
        """The state (None when there is none) and what to await before answering: a newer leader epoch is stored
        first (ReadShareGroupState); FENCED_LEADER_EPOCH for an older one."""
        states = self._states(key)
        stored = states.get(key)
        if stored is None or leader_epoch == -1 or leader_epoch == stored.leader_epoch:
            return stored, None
        if leader_epoch < stored.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, f"Leader epoch {leader_epoch} is older than "
                             f"{stored.leader_epoch}, the share-partition's.")
        stored.leader_epoch = leader_epoch
        return stored, self._store(key, stored)

    def summary(self, key: Key) -> StoredState | None:
        """ReadShareGroupStateSummary: the state, never fenced (the group coordinator asks on an admin's behalf)."""
        return self._states(key).get(key)

    def write(self, key: Key, *, state_epoch: int, leader_epoch: int, start_offset: int, batches: Batches):
        """WriteShareGroupState: the batches written over the stored ones, the start offset moved (-1: kept). An
        awaitable of the error, None once the in-sync replicas have it."""
        states = self._states(key)
        stored = states.get(key)
        if stored is None:
            stored = states[key] = StoredState(state_epoch, leader_epoch, max(start_offset, 0), [],
                                               create_ms=now_ms())
        else:
            if leader_epoch != -1 and leader_epoch < stored.leader_epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH, f"Leader epoch {leader_epoch} is older than "
                                 f"{stored.leader_epoch}, the share-partition's.")
            if state_epoch < stored.state_epoch:
                raise KafkaError(ErrorCode.FENCED_STATE_EPOCH, f"State epoch {state_epoch} is older than "
                                 f"{stored.state_epoch}, the share-partition's.")
            if leader_epoch != -1:
                stored.leader_epoch = leader_epoch
            stored.state_epoch = state_epoch
            if start_offset >= 0:
                stored.start_offset = start_offset
        stored.batches = merge_batches(stored.batches, batches, stored.start_offset)
        return self._store(key, stored)

    def initialize(self, key: Key, *, state_epoch: int, start_offset: int):
        """InitializeShareGroupState: the share-partition starts again at `start_offset` with no records in flight
        and the new state epoch (FENCED_STATE_EPOCH unless it is above the stored one)."""
        states = self._states(key)
        stored = states.get(key)
        if stored is not None and state_epoch <= stored.state_epoch:
            raise KafkaError(ErrorCode.FENCED_STATE_EPOCH, f"State epoch {state_epoch} is not above "
                             f"{stored.state_epoch}, the share-partition's.")
        states[key] = stored = StoredState(state_epoch, -1, start_offset, [], create_ms=now_ms(),
                                           snapshot_epoch=stored.snapshot_epoch if stored else 0)
        return self._store(key, stored)

    def delete(self, key: Key):
        """DeleteShareGroupState: a tombstone (the compacted topic then forgets the key)."""
        states = self._states(key)
        if states.pop(key, None) is None:
            return None
        return self._append(self.partition_for(key), [tombstone(*key)])

    # ---------------------------------------------------------------------------------- the state partitions
    def _states(self, key: Key) -> dict[Key, StoredState]:
        """The states of the key's state partition; NOT_COORDINATOR (& co.) when another broker leads it, and as
        Kafka's ShareCoordinatorShard INVALID_REQUEST for a negative partition, UNKNOWN_TOPIC_OR_PARTITION for a
        share-partition of a partition the cluster does not have."""
        if key[2] < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "The partition id must not be negative.")
        self.ensure_topic()
        if SHARE_STATE_TOPIC not in self.broker.metadata.topics:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} is being created.")
        index = self.partition_for(key)
        self.broker.check_coordinator_partition(SHARE_STATE_TOPIC, index)
        topic = self.broker.metadata.topics_by_id.get(key[1])
        if topic is None or key[2] >= len(topic.partitions):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        epoch = self.broker.partitions[(SHARE_STATE_TOPIC, index)].leader_epoch
        loaded = self._loaded.get(index)
        if loaded is None or loaded[0] != epoch:
            loaded = self._loaded[index] = (epoch, self._read_partition(index))
        return loaded[1]

    def _read_partition(self, index: int) -> dict[Key, StoredState]:
        states: dict[Key, StoredState] = {}
        for header, batch in self.broker.partition(SHARE_STATE_TOPIC, index).log.iter_batches():
            if header.is_control:
                continue
            for record in decode_batch(batch)[1]:
                if record.key is None:
                    continue
                parsed = parse_record(record.key, record.value)
                if parsed is None:
                    continue
                if parsed.deleted:
                    states.pop(parsed.key, None)
                elif parsed.kind == SNAPSHOT_TYPE:
                    states[parsed.key] = StoredState(parsed.state_epoch, parsed.leader_epoch, parsed.start_offset,
                                                     parsed.batches, parsed.snapshot_epoch)
                elif parsed.key in states:  # a ShareUpdate over the snapshot before it
                    stored = states[parsed.key]
                    stored.start_offset = max(stored.start_offset, parsed.start_offset)
                    stored.batches = merge_batches(stored.batches, parsed.batches, stored.start_offset)
                    stored.leader_epoch = max(stored.leader_epoch, parsed.leader_epoch)
        return states

    def _store(self, key: Key, stored: StoredState):
        stored.snapshot_epoch += 1
        record = snapshot_record(*key, start_offset=stored.start_offset, batches=stored.batches,
                                 snapshot_epoch=stored.snapshot_epoch, create_ms=stored.create_ms or now_ms(),
                                 write_ms=now_ms(), state_epoch=stored.state_epoch, leader_epoch=stored.leader_epoch)
        return self._append(self.partition_for(key), [record])

    def _append(self, index: int, records: list[tuple[bytes, bytes | None]]):
        """Append, then an awaitable of the error (None once the in-sync replicas have the records)."""
        partition = self.broker.partition(SHARE_STATE_TOPIC, index)
        partition.check_min_insync()
        now = now_ms()
        data = encode_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)])
        last_offset = partition.append(data, validate_batches(data)).last_offset
        if partition.high_watermark > last_offset:
            return None
        deadline = time.monotonic() + self.broker.config["offsets.commit.timeout.ms"] / 1000
        return until_replicated(lambda: self.broker.partitions.get((SHARE_STATE_TOPIC, index)), last_offset,
                                deadline)
