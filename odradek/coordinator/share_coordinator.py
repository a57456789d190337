"""The share-group coordinator of one node: the asyncio edge around share_group.py and share_partition.py.

It owns what the plain code must not: the share groups by id, the share-partitions by (group, topic id, partition)
and the share sessions by (group, member) (ShareFetch's session epochs, Kafka's ShareSessionCache), one timer set to
the next deadline (a member's session, a record's lock), the waiters of ShareFetch long polls (woken by an append
to a fetched partition or by records coming back), and __share_group_state (share_state.py). Every change of a
share-partition's state (an acquisition, which counts a delivery, an acknowledgement, a release) is written there as
a snapshot before the request that made it is answered, so an acknowledged record is never delivered again after a
restart or kill -9, and a delivery is counted against the limit even when the broker dies with the record acquired.
A share-partition is read back from the state topic the first time it is used after a start; one never seen starts
where the group's share.auto.offset.reset puts it (the log end by default). A group's configs (share_configs.py,
kept in the catalogue) give its share-partitions their lock duration and delivery limit, also when they change.

Membership is not persisted (a member of a broker that restarted hears UNKNOWN_MEMBER_ID and joins again); a
share group with state but no member since the start is found by reading the whole state topic once, when an
administrative request or ListGroups first asks (`group`, `group_ids`). AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups change only a group without members.

A share group's id is in the same namespace as the other groups: a heartbeat for the id of a classic or consumer
group is refused with GROUP_ID_NOT_FOUND, as Kafka refuses it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from odradek.clock import now_ms
from odradek.cluster.append_waits import next_change, resolve
from odradek.coordinator.assignors import TopicInfo
from odradek.coordinator.share_configs import ShareGroupSettings, settings
from odradek.coordinator.share_group import ShareGroup, ShareHeartbeatResult
from odradek.coordinator.share_partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, SharePartition
from odradek.coordinator.share_state import (SHARE_STATE_TOPIC, SNAPSHOT_TYPE, parse_record, snapshot_record,
                                             state_partition_for, tombstone)
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import Record, decode_batch, encode_batch, validate_batches

Key = tuple[str, uuid.UUID, int]
STATE_NAMES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}


@dataclasses.dataclass
class ShareSession:
    epoch: int  # the epoch the next request must carry
    partitions: set[tuple[uuid.UUID, int]]


class ShareCoordinator:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.session_timeout_ms = config["group.share.session.timeout.ms"]
        self.heartbeat_interval_ms = config["group.share.heartbeat.interval.ms"]
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._stored: dict[int, dict[Key, tuple[int, list]]] = {}  # state partition -> what it holds, once read
        self._snapshot_epochs: dict[Key, int] = {}
        self._created_ms: dict[Key, int] = {}
        self._waiters: set[asyncio.Future] = set()
        self._timer: asyncio.TimerHandle | None = None

    def settings(self, group_id: str) -> ShareGroupSettings:
        """What the group runs with: its group configs over the broker's (share_configs.py)."""
        return settings(self.broker.metadata.group_configs.get(group_id, {}), self.broker.config)

    def _limits(self, group_id: str) -> dict:
        group = self.settings(group_id)
        return dict(lock_duration_ms=group.lock_duration_ms, delivery_limit=group.delivery_limit,
                    max_locks=self.broker.config["group.share.partition.max.record.locks"])

    def configs_changed(self, group_id: str) -> None:
        """The group's configs were altered: its share-partitions take the new lock duration and delivery limit
        (a record acquired already keeps its lock's deadline)."""
        limits = self._limits(group_id)
        for key, partition in self.partitions.items():
            if key[0] == group_id:
                partition.lock_duration_ms, partition.delivery_limit = (limits["lock_duration_ms"],
                                                                        limits["delivery_limit"])

    @property
    def num_state_partitions(self) -> int:
        topic = self.broker.metadata.topics.get(SHARE_STATE_TOPIC)
        return len(topic.partitions) if topic is not None else \
            self.broker.config["share.coordinator.state.topic.num.partitions"]

    # ------------------------------------------------------------------------------------------ membership
    def heartbeat(self, group_id: str, *, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str, client_host: str) -> ShareHeartbeatResult:
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID)
        if group_id in self.broker.group_coordinator.groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = ShareGroup(group_id, session_timeout_ms=self.session_timeout_ms,
                                                       heartbeat_interval_ms=self.heartbeat_interval_ms,
                                                       now_ms=now_ms())
        result = group.heartbeat(member_id=member_id, member_epoch=member_epoch, rack_id=rack_id,
                                 subscribed_topic_names=subscribed_topic_names, topics=self.topic_catalogue(),
                                 client_id=client_id, client_host=client_host, now_ms=now_ms())
        if result.member_epoch < 0:
            self._member_gone(group_id, member_id)
        self._arm_timer()
        return result

    def topic_catalogue(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(t.topic_id, len(t.partitions)) for name, t in self.broker.metadata.topics.items()
                if not name.startswith("__")}

    def _member_gone(self, group_id: str, member_id: str) -> None:
        """Its session closes and every record it held comes back."""
        self.sessions.pop((group_id, member_id), None)
        for key, partition in self.partitions.items():
            if key[0] == group_id and partition.release_member(member_id):
                self.persist(key)
        self._wake()

    # -------------------------------------------------------------------------------------------- sessions
    def session(self, group_id: str, member_id: str, epoch: int,
                added: list[tuple[uuid.UUID, int]], forgotten: list[tuple[uuid.UUID, int]]) -> ShareSession | None:
        """The session a ShareFetch/ShareAcknowledge at `epoch` runs in (None when it closes it): epoch 0 opens
        one (replacing the member's), -1 closes it, any other must be the next of the session's."""
        if not group_id or not member_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set.")
        key = (group_id, member_id)
        if epoch == 0:
            session = self.sessions[key] = ShareSession(1, set(added))
            return session
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND, "The share session was not found.")
        if epoch == -1:
            del self.sessions[key]
            return None
        if epoch != session.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"The share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.partitions.update(added)
        session.partitions.difference_update(forgotten)
        return session

    # -------------------------------------------------------------------------------------- share-partitions
    def share_partition(self, group_id: str, topic_id: uuid.UUID, index: int, leader) -> SharePartition:
        """The share-partition of the group on partition `leader` (a cluster Partition): as stored, else new where
        the group's share.auto.offset.reset puts it."""
        key = (group_id, topic_id, index)
        partition = self.partitions.get(key)
        if partition is None:
            stored = self._stored_states(state_partition_for(group_id, topic_id, index,
                                                             self.num_state_partitions)).get(key)
            if stored is None:
                partition = SharePartition(self._reset_offset(group_id, leader), **self._limits(group_id))
                self._created_ms[key] = now_ms()
            else:
                partition = SharePartition.restored(stored[0], stored[1], **self._limits(group_id))
            self.partitions[key] = partition
        return partition

    def _reset_offset(self, group_id: str, leader) -> int:
        """Where a share-partition without state starts (share.auto.offset.reset): the high watermark (latest),
        the log start (earliest), or the first record at most the duration old (by_duration; the high watermark
        when there is none)."""
        group = self.settings(group_id)
        if group.auto_offset_reset == "earliest":
            return leader.log.log_start_offset
        duration = group.reset_duration_ms
        if duration is not None:
            found = leader.log.offset_for_timestamp(now_ms() - duration)
            if found is not None:
                return min(found[0], leader.high_watermark)
        return leader.high_watermark

    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                    batches: list[tuple[int, int, list[int]]], leader) -> None:
        """Apply a partition's acknowledgement batches and persist them; INVALID_RECORD_STATE (and the batches
        before the failing one applied) as Kafka answers a batch naming records this member does not hold."""
        partition = self.share_partition(group_id, topic_id, index, leader)
        now = now_ms()
        try:
            for first, last, types in batches:
                partition.acknowledge(member_id, first, last, types, now)
        finally:
            self.persist((group_id, topic_id, index))
            self._wake()
            self._arm_timer()

    def acquired(self, key: Key) -> None:
        """A fetch acquired records of this share-partition: persist the delivery counts, arm the lock timer."""
        self.persist(key)
        self._arm_timer()

    def persist(self, key: Key) -> None:
        partition = self.partitions[key]
        group_id, topic_id, index = key
        self._snapshot_epochs[key] = epoch = self._snapshot_epochs.get(key, -1) + 1
        now = now_ms()
        record = snapshot_record(group_id, topic_id, index, start_offset=partition.start_offset,
                                 batches=partition.state_batches(), snapshot_epoch=epoch,
                                 create_ms=self._created_ms.setdefault(key, now), write_ms=now)
        self._write(key, [record])

    def delete_state(self, key: Key) -> None:
        self.partitions.pop(key, None)
        self._write(key, [tombstone(*key)])

    def ensure_state_topic(self) -> None:
        self.broker.ensure_internal_topic(SHARE_STATE_TOPIC, self.broker.config[
            "share.coordinator.state.topic.num.partitions"], {
            "cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(self.broker.config["share.coordinator.state.topic.segment.bytes"])},
            "share.coordinator.state.topic.replication.factor")

    def _write(self, key: Key, records: list[tuple[bytes, bytes | None]]) -> None:
        self.ensure_state_topic()
        index = state_partition_for(*key, self.num_state_partitions)
        now = now_ms()
        data = encode_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)])
        self.broker.partition(SHARE_STATE_TOPIC, index).append(data, validate_batches(data))
        if index in self._stored:
            if records[-1][1] is None:
                self._stored[index].pop(key, None)
            else:
                partition = self.partitions[key]
                self._stored[index][key] = (partition.start_offset, partition.state_batches())

    def _stored_states(self, index: int) -> dict[Key, tuple[int, list]]:
        """The share-partition states partition `index` of the state topic holds, read once after a start."""
        stored = self._stored.get(index)
        if stored is not None:
            return stored
        stored = self._stored[index] = {}
        if SHARE_STATE_TOPIC not in self.broker.metadata.topics:
            return stored
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
                    stored.pop(parsed.key, None)
                elif parsed.kind == SNAPSHOT_TYPE:
                    stored[parsed.key] = (parsed.start_offset, parsed.batches)
                    self._snapshot_epochs[parsed.key] = parsed.snapshot_epoch
                elif parsed.key in stored:  # a ShareUpdate over the snapshot before it
                    start, batches = stored[parsed.key]
                    merged = {o: (s, c) for f, la, s, c in batches for o in range(f, la + 1)}
                    merged.update({o: (s, c) for f, la, s, c in parsed.batches for o in range(f, la + 1)})
                    start = max(start, parsed.start_offset)
                    stored[parsed.key] = (start, [(o, o, s, c) for o, (s, c) in sorted(merged.items())])
        return stored

    # ------------------------------------------------------------------------------------ administration
    def group(self, group_id: str) -> ShareGroup | None:
        """The share group, also one with no members since the start that has share-partition state."""
        self._load_every_state()
        return self.groups.get(group_id)

    def group_ids(self) -> list[str]:
        self._load_every_state()
        return sorted(self.groups)

    def state_keys(self, group_id: str) -> list[Key]:
        """The share-partitions of the group with state, in memory or in the state topic."""
        self._load_every_state()
        keys = {key for key in self.partitions if key[0] == group_id}
        for stored in self._stored.values():
            keys.update(key for key in stored if key[0] == group_id)
        return sorted(keys, key=lambda key: (str(key[1]), key[2]))

    def start_offset(self, key: Key) -> int:
        """The share-partition's start offset; -1 when it has no state."""
        partition = self.partitions.get(key)
        if partition is not None:
            return partition.start_offset
        stored = self._stored_states(state_partition_for(*key, self.num_state_partitions)).get(key)
        return stored[0] if stored is not None else -1

    def in_flight_done(self, key: Key) -> int:
        """Records past the start offset that are done already (acknowledged or archived): not part of the lag."""
        partition = self.partitions.get(key)
        if partition is None:
            stored = self._stored_states(state_partition_for(*key, self.num_state_partitions)).get(key)
            batches = stored[1] if stored is not None else []
            return sum(last - first + 1 for first, last, state, _ in batches if state in (ACKNOWLEDGED, ARCHIVED))
        return sum(1 for record in partition.records.values() if record.state in (ACKNOWLEDGED, ARCHIVED))

    def alter_offsets(self, group_id: str, starts: dict[tuple[uuid.UUID, int], int]) -> None:
        """New start offsets (AlterShareGroupOffsets): an empty group's share-partitions start again there, their
        in-flight state dropped; a group not known yet is made, empty, as Kafka makes it."""
        group = self._empty_group(group_id, create=True)
        for (topic_id, index), start in starts.items():
            key = (group_id, topic_id, index)
            self.partitions[key] = SharePartition(start, **self._limits(group_id))
            self._created_ms[key] = now_ms()
            self.persist(key)
        group.state_timestamp_ms = now_ms()

    def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> None:
        """Forget the state of every partition of the topic (DeleteShareGroupOffsets): tombstones."""
        self._empty_group(group_id)
        for key in self.state_keys(group_id):
            if key[1] == topic_id:
                self.delete_state(key)

    def delete_group(self, group_id: str) -> None:
        self._empty_group(group_id)
        for key in self.state_keys(group_id):
            self.delete_state(key)
        del self.groups[group_id]

    def partition_views(self):
        """(group, topic id, partition, start offset, records in flight by state name) of every share-partition in
        memory, for the metrics."""
        for (group_id, topic_id, index), partition in list(self.partitions.items()):
            counts = {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
            for record in partition.records.values():
                counts[STATE_NAMES[record.state]] += 1
            yield group_id, topic_id, index, partition.start_offset, counts

    def _empty_group(self, group_id: str, create: bool = False) -> ShareGroup:
        group = self.group(group_id)
        if group is None:
            if not create:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            if group_id in self.broker.group_coordinator.groups:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            group = self.groups[group_id] = ShareGroup(group_id, session_timeout_ms=self.session_timeout_ms,
                                                       heartbeat_interval_ms=self.heartbeat_interval_ms,
                                                       now_ms=now_ms())
        if group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, f"Group {group_id} has active members.")
        return group

    def _load_every_state(self) -> None:
        """Every partition of the state topic read (once), and an empty group made for each group it holds."""
        if SHARE_STATE_TOPIC not in self.broker.metadata.topics:
            return
        for index in range(self.num_state_partitions):
            for group_id, _, _ in self._stored_states(index):
                if group_id not in self.groups:
                    self.groups[group_id] = ShareGroup(group_id, session_timeout_ms=self.session_timeout_ms,
                                                       heartbeat_interval_ms=self.heartbeat_interval_ms,
                                                       now_ms=now_ms())

    # ------------------------------------------------------------------------------------ waits and timers
    async def wait_for_change(self, partitions, timeout_s: float) -> None:
        """Until one of `partitions` (cluster Partitions) appends, records come back, or `timeout_s` passes."""
        woken = asyncio.get_running_loop().create_future()
        self._waiters.add(woken)
        try:
            await next_change(partitions, timeout_s, woken=woken)
        finally:
            self._waiters.discard(woken)

    def _wake(self) -> None:
        for waiter in list(self._waiters):
            resolve(waiter)

    def stop(self) -> None:
        """The broker stops: no more timers (lock expiries, member sessions), every long poll answers now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake()

    def _arm_timer(self) -> None:
        deadlines = [m.session_deadline_ms for g in self.groups.values() for m in g.members.values()]
        deadlines += [d for d in (p.next_lock_deadline() for p in self.partitions.values()) if d is not None]
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if deadlines:
            delay = max(0.0, (min(deadlines) - now_ms()) / 1000)
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = now_ms()
        for group in self.groups.values():
            for member_id in group.expired_members(now):
                group.remove(member_id, now)
                self._member_gone(group.group_id, member_id)
        expired = [key for key, partition in self.partitions.items() if partition.expire_locks(now)]
        for key in expired:
            self.persist(key)
        if expired:
            self._wake()
        self._arm_timer()
