"""Replication between the brokers of a ZooKeeper cluster: followers fetching from leaders, leaders keeping the ISR.

`ReplicaFetchers` runs one task per leader this broker follows (Kafka's ReplicaFetcherThread, one per source
broker): over one connection it sends Fetch with replica_id = this broker, for every partition it follows there,
from each log's end, and appends what comes back as it is (offsets and leader epochs kept; Partition.append_replicated)
with the leader's high watermark. The leader answers from its segment files as it answers consumers (sendfile),
holding the request open until an append (replica.fetch.wait.max.ms), so a follower is one round trip behind.
`follow()` is called after every catalogue change and starts or ends tasks to match who leads what.

Before fetching a partition that has just become a follower (`Partition.needs_truncation`), the task asks the leader
OffsetForLeaderEpoch (v4, with replica_id, KIP-279) for the partition's latest leader epoch and cuts the log where the
leader's answer says it parts from the leader's (`Partition.truncate_to_epoch_end`), asking again while the answer
names an epoch it ends elsewhere; that partition is fetched from the next round on. Only an answer of
UNSUPPORTED_VERSION (a leader without epochs) falls back to the high watermark, as Kafka's fetcher does. A fetch that
meets OFFSET_OUT_OF_RANGE past the leader's end goes back to the same question. A cut below the replica's own high watermark removes records
that were acknowledged (only an unclean leader election makes a leader without them): the warning says which offsets
and how many (`acknowledged_loss`), so the loss is reported, not hidden.

`check_isr` is the leader's side (Kafka's isr-expiration task and maybeExpandIsr): every ISR_CHECK_INTERVAL_MS it asks
each partition it leads for the ISR it should have (Partition.wanted_isr, replica.lag.time.max.ms) and writes a
change to the state znode (ZooKeeperCatalogue.write_isr), off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import struct

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import RequestHeader, api, decode_response, encode_request
from odradek.records.batch import validate_batches

log = logging.getLogger("odradek.replication")

FETCH = api("Fetch")
FETCH_VERSION = 12  # topics by name, flexible; what a 2.8 broker sends
OFFSET_FOR_LEADER_EPOCH = api("OffsetForLeaderEpoch")
OFFSET_FOR_LEADER_EPOCH_VERSION = 4  # replica_id (v3+), flexible
RETRY_BACKOFF_S = 0.5  # replica.fetch.backoff.ms: after an error or a lost connection
ISR_CHECK_INTERVAL_MS = 250


class ReplicaFetchers:
    def __init__(self, broker):
        self.broker = broker
        self._tasks: dict[int, asyncio.Task] = {}
        self._isr_writes: set[tuple[str, int]] = set()  # writes under way, one per partition at a time

    def followed(self, leader_id: int) -> list:
        return [p for p in self.broker.partitions.values() if not p.is_leader and p.assignment.leader == leader_id]

    def follow(self) -> None:
        """Start a task for every leader of a partition this broker follows; tasks of leaders it no longer follows
        end by themselves."""
        leaders = {p.assignment.leader for p in self.broker.partitions.values()
                   if not p.is_leader and p.assignment.leader >= 0}
        for leader_id in leaders:
            task = self._tasks.get(leader_id)
            if task is None or task.done():
                self._tasks[leader_id] = asyncio.get_running_loop().create_task(self._fetch_from(leader_id))

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks = {}

    async def _fetch_from(self, leader_id: int) -> None:
        connection = None
        try:
            while self.followed(leader_id):
                try:
                    if connection is None:
                        connection = await self._connect(leader_id)
                    if connection is None:
                        await asyncio.sleep(RETRY_BACKOFF_S)
                        continue
                    if not await self._fetch_once(leader_id, *connection):
                        await asyncio.sleep(RETRY_BACKOFF_S)
                except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                    log.info("fetching from broker %d failed (%r); retrying", leader_id, exc)
                    if connection is not None:
                        connection[1].close()
                    connection = None
                    await asyncio.sleep(RETRY_BACKOFF_S)
        finally:
            if connection is not None:
                connection[1].close()

    async def _connect(self, leader_id: int):
        endpoint = next((b for b in self.broker.membership.live_brokers() if b.node_id == leader_id), None)
        if endpoint is None:
            return None
        return await asyncio.wait_for(asyncio.open_connection(endpoint.host, endpoint.port), RETRY_BACKOFF_S * 4)

    async def _fetch_once(self, leader_id: int, reader, writer) -> bool:
        """One Fetch round trip; False when an answer calls for a pause (an epoch the leader does not know yet)."""
        followed = self.followed(leader_id)
        healthy = True
        diverged = [p for p in followed if p.needs_truncation]
        if diverged:
            healthy = await self._truncate(leader_id, diverged, reader, writer)
        partitions = {(p.topic, p.index): p for p in followed if not p.needs_truncation}
        if not partitions:
            return healthy
        config = self.broker.config
        topics: dict[str, list] = {}
        for (topic, index), partition in partitions.items():
            topics.setdefault(topic, []).append(FETCH.request.FetchPartition(
                partition=index, current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log.log_end_offset, last_fetched_epoch=-1,
                log_start_offset=partition.log.log_start_offset,
                partition_max_bytes=config["replica.fetch.max.bytes"]))
        request = FETCH.request(
            replica_id=self.broker.node_id, max_wait_ms=config["replica.fetch.wait.max.ms"],
            min_bytes=config["replica.fetch.min.bytes"], max_bytes=config["replica.fetch.response.max.bytes"],
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FETCH.request.FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
            forgotten_topics_data=[], rack_id="")
        response = await self._round_trip(leader_id, reader, writer, FETCH, FETCH_VERSION, request,
                                          config["replica.fetch.wait.max.ms"] / 1000)
        for topic in response.responses:
            for data in topic.partitions:
                partition = partitions.get((topic.topic, data.partition_index))
                if partition is None or not self._still_followed(partition, leader_id):
                    continue  # the catalogue moved on meanwhile
                try:
                    healthy &= self._take(partition, data)
                except KafkaError as exc:  # this partition's answer refused: the others' go on, it is tried again
                    log.error("%s-%d: the leader's records not appended (%s)", partition.topic, partition.index, exc)
                    healthy = False
        return healthy

    async def _round_trip(self, leader_id: int, reader, writer, spec, version: int, request, wait_s: float = 0.0):
        header = RequestHeader(api_key=spec.key, api_version=version, correlation_id=1,
                               client_id=f"broker-{self.broker.node_id}-fetcher-{leader_id}")
        writer.write(encode_request(header, request))
        await writer.drain()
        timeout = wait_s + self.broker.config["replica.socket.timeout.ms"] / 1000
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout))
        return decode_response(spec.key, version, await asyncio.wait_for(reader.readexactly(size), timeout))[1]

    async def _truncate(self, leader_id: int, partitions: list, reader, writer) -> bool:
        """One OffsetForLeaderEpoch round trip for `partitions` and the truncation each answer calls for; False when
        an answer calls for a pause."""
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
        healthy = True
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
                    healthy = False
        return healthy

    def _still_followed(self, partition, leader_id: int) -> bool:
        """Whether the catalogue still has this partition object following `leader_id` (it may have moved on)."""
        return (self.broker.partitions.get((partition.topic, partition.index)) is partition
                and not partition.is_leader and partition.assignment.leader == leader_id)

    def _take(self, partition, data) -> bool:
        code = data.error_code
        if code == ErrorCode.NONE:
            records = data.records or b""
            headers = validate_batches(records, from_leader=True) if records else []
            partition.append_replicated(records, headers, data.high_watermark)
            return True
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and data.high_watermark >= 0:
            log_end = partition.log.log_end_offset
            if log_end > data.high_watermark:  # ahead of the leader: find by epoch where our tail parts from its
                partition.needs_truncation = True
            elif log_end < data.log_start_offset:  # the leader no longer has what we lack
                partition.log.truncate_fully_and_start_at(data.log_start_offset)
            return True
        log.debug("%s-%d: fetch from the leader answered %s", partition.topic, partition.index, ErrorCode(code).name)
        return False

    # -------------------------------------------------------------------------------------------- the ISR
    def check_isr(self, now: int) -> None:
        lag_ms = self.broker.config["replica.lag.time.max.ms"]
        for (topic, index), partition in list(self.broker.partitions.items()):
            if not partition.is_leader or not partition.followers or (topic, index) in self._isr_writes:
                continue
            wanted = partition.wanted_isr(now, lag_ms)
            if wanted is not None:
                self._isr_writes.add((topic, index))
                asyncio.get_running_loop().create_task(self._write_isr(topic, index, partition.leader_epoch, wanted))

    async def _write_isr(self, topic: str, index: int, leader_epoch: int, isr: list[int]) -> None:
        try:
            await asyncio.to_thread(self.broker.metadata.write_isr, topic, index, leader_epoch, isr)
        except Exception as exc:  # ZooKeeper unreachable: the next check tries again
            log.warning("%s-%d: ISR change to %s not written (%r)", topic, index, isr, exc)
        finally:
            self._isr_writes.discard((topic, index))


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
