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
import functools
import logging
import uuid

from odradek.clock import now_ms
from odradek.cluster.append_waits import next_change, resolve
from odradek.cluster.peer import PeerPool
from odradek.coordinator.assignors import TopicInfo
from odradek.coordinator.share_configs import ShareGroupSettings, settings
from odradek.coordinator.share_group import ShareGroup, ShareHeartbeatResult
from odradek.coordinator.share_partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, SharePartition
from odradek.coordinator.share_persister import SharePersister, Summary
from odradek.coordinator.share_state_coordinator import ShareStateCoordinator
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

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
        self.state = ShareStateCoordinator(broker)  # the state partitions this broker leads
        # one kept connection per other broker: the state writes to its share coordinator, a group's lag
        self.peers = PeerPool(lambda: broker.inter_broker, self._live_endpoint,
                              client_id=f"broker-{broker.node_id}-share-coordinator",
                              timeout=config["request.timeout.ms"] / 1000)
        self.persister = SharePersister(broker, self.state, self.peers)  # the state, wherever it is kept
        self._epochs: dict[Key, tuple[int, int]] = {}  # share-partition -> (state epoch, leader epoch) it was read at
        self._loading: dict[Key, asyncio.Future] = {}
        self._locks: dict[Key, asyncio.Lock] = {}  # one state write of a share-partition at a time
        self._changes: dict[Key, int] = {}  # writes asked for, per share-partition
        self._written: dict[Key, int] = {}  # the last of those a finished write covered
        self._tasks: set[asyncio.Task] = set()
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

    # ------------------------------------------------------------------------------------------ membership
    def heartbeat(self, group_id: str, *, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str, client_host: str) -> ShareHeartbeatResult:
        self.broker.group_coordinator.check_available(group_id)  # INVALID_GROUP_ID, NOT_COORDINATOR...
        if group_id in self.broker.group_coordinator.groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = self._new_group(group_id)
        result = group.heartbeat(member_id=member_id, member_epoch=member_epoch, rack_id=rack_id,
                                 subscribed_topic_names=subscribed_topic_names, topics=self.topic_catalogue(),
                                 client_id=client_id, client_host=client_host, now_ms=now_ms())
        if result.member_epoch < 0:
            self._member_gone(group_id, member_id)
        else:
            self.record_topics(group_id, {t for m in group.members.values() for t, p in m.assigned.items() if p})
        self._arm_timer()
        return result

    def topic_catalogue(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(t.topic_id, len(t.partitions)) for name, t in self.broker.metadata.topics.items()
                if not name.startswith("__")}

    def _member_gone(self, group_id: str, member_id: str) -> None:
        """Its session closes and every record it held here comes back (in a cluster, those it held on partitions
        other brokers lead come back there when their share session closes or their locks expire)."""
        self.sessions.pop((group_id, member_id), None)
        self._release(group_id, member_id)

    def _release(self, group_id: str, member_id: str) -> None:
        for key, partition in list(self.partitions.items()):
            if key[0] == group_id and partition.release_member(member_id):
                self._persist_later(key)
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
        if epoch == -1:  # the member closes its session: what it holds here is released, as Kafka releases it
            del self.sessions[key]
            self._release(group_id, member_id)
            return None
        if epoch != session.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"The share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.partitions.update(added)
        session.partitions.difference_update(forgotten)
        return session

    # -------------------------------------------------------------------------------------- share-partitions
    async def share_partition(self, group_id: str, topic_id: uuid.UUID, index: int, leader) -> SharePartition:
        """The share-partition of the group on partition `leader` (a cluster Partition this broker leads): in memory
        when it was read in the leader's current epoch, else read from the share state (share_persister.py) or,
        with none, made where the group's share.auto.offset.reset puts it and written there at once (so a start
        at the log end is not moved by a restart). Loaded once however many requests ask at the same time."""
        key = (group_id, topic_id, index)
        partition = self.partitions.get(key)
        if partition is not None and self._epochs[key][1] == leader.leader_epoch:
            return partition
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(self._load(key, leader))
            loading.add_done_callback(functools.partial(self._loaded, key))
        return await asyncio.shield(loading)

    async def refresh(self, group_id: str, partitions) -> None:
        """A share session opens on these (topic id, partition)s: a share-partition held here whose stored state
        epoch is no longer the one it was read at, or whose state is gone, is dropped, to be read again at its
        next use. In a cluster AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups change the state
        from the group's coordinator; a share-partition leader with nothing in flight writes nothing, so no
        fenced write would ever tell it, and it went on delivering from its old start offset (or nothing)."""
        for topic_id, index in partitions:
            key = (group_id, topic_id, index)
            if key not in self.partitions or key in self._loading:
                continue
            try:
                summary = await self.persister.summary(key)
            except KafkaError:  # the share coordinator is away: a stale state epoch still fences the next write
                continue
            held = self._epochs.get(key)
            if held is not None and (summary is None or summary.state_epoch != held[0]):
                self._forget(key)

    def _loaded(self, key: Key, done: asyncio.Future) -> None:
        if self._loading.get(key) is done:
            del self._loading[key]
        if not done.cancelled():
            done.exception()  # retrieved here too: every request that waited may have been cancelled

    async def _load(self, key: Key, leader) -> SharePartition:
        group_id = key[0]
        epoch = leader.leader_epoch
        stored = await self.persister.read(key, epoch)
        if stored is None:
            partition = SharePartition(self._reset_offset(group_id, leader), **self._limits(group_id))
            state_epoch = 0
        else:
            partition = SharePartition.restored(stored.start_offset, stored.batches, **self._limits(group_id))
            state_epoch = stored.state_epoch
        self.partitions[key], self._epochs[key] = partition, (state_epoch, epoch)
        if stored is None:
            await self.persist(key)
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

    async def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                          batches: list[tuple[int, int, list[int]]], leader) -> None:
        """Apply a partition's acknowledgement batches once their state is written; INVALID_RECORD_STATE (and the
        batches before the failing one applied) as Kafka answers a batch naming records this member does not hold.
        A failed write leaves the records acquired, as they were (the share-partition's `roll_back`)."""
        key = (group_id, topic_id, index)
        partition = await self.share_partition(group_id, topic_id, index, leader)
        now = now_ms()
        refused = None
        pending: list[int] = []
        try:
            for first, last, types in batches:
                pending += partition.acknowledge(member_id, first, last, types, now)
        except KafkaError as exc:
            refused = exc
        try:
            await self.persist(key)
            if self.partitions.get(key) is not partition:  # dropped by another write fenced meanwhile, or read again
                raise KafkaError(ErrorCode.FENCED_STATE_EPOCH, "The share-partition's state was read again.")
        except BaseException:
            partition.roll_back(pending)
            raise
        else:
            partition.complete(pending)
        finally:
            self._wake()
            self._arm_timer()
        if refused is not None:
            raise refused

    async def acquired(self, key: Key) -> None:
        """A fetch acquired records of this share-partition: persist the delivery counts (before the records are
        answered), arm the lock timer."""
        self._arm_timer()
        await self.persist(key)

    async def persist(self, key: Key) -> None:
        """Write the share-partition's state as it is now (its start offset, and each record above it), once the
        writes asked before are done; a write asked while another was under way is covered by the next one, which
        carries every change before it. A write fenced by a newer leader or state epoch drops the share-partition
        here (it is read again when next asked for) and raises."""
        self._changes[key] = change = self._changes.get(key, 0) + 1
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            partition = self.partitions.get(key)
            if partition is None or self._written.get(key, 0) >= change:
                return
            covered = self._changes.get(key, change)  # (forgotten meanwhile: a share-partition read again)
            state_epoch, leader_epoch = self._epochs[key]
            start_offset, batches = partition.state()
            try:
                await self.persister.write(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                           start_offset=start_offset, batches=batches)
            except KafkaError as exc:
                if exc.code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH) \
                        and self.partitions.get(key) is partition:
                    self._forget(key)
                raise
            self._written[key] = max(self._written.get(key, 0), covered)

    def _persist_later(self, key: Key) -> None:
        """Persist from a timer (a lock expired, a member left): nobody waits on it, failures are logged."""
        task = asyncio.get_running_loop().create_task(self.persist(key))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("writing share-partition state failed: %s", task.exception())

    def _forget(self, key: Key) -> None:
        for table in (self.partitions, self._epochs, self._changes, self._written, self._locks):
            table.pop(key, None)

    # ------------------------------------------------------------------------------------ administration
    def coordinates(self, group_id: str) -> bool:
        try:
            self.broker.group_coordinator.check_available(group_id)
        except KafkaError:
            return False
        return True

    def group(self, group_id: str) -> ShareGroup | None:
        """The share group, also one with no members since this coordinator took it that has state (its topics
        are recorded in __consumer_offsets: GroupCoordinator.share_topics)."""
        group = self.groups.get(group_id)
        if group is None and group_id in self.broker.group_coordinator.share_topics:
            group = self.groups[group_id] = self._new_group(group_id)
        return group

    def group_ids(self) -> list[str]:
        """The share groups this broker coordinates."""
        return sorted(g for g in set(self.groups) | set(self.broker.group_coordinator.share_topics)
                      if self.coordinates(g) and self.group(g) is not None)

    def record_topics(self, group_id: str, topic_ids) -> None:
        """Record (once) that the group has, or is about to have, state on these topics."""
        known = self.broker.group_coordinator.share_topics.get(group_id, {})
        by_id = self.broker.metadata.topics_by_id
        if set(topic_ids) <= set(known):
            return
        topics = {t: (by_id[t].name, len(by_id[t].partitions)) for t in set(known) | set(topic_ids) if t in by_id}
        self.broker.group_coordinator.record_share_topics(group_id, topics)

    async def states(self, group_id: str, topic_ids=None) -> dict[Key, Summary]:
        """The share-partitions of the group with state (of `topic_ids`, or of every topic it has state on), and
        their summaries from the share state."""
        recorded = set(self.broker.group_coordinator.share_topics.get(group_id, {}))
        by_id = self.broker.metadata.topics_by_id
        out = {}
        for topic_id in sorted(recorded if topic_ids is None else set(topic_ids) & recorded, key=str):
            if topic_id not in by_id:
                continue
            for index in range(len(by_id[topic_id].partitions)):
                key = (group_id, topic_id, index)
                summary = await self.persister.summary(key)
                if summary is not None:
                    out[key] = summary
        return out

    async def summary(self, key: Key) -> Summary | None:
        return await self.persister.summary(key)

    async def alter_offsets(self, group_id: str, starts: dict[tuple[uuid.UUID, int], int]) -> None:
        """New start offsets (AlterShareGroupOffsets): an empty group's share-partitions start again there, their
        in-flight state dropped (a new state epoch fences the state a partition's leader still holds); a group not
        known yet is made, empty, as Kafka makes it."""
        group = self._empty_group(group_id, create=True)
        self.record_topics(group_id, {topic_id for topic_id, _ in starts})
        for (topic_id, index), start in starts.items():
            key = (group_id, topic_id, index)
            summary = await self.persister.summary(key)
            await self.persister.initialize(key, state_epoch=summary.state_epoch + 1 if summary else 0,
                                            start_offset=start)
            self._forget(key)
        group.state_timestamp_ms = now_ms()

    async def delete_offsets(self, group_id: str, topic_id: uuid.UUID) -> None:
        """Forget the state of every partition of the topic (DeleteShareGroupOffsets)."""
        self._empty_group(group_id)
        for key in await self.states(group_id, {topic_id}):
            await self.persister.delete(key)
            self._forget(key)
        known = self.broker.group_coordinator.share_topics.get(group_id, {})
        if topic_id in known:
            by_id = self.broker.metadata.topics_by_id
            self.broker.group_coordinator.record_share_topics(group_id, {
                t: (by_id[t].name, len(by_id[t].partitions)) for t in known if t != topic_id and t in by_id})

    async def delete_group(self, group_id: str) -> None:
        self._empty_group(group_id)
        for key in await self.states(group_id):
            await self.persister.delete(key)
            self._forget(key)
        if group_id in self.broker.group_coordinator.share_topics:
            self.broker.group_coordinator.record_share_topics(group_id, None)
        self.groups.pop(group_id, None)

    def partition_views(self):
        """(group, topic id, partition, start offset, records in flight by state name) of every share-partition in
        memory, for the metrics."""
        for (group_id, topic_id, index), partition in list(self.partitions.items()):
            counts = {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
            for record in partition.records.values():
                counts[STATE_NAMES[record.state]] += 1
            yield group_id, topic_id, index, partition.start_offset, counts

    def _new_group(self, group_id: str) -> ShareGroup:
        return ShareGroup(group_id, session_timeout_ms=self.session_timeout_ms,
                          heartbeat_interval_ms=self.heartbeat_interval_ms, now_ms=now_ms())

    def _empty_group(self, group_id: str, create: bool = False) -> ShareGroup:
        group = self.group(group_id)
        if group is None:
            if not create:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            if group_id in self.broker.group_coordinator.groups:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            group = self.groups[group_id] = self._new_group(group_id)
        if group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, f"Group {group_id} has active members.")
        return group

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

    def _live_endpoint(self, node_id: int):
        return next((b for b in self.broker.membership.live_brokers() if b.node_id == node_id), None)

    def stop(self) -> None:
        """The broker stops: no more timers (lock expiries, member sessions), every long poll answers now."""
        self.peers.close()
        for task in self._tasks:
            task.cancel()
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
            self._persist_later(key)
        if expired:
            self._wake()
        self._arm_timer()
