"""Replication between the brokers of a ZooKeeper cluster: followers fetching from leaders, leaders keeping the ISR.

`ReplicaFetchers` runs one task per leader this broker follows (Kafka's ReplicaFetcherThread, one per source
broker): over one connection to the leader's inter-broker listener (odradek.cluster.peer: TLS and SASL as that
listener needs; a refused login is logged as an error and tried again) it sends Fetch with replica_id = this broker,
for every partition it follows there, from each log's end, and appends what comes back as it is (offsets and leader
epochs kept; Partition.append_replicated) with the leader's high watermark. The leader answers from its segment
files as it answers consumers (sendfile), holding the request open until an append (replica.fetch.wait.max.ms), so a
follower is one round trip behind. `follow()` is called after every catalogue change and starts or ends tasks to
match who leads what. A task whose long poll went out before this broker followed a partition from that leader (a
leadership that just moved there) is restarted at once on a new connection: otherwise the new partition waits out
the poll (up to 500 ms) while the leader's acks=all producers wait for this broker, a member of the partition's ISR.

Before fetching a partition that has just become a follower (`Partition.needs_truncation`), the task asks the leader
OffsetForLeaderEpoch (v4, with replica_id, KIP-279) for the partition's latest leader epoch and cuts the log where the
leader's answer says it parts from the leader's (`Partition.truncate_to_epoch_end`), asking again while the answer
names an epoch it ends elsewhere; that partition is fetched from the next round on. Only an answer of
UNSUPPORTED_VERSION (a leader without epochs) falls back to the high watermark, as Kafka's fetcher does. A fetch that
meets OFFSET_OUT_OF_RANGE past the leader's end goes back to the same question. An answer of NOT_LEADER_OR_FOLLOWER
or UNKNOWN_LEADER_EPOCH means the leader has not yet followed the catalogue change this broker saw (each broker
watches ZooKeeper on its own), which takes milliseconds: the task asks again after LEADER_BEHIND_BACKOFF_S instead of
the full back-off that other errors get. A cut below the replica's own high watermark removes records that were
acknowledged (only an unclean leader election makes a leader without them): the warning says which offsets and how
many (`acknowledged_loss`), so the loss is reported, not hidden.

`check_isr` is the leader's side (Kafka's isr-expiration task and maybeExpandIsr): every ISR_CHECK_INTERVAL_MS it asks
each partition it leads for the ISR it should have (Partition.wanted_isr, replica.lag.time.max.ms) and writes a
change to the state znode (ZooKeeperCatalogue.write_isr), off the event loop, one write per partition at a time.
A follower that restarted (a new broker epoch) is first forgotten (Partition.forget_restarted): only its new
process's fetches can bring it back into the ISR.
From the moment a change is decided, min.insync.replicas counts only the replicas it keeps, and a written ISR is
taken at once (Partition.begin_isr_change, end_isr_change), so a produce never passes against an ISR already left.

Replication throttles (odradek/broker/replication_quotas.py): a partition this broker is not in sync for, throttled
on the follower side (follower.replication.throttled.replicas), stays out of the fetch while the bytes fetched for
such partitions run over follower.replication.throttled.rate.
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.broker.replication_quotas import FOLLOWER_RATE, ReplicationQuota
from odradek.cluster.peer import PeerAuthenticationFailed, open_peer_connection, round_trip
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.records.batch import validate_batches

log = logging.getLogger("odradek.replication")

FETCH = api("Fetch")
FETCH_VERSION = 12  # topics by name, flexible; what a 2.8 broker sends
OFFSET_FOR_LEADER_EPOCH = api("OffsetForLeaderEpoch")
OFFSET_FOR_LEADER_EPOCH_VERSION = 4  # replica_id (v3+), flexible
RETRY_BACKOFF_S = 0.5  # replica.fetch.backoff.ms: after an error or a lost connection
LEADER_BEHIND_BACKOFF_S = 0.02  # after answers that say the leader has not followed the catalogue's change yet
LEADER_BEHIND = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH})
ISR_CHECK_INTERVAL_MS = 250
THROTTLED_PAUSE_S = 0.1  # when every partition waits for follower.replication.throttled.rate


class ReplicaFetchers:
    def __init__(self, broker):
        self.broker = broker
        self._tasks: dict[int, asyncio.Task] = {}
        self._polling: dict[asyncio.Task, frozenset] = {}  # a task's Fetch under way: the partitions it asked for
        self._quota = ReplicationQuota(broker, FOLLOWER_RATE)
        self._closed = False

    def followed(self, leader_id: int) -> list:
        return [p for p in self.broker.partitions.values() if not p.is_leader and p.assignment.leader == leader_id]

    def follow(self) -> None:
        """Start a task for every leader of a partition this broker follows; tasks of leaders it no longer follows
        end by themselves. None once closed, and a task still running then ends at its next turn: one that went on
        fetching into the closed logs kept a SIGTERMed broker from exiting (killed after 30 s in the chaos runs)."""
        if self._closed:
            return
        leaders = {p.assignment.leader for p in self.broker.partitions.values()
                   if not p.is_leader and p.assignment.leader >= 0}
        for leader_id in leaders:
            task = self._tasks.get(leader_id)
            polled = self._polling.get(task)
            if polled is not None and any((p.topic, p.index) not in polled for p in self.followed(leader_id)):
                task.cancel()  # its long poll does not ask for a partition it follows now: ask again at once
                task = None
            if task is None or task.done():
                self._tasks[leader_id] = asyncio.get_running_loop().create_task(self._fetch_from(leader_id))

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks = {}

    async def _fetch_from(self, leader_id: int) -> None:
        connection = None
        try:
            while not self._closed and self.followed(leader_id):
                try:
                    if connection is not None and connection.due_for_renewal():
                        connection.close()  # its SASL session ends soon: log in again on a new one
                        connection = None
                    if connection is None:
                        connection = await self._connect(leader_id)
                    if connection is None:
                        await asyncio.sleep(RETRY_BACKOFF_S)
                        continue
                    pause_s = await self._fetch_once(leader_id, connection.reader, connection.writer)
                    if pause_s:
                        await asyncio.sleep(pause_s)
                except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                    if isinstance(exc, PeerAuthenticationFailed):
                        log.error("broker %d refused this broker's login on the inter-broker listener %s (%s); "
                                  "retrying", leader_id, self.broker.inter_broker.listener_name, exc)
                    else:
                        log.info("fetching from broker %d failed (%r); retrying", leader_id, exc)
                    if connection is not None:
                        connection.close()
                    connection = None
                    await asyncio.sleep(RETRY_BACKOFF_S)
        finally:
            if connection is not None:
                connection.close()

    async def _connect(self, leader_id: int):
        """A connection to the leader over the inter-broker listener (odradek.cluster.peer), None while it is not
        registered."""
        endpoint = next((b for b in self.broker.membership.live_brokers() if b.node_id == leader_id), None)
        if endpoint is None:
            return None
        return await open_peer_connection(self.broker.inter_broker, endpoint, client_id=self._client_id(leader_id),
                                          timeout=self.broker.config["replica.socket.timeout.ms"] / 1000)

    def _client_id(self, leader_id: int) -> str:
        return f"broker-{self.broker.node_id}-fetcher-{leader_id}"

    async def _fetch_once(self, leader_id: int, reader, writer) -> float:
        """One Fetch round trip; the seconds to pause before the next one (0 when every answer was right)."""
        followed = self.followed(leader_id)
        pause_s = 0.0
        diverged = [p for p in followed if p.needs_truncation]
        if diverged:
            pause_s = await self._truncate(leader_id, diverged, reader, writer)
        partitions = {(p.topic, p.index): p for p in followed if not p.needs_truncation}
        held_back = self._held_back(partitions.values())
        if held_back and len(held_back) == len(partitions):
            return max(pause_s, THROTTLED_PAUSE_S)
        for key in held_back:
            del partitions[key]
        if not partitions:
            return pause_s
        config = self.broker.config
        topics: dict[str, list] = {}
        for (topic, index), partition in partitions.items():
            topics.setdefault(topic, []).append(FETCH.request.FetchPartition(
                partition=index, current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log.log_end_offset, last_fetched_epoch=-1,
                log_start_offset=partition.log.log_start_offset,
                partition_max_bytes=config["replica.fetch.max.bytes"]))
        # a partition still to truncate (its leader has not taken it up yet, or this broker began following it from
        # this leader during the round: catalogue changes arrive one partition at a time) is asked for right after
        # this fetch, so the others are not long-polled meanwhile: replica.fetch.wait.max.ms of waiting for their
        # appends would hold up the new leader's acks=all producers, who wait for this broker. (No await between
        # here and _polling below: a change after that restarts the task, see follow.)
        pending = any(p.needs_truncation for p in self.followed(leader_id))
        max_wait_ms = 0 if pending else config["replica.fetch.wait.max.ms"]
        request = FETCH.request(
            replica_id=self.broker.node_id, max_wait_ms=max_wait_ms,
            min_bytes=config["replica.fetch.min.bytes"], max_bytes=config["replica.fetch.response.max.bytes"],
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FETCH.request.FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
            forgotten_topics_data=[], rack_id="")
        # where each partition stood when asked: an answer is for that position and leader epoch only
        asked_at = {key: (p.leader_epoch, p.log.log_end_offset) for key, p in partitions.items()}
        task = asyncio.current_task()
        self._polling[task] = frozenset(partitions)
        try:
            response = await self._round_trip(leader_id, reader, writer, FETCH, FETCH_VERSION, request,
                                              max_wait_ms / 1000)
        finally:
            del self._polling[task]
        self._record_throttled(partitions, response)
        for topic in response.responses:
            for data in topic.partitions:
                partition = partitions.get((topic.topic, data.partition_index))
                if partition is None or not self._still_followed(partition, leader_id):
                    continue  # the catalogue moved on meanwhile
                if asked_at[(topic.topic, data.partition_index)] != (partition.leader_epoch,
                                                                     partition.log.log_end_offset):
                    continue  # a stale answer (a new leader epoch, or the log moved): asked again, as Kafka drops it
                try:
                    pause_s = max(pause_s, self._take(partition, data))
                except KafkaError as exc:  # this partition's answer refused: the others' go on, it is tried again
                    log.error("%s-%d: the leader's records not appended (%s)", partition.topic, partition.index, exc)
                    pause_s = RETRY_BACKOFF_S
        return pause_s

    def _held_back(self, partitions) -> list[tuple[str, int]]:
        """The partitions left out of this fetch by follower.replication.throttled.rate (this broker out of their
        ISR, their topic's follower.replication.throttled.replicas naming it, the rate over its bound)."""
        now = time.monotonic() * 1000
        node_id = self.broker.node_id
        return [(p.topic, p.index) for p in partitions
                if self._quota.holds_back(p, p.log.config.follower_replication_throttled_replicas, node_id, now)]

    def _record_throttled(self, partitions: dict, response) -> None:
        """The bytes fetched for throttled partitions count against follower.replication.throttled.rate."""
        size = 0
        for topic in response.responses:
            for data in topic.partitions:
                partition = partitions.get((topic.topic, data.partition_index))
                if partition is not None and data.records and self._quota.throttles(
                        partition, partition.log.config.follower_replication_throttled_replicas):
                    size += len(data.records)
        if size:
            self._quota.record(size, time.monotonic() * 1000)

    async def _round_trip(self, leader_id: int, reader, writer, spec, version: int, request, wait_s: float = 0.0):
        return await round_trip(reader, writer, spec, version, request, client_id=self._client_id(leader_id),
                                timeout=wait_s + self.broker.config["replica.socket.timeout.ms"] / 1000)

    async def _truncate(self, leader_id: int, partitions: list, reader, writer) -> float:
        """One OffsetForLeaderEpoch round trip for `partitions` and the truncation each answer calls for; the
        seconds to pause before the next round."""
        by_key = {(p.topic, p.index): p for p in partitions}
        topics: dict[str, list] = {}
        for partition in partitions:
            topics.setdefault(partition.topic, []).append(OFFSET_FOR_LEADER_EPOCH.request.OffsetForLeaderPartition(
                partition=partition.index, current_leader_epoch=partition.leader_epoch,
                leader_epoch=partition.log.leader_epochs.latest_epoch))
        request = OFFSET_FOR_LEADER_EPOCH.request(
            replica_id=self.broker.node_id,
            topics=[OFFSET_FOR_LEADER_EPOCH.request.OffsetForLeaderTopic(topic=name, partitions=parts)
                    for name, parts in topics.items()])
        response = await self._round_trip(leader_id, reader, writer, OFFSET_FOR_LEADER_EPOCH,
                                          OFFSET_FOR_LEADER_EPOCH_VERSION, request)
        pause_s = 0.0
        for topic in response.topics:
            for answer in topic.partitions:
                partition = by_key.get((topic.topic, answer.partition))
                if partition is None or not self._still_followed(partition, leader_id):
                    continue
                code = answer.error_code
                if code == ErrorCode.NONE or code == ErrorCode.UNSUPPORTED_VERSION:
                    end_offset = answer.end_offset if code == ErrorCode.NONE else -1
                    log_end, high_watermark = partition.log.log_end_offset, partition.high_watermark
                    partition.truncate_to_epoch_end(answer.leader_epoch, end_offset)
                    if partition.log.log_end_offset < log_end:
                        log.warning("%s-%d: truncated from %d to %d by leader epoch (leader's epoch %d ends at %d)%s",
                                    partition.topic, partition.index, log_end, partition.log.log_end_offset,
                                    answer.leader_epoch, answer.end_offset,
                                    acknowledged_loss(partition.log.log_end_offset, high_watermark))
                else:
                    log.debug("%s-%d: OffsetForLeaderEpoch answered %s", partition.topic, partition.index,
                              ErrorCode(code).name)
                    pause_s = max(pause_s, backoff_after(code))
        return pause_s

    def _still_followed(self, partition, leader_id: int) -> bool:
        """Whether the catalogue still has this partition object following `leader_id` (it may have moved on)."""
        return (self.broker.partitions.get((partition.topic, partition.index)) is partition
                and not partition.is_leader and partition.assignment.leader == leader_id)

    def _take(self, partition, data) -> float:
        """Append one partition's answer, or act on its error; the seconds to pause before the next round."""
        code = data.error_code
        if code == ErrorCode.NONE:
            records = data.records or b""
            headers = validate_batches(records, from_leader=True) if records else []
            partition.append_replicated(records, headers, data.high_watermark)
            return 0.0
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and data.high_watermark >= 0:
            log_end = partition.log.log_end_offset
            if log_end > data.high_watermark:  # ahead of the leader: find by epoch where our tail parts from its
                partition.needs_truncation = True
            elif log_end < data.log_start_offset:  # the leader no longer has what we lack
                partition.log.truncate_fully_and_start_at(data.log_start_offset)
            return 0.0
        log.debug("%s-%d: fetch from the leader answered %s", partition.topic, partition.index, ErrorCode(code).name)
        return backoff_after(code)

    # -------------------------------------------------------------------------------------------- the ISR
    def check_isr(self, now: int) -> None:
        lag_ms = self.broker.config["replica.lag.time.max.ms"]
        membership = self.broker.membership
        live = {broker.node_id for broker in membership.live_brokers()} - membership.shutting_down()
        epochs = membership.broker_epochs()
        for partition in list(self.broker.partitions.values()):
            if not partition.is_leader or not partition.followers or partition.isr_change is not None:
                continue
            partition.forget_restarted(epochs, now)
            wanted = partition.wanted_isr(now, lag_ms, live)
            if wanted is not None:
                partition.begin_isr_change(wanted)
                asyncio.get_running_loop().create_task(self._write_isr(partition, partition.leader_epoch, wanted))

    async def _write_isr(self, partition, leader_epoch: int, isr: list[int]) -> None:
        """Write the ISR decided at `leader_epoch` (the task starts later: an epoch that moved meanwhile must fail
        the conditional write, not carry a decision made on the old epoch's followers)."""
        topic, index = partition.topic, partition.index
        written = False
        try:
            written = await asyncio.to_thread(self.broker.metadata.write_isr, topic, index, leader_epoch, isr)
        except Exception as exc:  # ZooKeeper unreachable: the next check tries again
            log.warning("%s-%d: ISR change to %s not written (%r)", topic, index, isr, exc)
        finally:
            partition.end_isr_change(leader_epoch, written)


def backoff_after(code: int) -> float:
    """The pause a follower takes after a partition's error answer (see the module docstring)."""
    return LEADER_BEHIND_BACKOFF_S if code in LEADER_BEHIND else RETRY_BACKOFF_S


def acknowledged_loss(new_end: int, high_watermark: int) -> str:
    """What a truncation to `new_end` lost that this replica's high watermark had passed: records the in-sync
    replicas had, acknowledged to acks=all producers, gone because a replica without them leads (an unclean leader
    election); the range and count, for the log. Empty when the cut is above the high watermark (records never
    acknowledged, which a new leader may drop)."""
    if new_end >= high_watermark:
        return ""
    return (f"; ACKNOWLEDGED RECORDS LOST: offsets {new_end}-{high_watermark - 1} ({high_watermark - new_end}) were "
            f"below this replica's high watermark {high_watermark} and the leader does not have them (an "
            f"out-of-sync replica was elected: unclean.leader.election.enable)")
