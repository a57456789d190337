"""The group coordinator: the asyncio edge around the plain group state machines and the offset store.

It owns what the plain code must not: the futures that hold JoinGroup/SyncGroup answers until the group moves on,
one timer per group set to that group's next deadline (session, join and revocation timeouts), the periodic
offset-retention check, and the __consumer_offsets log (created on first use, appended to on every commit and
group change, read back while those partitions answer COORDINATOR_LOAD_IN_PROGRESS). In a ZooKeeper cluster each
broker coordinates the groups of the __consumer_offsets partitions it leads, as Kafka's GroupMetadataManager: a
partition it comes to lead is loaded then, one it no longer leads has its groups forgotten, and a group of a
partition led elsewhere gets NOT_COORDINATOR (`follow_leadership`, called by the broker after every change of its
catalogue; a single node leads every partition). Handlers call the
methods here with decoded request fields and get plain results (or a future to await) back.

An offset commit is answered once its write is safe, as in Kafka 2.x (offsets.commit.required.acks=-1): the records
are appended to the group's partition, and the commit waits (up to offsets.commit.timeout.ms) until the in-sync
replicas have them; only then do the offsets take effect here and the client hears NONE. A commit acknowledged is so
on every in-sync replica, and the replica that leads the partition next loads it.

Offsets committed inside a transaction (TxnOffsetCommit) are written as the producer's transactional batch and kept
pending, invisible to OffsetFetch, until the transaction coordinator's marker reaches the group's partition
(`complete_transaction`): a commit marker makes them the group's offsets, an abort drops them. Meanwhile an
OffsetFetch with require_stable gets UNSTABLE_OFFSET_COMMIT for those partitions (KIP-447), so a read_committed
consumer does not start from the offset the transaction is replacing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable

from odradek.clock import now_ms
from odradek.cluster.append_waits import until_replicated
from odradek.config import LONG_MAX
from odradek.coordinator.assignors import TopicInfo
from odradek.coordinator.classic import (JOIN, SYNC, ClassicGroup, ClassicGroupConfig, GroupState, JoinResult,
                                         SyncResult, Wait)
from odradek.coordinator.consumer import ConsumerGroup, HeartbeatResult
from odradek.coordinator.offsets import OffsetAndMetadata, OffsetStore, TopicPartition
from odradek.coordinator.offsets_topic import (OFFSETS_TOPIC, GroupRecord, OffsetRecord, ShareTopicsRecord,
                                               group_metadata_record, offset_commit_record, parse_record,
                                               partition_count, partition_for, restore_classic_group,
                                               share_topics_record)
from odradek.errors import ErrorCode, KafkaError
from odradek.periodic import every
from odradek.records.batch import (CONTROL_COMMIT, Record, decode_batch, decode_control_record,
                                   encode_batch, parse_header, validate_batches)
from odradek.storage.producer_state import AppendOrigin

log = logging.getLogger("odradek.coordinator")

OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
LOAD_BATCHES_BETWEEN_YIELDS = 1000  # loading gives the event loop a turn this often

Group = ClassicGroup | ConsumerGroup



class GroupCoordinator:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.classic_config = ClassicGroupConfig(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"])
        self.groups: dict[str, Group] = {}
        self.share_topics: dict[str, dict[uuid.UUID, str]] = {}  # share group -> the topics it has state for
        self.offsets = OffsetStore()
        # producer id -> (group, partition) -> (offset, log offset of its record): TxnOffsetCommits awaiting markers
        self._pending_transactional_offsets: dict[int, dict[tuple[str, TopicPartition],
                                                            tuple[OffsetAndMetadata, int]]] = {}
        self._loaded: set[int] = set()
        self._leading: set[int] = set()
        self._waiters: dict[tuple[str, str, str], asyncio.Future] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: list[asyncio.Task] = []

    @property
    def num_partitions(self) -> int:
        """How many partitions the groups are spread over: those of __consumer_offsets once it exists, whatever this
        broker's offsets.topic.num.partitions says (as Kafka's partitionFor: the setting only sizes the topic it
        creates, and brokers started with different settings still agree on every group's partition)."""
        return partition_count(self.broker.metadata.topics, OFFSETS_TOPIC,
                               self.broker.config["offsets.topic.num.partitions"])

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Begin loading __consumer_offsets (if it exists) and the periodic retention check."""
        loop = asyncio.get_running_loop()
        if OFFSETS_TOPIC in self.broker.metadata.topics:
            self.follow_leadership()
        else:
            self._loaded = set(range(self.num_partitions))
        self._tasks.append(loop.create_task(every(self.broker.config["offsets.retention.check.interval.ms"], self.expire_offsets, "offset expiration")))

    async def stop(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        self._waiters.clear()

    def ensure_offsets_topic(self) -> None:
        """__consumer_offsets with Kafka's topic configs for it (GroupCoordinator's groupMetadataTopicConfigs)."""
        self.broker.ensure_internal_topic(OFFSETS_TOPIC, self.broker.config["offsets.topic.num.partitions"], {
            "cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(self.broker.config["offsets.topic.segment.bytes"])},
            "offsets.topic.replication.factor")

    def check_available(self, group_id: str) -> None:
        """NOT_COORDINATOR when another broker leads the group's partition (never on one node); a group whose
        partition is still loading must wait."""
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID)
        self.ensure_offsets_topic()
        index = partition_for(group_id, self.num_partitions)
        self.broker.check_coordinator_partition(OFFSETS_TOPIC, index)
        if index not in self._loaded:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    def follow_leadership(self) -> None:
        """Load the partitions this broker has come to lead (in the background), forget those it no longer leads."""
        if OFFSETS_TOPIC not in self.broker.metadata.topics:
            return
        led = {index for index in range(self.num_partitions) if self.broker.leads(OFFSETS_TOPIC, index)}
        for index in self._leading - led:
            self._unload(index)
        gained = sorted(led - self._leading)
        self._leading = led
        if gained:
            self._loaded.difference_update(gained)
            self._tasks.append(asyncio.get_running_loop().create_task(self._load(gained)))

    def _unload(self, index: int) -> None:
        """Another broker leads this partition now: its groups and offsets are that broker's."""
        self._loaded.discard(index)
        for group_id in [g for g in self.share_topics if partition_for(g, self.num_partitions) == index]:
            del self.share_topics[group_id]
        for group_id in set(self.groups) | set(self.offsets.group_ids()):
            if partition_for(group_id, self.num_partitions) != index:
                continue
            self.groups.pop(group_id, None)
            handle = self._timers.pop(group_id, None)
            if handle is not None:
                handle.cancel()
            for partition in list(self.offsets.of_group(group_id)):
                self.offsets.remove(group_id, partition)
            for pending in self._pending_transactional_offsets.values():
                for key in [key for key in pending if key[0] == group_id]:
                    del pending[key]
            for key in [key for key in self._waiters if key[0] == group_id]:
                future = self._waiters.pop(key)
                if not future.done():
                    future.set_exception(KafkaError(ErrorCode.NOT_COORDINATOR))
        self._pending_transactional_offsets = {producer_id: pending for producer_id, pending
                                               in self._pending_transactional_offsets.items() if pending}
        log.info("%s-%d is led by another broker now; its groups are forgotten here", OFFSETS_TOPIC, index)

    # ------------------------------------------------------------------------------------ classic groups
    def join(self, group_id: str, *, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool,
             supports_skip_assignment: bool = True) -> JoinResult | asyncio.Future:
        self.check_available(group_id)
        group = self._classic_group(group_id, create=True)
        result = group.join(member_id=member_id, instance_id=instance_id, client_id=client_id,
                            client_host=client_host, session_timeout_ms=session_timeout_ms,
                            rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type,
                            protocols=protocols, require_known_member_id=require_known_member_id, now_ms=now_ms(),
                            supports_skip_assignment=supports_skip_assignment)
        return self._answer(group, JOIN, result)

    def sync(self, group_id: str, *, member_id: str, instance_id: str | None, generation: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> SyncResult | asyncio.Future:
        self.check_available(group_id)
        group = self._classic_group(group_id)
        result = group.sync(member_id=member_id, instance_id=instance_id, generation=generation,
                            protocol_type=protocol_type, protocol_name=protocol_name, assignments=assignments,
                            now_ms=now_ms())
        return self._answer(group, "sync", result)

    def heartbeat(self, group_id: str, *, member_id: str, instance_id: str | None, generation: int) -> None:
        self.check_available(group_id)
        group = self._classic_group(group_id)
        try:
            group.heartbeat(member_id=member_id, instance_id=instance_id, generation=generation, now_ms=now_ms())
        finally:
            self._settle(group)

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        self.check_available(group_id)
        group = self._classic_group(group_id)
        codes = group.leave(members, now_ms())
        self._settle(group)
        return codes

    # ----------------------------------------------------------------------------------- KIP-848 groups
    def consumer_heartbeat(self, group_id: str, **fields) -> HeartbeatResult:
        self.check_available(group_id)
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            if not group.is_empty:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            group = None
        if group is None:
            config = self.broker.config
            group = self.groups[group_id] = ConsumerGroup(
                group_id, session_timeout_ms=config["group.consumer.session.timeout.ms"],
                heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"], now_ms=now_ms())
        try:
            return group.heartbeat(topics=self._topic_catalogue(), now_ms=now_ms(), **fields)
        finally:
            self._settle(group)

    def _topic_catalogue(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(topic.topic_id, len(topic.partitions))
                for name, topic in self.broker.metadata.topics.items() if name != OFFSETS_TOPIC}

    # ------------------------------------------------------------------------------------------ offsets
    def commit_offsets(self, group_id: str, *, member_id: str, instance_id: str | None, generation: int,
                       api_version: int, retention_ms: int,
                       offsets: list[tuple[str, int, int, int, str | None]]
                       ) -> list[ErrorCode] | Awaitable[list[ErrorCode]]:
        """offsets: (topic, partition, offset, leader epoch, metadata); one error code each, or an awaitable of them
        when the write must reach the in-sync replicas first.

        As in Kafka (KafkaApis filters the request before the coordinator sees it), a partition the catalogue does
        not hold gets UNKNOWN_TOPIC_OR_PARTITION whatever the group's state, and a request naming only such
        partitions touches no group; the group's verdict goes to the others."""
        codes = [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * len(offsets)
        known = [position for position, (topic, index, *_) in enumerate(offsets) if self._hosts(topic, index)]
        if not known:
            return codes
        try:
            self._validate_offset_commit(group_id, member_id, instance_id, generation, api_version)
        except KafkaError as exc:
            for position in known:
                codes[position] = exc.code
            return codes
        now = now_ms()
        # OffsetCommit v2-v4's retention_time_ms: past the largest timestamp it means "never" (Kafka's Java sum wraps
        # negative and expires the offsets at the next check; ours would not fit the offsets topic's int64)
        expire = min(now + retention_ms, LONG_MAX) if retention_ms >= 0 else -1
        known_codes, records, accepted = self._offset_records(group_id, [offsets[p] for p in known], now, expire)
        for position, code in zip(known, known_codes):
            codes[position] = code
        accepted = [(partition, committed, known[position]) for partition, committed, position in accepted]
        return self._store_offsets(group_id, records, accepted, codes,
                                   lambda partition, committed, record_offset: self.offsets.commit(
                                       group_id, partition, committed, record_offset))

    def _validate_offset_commit(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                                api_version: int) -> None:
        """Kafka's OffsetMetadataManager.validateOffsetCommit: a missing group is created as a simple group when the
        generation (member epoch) is negative, whatever member id comes with it (librdkafka's KIP-848 consumer
        sends its own with an assign()ed commit); otherwise it is GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION before
        v9)."""
        self.check_available(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION if api_version < 9 else ErrorCode.GROUP_ID_NOT_FOUND)
            group = self.groups[group_id] = ClassicGroup(group_id, self.classic_config, now_ms())
        if isinstance(group, ClassicGroup):
            group.validate_offset_commit(member_id, instance_id, generation)
        else:
            group.validate_offset_commit(member_id, generation, api_version)

    def _hosts(self, topic: str, index: int) -> bool:
        """Whether the catalogue holds this partition."""
        topic_meta = self.broker.metadata.topics.get(topic)
        return topic_meta is not None and 0 <= index < len(topic_meta.partitions)

    def _offset_records(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]], now: int,
                        expire: int):
        """(error code per offset, records to write, [(partition, offset, its position in the codes)])."""
        codes, records, accepted = [], [], []
        for topic, index, offset, leader_epoch, metadata in offsets:
            if metadata is not None and len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                codes.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            if not self._hosts(topic, index):
                codes.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            committed = OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire)
            records.append(offset_commit_record(group_id, topic, index, committed))
            accepted.append(((topic, index), committed, len(codes)))
            codes.append(ErrorCode.NONE)
        return codes, records, accepted

    def commit_transactional_offsets(self, group_id: str, *, producer_id: int, producer_epoch: int, member_id: str,
                                     generation: int,
                                     offsets: list[tuple[str, int, int, int, str | None]]) -> list[ErrorCode]:
        """TxnOffsetCommit: Kafka checks a named member and a given generation only, and creates a missing group."""
        self.check_available(group_id)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.classic_config, now_ms())
        if isinstance(group, ClassicGroup):
            if member_id and member_id not in group.members:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation >= 0 and generation != group.generation:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        elif member_id:
            group.validate_offset_commit(member_id, generation, 9)
        codes, records, accepted = self._offset_records(group_id, offsets, now_ms(), -1)

        def keep_pending(partition: TopicPartition, committed: OffsetAndMetadata, record_offset: int) -> None:
            self._pending_transactional_offsets.setdefault(producer_id, {})[(group_id, partition)] = (
                committed, record_offset)

        return self._store_offsets(group_id, records, accepted, codes, keep_pending,
                                   producer=(producer_id, producer_epoch))

    def _store_offsets(self, group_id: str, records: list[tuple[bytes, bytes | None]], accepted: list, codes:
                       list[ErrorCode], take, producer: tuple[int, int] | None = None
                       ) -> list[ErrorCode] | Awaitable[list[ErrorCode]]:
        """Write the commit's records, then `take(partition, committed, log offset of the batch)` each accepted
        offset (its position in `codes` the third item) once the write is as safe as offsets.commit.required.acks
        asks: at once with acks 1, after the in-sync replicas have it with -1 (an awaitable of the codes then). The
        waits of a connection's pipelined commits end in any order (a later commit's first look at the high
        watermark can come before the wake-up of an earlier one), so the log offset is what orders them. A write
        that fails or does not reach them in offsets.commit.timeout.ms takes nothing, and the codes say so as
        Kafka's GroupMetadataManager.storeOffsets does."""
        wait_for_isr = self.broker.config["offsets.commit.required.acks"] == -1
        index = partition_for(group_id, self.num_partitions)
        try:
            if wait_for_isr and records:
                self.broker.partition(OFFSETS_TOPIC, index).check_min_insync()
            last_offset = self._append(group_id, records, producer=producer)
        except (KafkaError, OSError) as exc:
            log.error("writing offsets of group %s failed: %s", group_id, exc)
            return self._refuse(codes, accepted, exc)

        def settle(error: KafkaError | None) -> list[ErrorCode]:
            if error is not None:
                log.warning("offsets of group %s not acknowledged: %s", group_id, error)
                return self._refuse(codes, accepted, error)
            for partition, committed, _ in accepted:
                take(partition, committed, last_offset)
            return codes

        partition = self.broker.partitions.get((OFFSETS_TOPIC, index))
        if not wait_for_isr or last_offset is None or partition.high_watermark > last_offset:
            return settle(None)
        deadline = time.monotonic() + self.broker.config["offsets.commit.timeout.ms"] / 1000

        async def replicated() -> list[ErrorCode]:
            return settle(await until_replicated(lambda: self.broker.partitions.get((OFFSETS_TOPIC, index)),
                                                 last_offset, deadline))

        return replicated()

    @staticmethod
    def _refuse(codes: list[ErrorCode], accepted: list, exc: Exception) -> list[ErrorCode]:
        """The codes of a commit whose write failed or timed out (`write_error_code`)."""
        code = write_error_code(exc)
        for _, _, position in accepted:
            codes[position] = code
        return codes

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker reached `offsets_partition`: its pending offsets there take effect or vanish."""
        pending = self._pending_transactional_offsets.get(producer_id)
        if not pending:
            return
        for key in [key for key in pending if partition_for(key[0], self.num_partitions) == offsets_partition]:
            committed, record_offset = pending.pop(key)
            if commit:
                self.offsets.commit(key[0], key[1], committed, record_offset)
        if not pending:
            del self._pending_transactional_offsets[producer_id]

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, *,
                      member_id: str | None = None, member_epoch: int = -1, require_stable: bool = False
                      ) -> list[tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]]:
        """(partition, committed offset or None for no commit, error) for each partition asked; every committed one
        when `partitions` is None. With `require_stable` (OffsetFetch v7+, KIP-447), a partition with offsets of an
        open transaction (TxnOffsetCommit written, the marker not yet here) is UNSTABLE_OFFSET_COMMIT without an
        offset, as Kafka's OffsetMetadataManager: the client asks again until the transaction ended."""
        self.check_available(group_id)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            group.validate_offset_fetch(member_id, member_epoch)
        if partitions is None:
            found = sorted(self.offsets.of_group(group_id).items())
        else:
            found = [(partition, self.offsets.get(group_id, partition)) for partition in partitions]
        if not require_stable:
            return [(partition, committed, ErrorCode.NONE) for partition, committed in found]
        unstable = {key for pending in self._pending_transactional_offsets.values() for key in pending}
        return [(partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if (group_id, partition) in unstable
                else (partition, committed, ErrorCode.NONE) for partition, committed in found]

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> list[ErrorCode]:
        self.check_available(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        subscribed = self._subscribed_topics(group)
        codes, gone = [], []
        for topic, index in partitions:
            if topic in subscribed:
                codes.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
            else:
                codes.append(ErrorCode.NONE)
                if self.offsets.get(group_id, (topic, index)) is not None:
                    gone.append((topic, index))
        self._drop_offsets(group_id, gone)
        return codes

    # ------------------------------------------------------------------------------------- group admin
    def describe(self, group_id: str) -> Group | None:
        self.check_available(group_id)
        return self.groups.get(group_id)

    def list_groups(self) -> list[tuple[str, Group]]:
        return sorted(self.groups.items())

    def delete_group(self, group_id: str) -> None:
        self.check_available(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not group.is_empty:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)
        self._remove_group(group_id)

    # ---------------------------------------------------------------------------------------- internals
    def _classic_group(self, group_id: str, *, create: bool = False) -> ClassicGroup:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if not (create and group.is_empty):
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL if create else ErrorCode.UNKNOWN_MEMBER_ID)
            group = None
        if group is None:
            if not create:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = ClassicGroup(group_id, self.classic_config, now_ms())
        return group

    def _answer(self, group: ClassicGroup, kind: str, result):
        """The result itself, or a future for it when the group answers later; then deliver what the call
        released."""
        if isinstance(result, Wait):
            key = (group.group_id, kind, result.member_id)
            previous = self._waiters.pop(key, None)
            if previous is not None and not previous.done():  # the same member asked again: the old ask is void
                previous.set_exception(KafkaError(ErrorCode.REBALANCE_IN_PROGRESS))
            result = self._waiters[key] = asyncio.get_running_loop().create_future()
        self._settle(group)
        return result

    def _settle(self, group: Group) -> None:
        """After every change: persist its metadata, hand out answers the group released, re-arm its timer. As
        Kafka's GroupCoordinator (storeGroup with acks=-1), the SyncGroup answers of a change wait until the
        in-sync replicas have its group record (offsets.commit.required.acks=-1, up to offsets.commit.timeout.ms),
        so a member never works from an assignment the next coordinator does not know; a write that fails or
        does not get there answers them COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, and they join again."""
        if isinstance(group, ClassicGroup):
            outbox, group.outbox = group.outbox, []
            replication = self._store_group(group) if group.metadata_changed else None
            held = [entry for entry in outbox if entry[0] == SYNC] if replication is not None else []
            self._deliver(group.group_id, [entry for entry in outbox if entry[0] != SYNC or replication is None])
            if held:
                task = asyncio.get_running_loop().create_task(
                    self._deliver_when_replicated(group.group_id, held, replication()))
                self._tasks.append(task)
                task.add_done_callback(self._forget_task)
        self._arm_timer(group)

    def _forget_task(self, task: asyncio.Task) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    def _deliver(self, group_id: str, outbox: list) -> None:
        for kind, member_id, result in outbox:
            future = self._waiters.pop((group_id, kind, member_id), None)
            if future is not None and not future.done():
                future.set_result(result)

    def _store_group(self, group: ClassicGroup) -> Callable[[], Awaitable[KafkaError | None]] | None:
        """Append the group's metadata record; None when it is as safe as offsets.commit.required.acks asks (or
        the write failed, which is logged), else what starts the wait for the in-sync replicas (started only if
        an answer is held for it)."""
        group.metadata_changed = False
        log.info("group %s is %s at generation %d with %d member(s)", group.group_id, group.state.name,
                 group.generation, len(group.members))
        try:
            last_offset = self._append(group.group_id, [group_metadata_record(group.group_id, group)])
        except (KafkaError, OSError) as exc:
            log.error("writing metadata of group %s failed: %s", group.group_id, exc)
            return None
        key = (OFFSETS_TOPIC, partition_for(group.group_id, self.num_partitions))
        if (self.broker.config["offsets.commit.required.acks"] != -1 or last_offset is None
                or self.broker.partitions[key].high_watermark > last_offset):
            return None
        deadline = time.monotonic() + self.broker.config["offsets.commit.timeout.ms"] / 1000
        return functools.partial(until_replicated, lambda: self.broker.partitions.get(key), last_offset, deadline)

    async def _deliver_when_replicated(self, group_id: str, held: list, replicated: Awaitable) -> None:
        error = await replicated
        if error is None:
            self._deliver(group_id, held)
            return
        log.warning("metadata of group %s not acknowledged: %s", group_id, error)
        for kind, member_id, _ in held:
            future = self._waiters.pop((group_id, kind, member_id), None)
            if future is not None and not future.done():
                future.set_exception(KafkaError(write_error_code(error), error.message))

    def _arm_timer(self, group: Group) -> None:
        handle = self._timers.pop(group.group_id, None)
        if handle is not None:
            handle.cancel()
        deadline = group.next_deadline()
        if deadline is not None:
            delay = max(0.0, (deadline - now_ms()) / 1000)
            self._timers[group.group_id] = asyncio.get_running_loop().call_later(delay, self._on_timer, group)

    def _on_timer(self, group: Group) -> None:
        self._timers.pop(group.group_id, None)
        if self.groups.get(group.group_id) is not group:
            return
        group.expire(now_ms())
        self._settle(group)

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> int | None:
        """Write records to the group's partition; with `producer` (id, epoch) as part of its transaction. The last
        offset written (None when there was nothing to write)."""
        if not records:
            return None
        now = now_ms()
        batch_records = [Record(i, now, key, value) for i, (key, value) in enumerate(records)]
        partition = self.broker.partition(OFFSETS_TOPIC, partition_for(group_id, self.num_partitions))
        if producer is None:
            data = encode_batch(batch_records)
            return partition.append(data, validate_batches(data)).last_offset
        data = encode_batch(batch_records, producer_id=producer[0], producer_epoch=producer[1], transactional=True)
        return partition.append(data, [parse_header(data)], origin=AppendOrigin.COORDINATOR).last_offset

    def record_share_topics(self, group_id: str, topics: dict[uuid.UUID, tuple[str, int]] | None) -> None:
        """Keep, in the group's partition, the topics (id -> (name, partition count)) the share group has state for
        (share_coordinator.py), or forget them all (None): what tells this coordinator, after a start or a move,
        that the group exists and where its state is."""
        self._append(group_id, [share_topics_record(group_id, topics)])
        if topics is None:
            self.share_topics.pop(group_id, None)
        else:
            self.share_topics[group_id] = {topic_id: name for topic_id, (name, _) in topics.items()}

    def _drop_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self._append(group_id, [offset_commit_record(group_id, topic, index, None) for topic, index in partitions])
        for partition in partitions:
            self.offsets.remove(group_id, partition)

    def _remove_group(self, group_id: str) -> None:
        self._drop_offsets(group_id, self.offsets.of_group(group_id))
        self._append(group_id, [group_metadata_record(group_id, None)])
        group = self.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup):
            group.state = GroupState.DEAD
        handle = self._timers.pop(group_id, None)
        if handle is not None:
            handle.cancel()

    @staticmethod
    def _subscribed_topics(group: Group) -> set[str]:
        if isinstance(group, ConsumerGroup):
            return group.subscribed_topics()
        if group.protocol_type != "consumer":
            return set()
        topics: set[str] = set()
        for metadata in group.subscribed_member_protocols():
            topics |= consumer_subscription_topics(metadata)
        return topics

    # ------------------------------------------------------------------------------------------ retention
    def expire_offsets(self, now: int) -> None:
        """Drop offsets of empty groups past offsets.retention.minutes, and groups left with nothing."""
        retention_ms = self.broker.config["offsets.retention.minutes"] * 60_000
        for group_id in set(self.groups) | set(self.offsets.group_ids()):
            if partition_for(group_id, self.num_partitions) not in self._loaded:
                continue
            group = self.groups.get(group_id)
            if group is not None and not group.is_empty:
                continue
            had_members = isinstance(group, ConsumerGroup) or (group is not None and group.protocol_type)
            empty_since = group.state_timestamp_ms if had_members else None
            expired = self.offsets.expired(group_id, now, retention_ms, empty_since)
            if expired:
                log.info("expiring %d offset(s) of group %s", len(expired), group_id)
                self._drop_offsets(group_id, expired)
            if not self.offsets.has_offsets(group_id):
                self._remove_group(group_id)

    # -------------------------------------------------------------------------------------------- loading
    async def _load(self, indexes: list[int]) -> None:
        started = time.monotonic()
        for index in indexes:
            if index not in self._leading:
                continue  # led elsewhere since
            try:
                await self._load_partition(index)
            except (KafkaError, OSError):
                log.exception("loading %s-%d failed; its groups start empty", OFFSETS_TOPIC, index)
            self._loaded.add(index)
        for group_id in self.offsets.group_ids():
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, self.classic_config, now_ms())
        for group in self.groups.values():
            self._arm_timer(group)
        log.info("loaded %s: %d group(s) in all, %.0f ms", f"{OFFSETS_TOPIC} partitions {indexes[0]}-{indexes[-1]}"
                 if len(indexes) > 1 else f"{OFFSETS_TOPIC}-{indexes[0]}", len(self.groups),
                 (time.monotonic() - started) * 1000)

    async def _load_partition(self, index: int) -> None:
        open_transactions: dict[int, list] = {}
        batches = self.broker.partition(OFFSETS_TOPIC, index).log.iter_batches()
        for count, (header, batch) in enumerate(batches, 1):
            _, batch_records = decode_batch(batch)
            if header.is_control:
                pending = open_transactions.pop(header.producer_id, [])
                if batch_records and decode_control_record(batch_records[0])[0] == CONTROL_COMMIT:
                    for record, record_offset in pending:
                        self._apply(record, record_offset)
            else:
                for record in batch_records:
                    if record.key is None:
                        continue
                    record_offset = header.base_offset + record.offset_delta
                    if header.is_transactional:
                        open_transactions.setdefault(header.producer_id, []).append((record, record_offset))
                    else:
                        self._apply(record, record_offset)
            if count % LOAD_BATCHES_BETWEEN_YIELDS == 0:
                await asyncio.sleep(0)
        self._restore_pending_offsets(open_transactions)

    def _restore_pending_offsets(self, open_transactions: dict[int, list]) -> None:
        """Offsets of transactions still open at the end of the log wait for their marker, as before the restart."""
        for producer_id, records in open_transactions.items():
            for record, record_offset in records:
                parsed = parse_record(record.key, record.value)
                if isinstance(parsed, OffsetRecord) and parsed.committed is not None:
                    pending = self._pending_transactional_offsets.setdefault(producer_id, {})
                    pending[(parsed.group_id, (parsed.topic, parsed.partition))] = (parsed.committed, record_offset)

    def _apply(self, record: Record, record_offset: int) -> None:
        parsed = parse_record(record.key, record.value)
        if isinstance(parsed, OffsetRecord):
            partition = (parsed.topic, parsed.partition)
            if parsed.committed is None:
                self.offsets.remove(parsed.group_id, partition)
            else:
                self.offsets.commit(parsed.group_id, partition, parsed.committed, record_offset)
        elif isinstance(parsed, ShareTopicsRecord):
            if parsed.topics is None:
                self.share_topics.pop(parsed.group_id, None)
            else:
                self.share_topics[parsed.group_id] = parsed.topics
        elif isinstance(parsed, GroupRecord):
            if parsed.value is None:
                self.groups.pop(parsed.group_id, None)
            else:
                self.groups[parsed.group_id] = restore_classic_group(parsed.group_id, parsed.value,
                                                                     self.classic_config, now_ms())


def consumer_subscription_topics(metadata: bytes) -> set[str]:
    """Topics in a classic consumer's ConsumerProtocolSubscription (int16 version, then an int16-length string
    array, in every version); empty if it does not parse."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        position, topics = 6, set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, position)
            topics.add(metadata[position + 2:position + 2 + length].decode())
            position += 2 + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def write_error_code(exc: Exception) -> ErrorCode:
    """A coordinator's failed or timed-out write as Kafka's group coordinator tells the client (both retriable: the
    client finds the coordinator again and retries)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return code
