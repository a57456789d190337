"""Fetch: hand consumers whole record batches straight from segment files, and hold the request open until data
arrives (a long poll woken by appends, never a sleep loop) or the broker stops (Broker.stopping: answered at once).

The log answers a read with a FileRegion; it goes into the response as it is and the network shell sends it with
sendfile, so record bytes never pass through Python. Reads stop at the high watermark (read_uncommitted) or the last
stable offset (read_committed), or for a follower (replica_id, odradek/broker/replica_fetcher.py) at the log end,
where the fetch offset also tells the leader how far that follower has the log; read_committed answers also list the aborted transactions that overlap the range up
to the last stable offset (from the segments' `.txnindex`), which the consumer uses to drop aborted records.

Fetch from the closest replica (KIP-392): a consumer's Fetch v11+ names its rack (client.rack). With
replica.selector.class set, the leader answers such a fetch at once, without records, naming a follower in that rack
as preferred_read_replica (odradek/cluster/replica_selector.py); the consumer then fetches from that follower, which
serves any v11+ consumer fetch up to its own high watermark (or last stable offset), as Kafka has since 2.4: OFFSET_
OUT_OF_RANGE past its log end, NOT_LEADER_OR_FOLLOWER once it holds no replica, and preferred_read_replica -1 always
(only a leader sends a consumer elsewhere). ListOffsets stays with the leader (handlers/offsets.py).

Limits follow KIP-74 and Kafka's ReplicaManager.readFromLog: max_bytes for the whole answer and partition_max_bytes
for each partition. Only the first partition that has data may go over them, by one whole batch, so a consumer is
never stuck behind a batch larger than its limits; every later partition stops at the last whole batch that fits
(or answers no records), so an answer never exceeds max_bytes by more than that one batch. In a fetch session the
partitions that returned records move to the end of the session's order, as in Kafka's IncrementalFetchContext, so
a partition with a long backlog cannot keep the limits to itself. librdkafka drops the
connection ("Invalid response size") when an answer exceeds receive.message.max.bytes, which it sets just above
fetch.max.bytes. (Kafka's v0-2 answers cut even that first batch short; we send it whole.)

Records a large produce window handed to the log manager's writer thread (storage/log.py, DeferredWrites) are not
in the file until that write is done. A read stops where such a write starts rather than blocking the event loop
until it ends (every other connection would wait with it: a tailing consumer or a follower meets one at nearly
every fetch under batching producers), and the Fetch then waits for the write off the loop and reads again: its
answer holds every record appended before it arrived, max_wait_ms 0 included, as if the write had been done.

A partition whose log fails to read (an I/O error, or bytes a failed write left in memory that still cannot be
written before the read) answers KAFKA_STORAGE_ERROR, as Kafka answers for a log directory gone offline; the other
partitions of the request are answered as usual, and the client retries that one.
"""

from __future__ import annotations

import operator
import time

from odradek.broker.fetch_sessions import FetchSessionCache, FetchTarget
from odradek.broker.replication_quotas import LEADER_RATE, ReplicationQuota
from odradek.clock import now_ms
from odradek.cluster.append_waits import next_change, written
from odradek.cluster.replica_selector import NO_PREFERRED_REPLICA, FollowerView, preferred_read_replica
from odradek.errors import ErrorCode, KafkaError, storage_error
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.protocol.schema import ZERO_UUID
from odradek.records.region import FileRegion
from odradek.security.quotas import CONSUMER_BYTE_RATE, forget_usage, throttle_connection

FETCH = api("Fetch")
FetchResponse = FETCH.response

# Looked up once: on Python 3.11 EnumType has a __getattr__, which makes every lookup of an enum member a slow one
# (0.15 us, against 0.01 for a global), and these are looked up for every partition of every request.
_NO_ERROR, _READ, _TOPIC = ErrorCode.NONE, AclOperation.READ, ResourceType.TOPIC
_TOPIC_OF = operator.attrgetter("topic")

READ_COMMITTED = 1
# refused before any read, where Kafka's KafkaApis answers an empty aborted list (a failed read answers null)
_REFUSED_BEFORE_READ = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                                  ErrorCode.TOPIC_AUTHORIZATION_FAILED})
EMPTY_RECORDS = b""
TOPIC_IDS_FROM_VERSION = 13
CLIENT_RACK_FROM_VERSION = 11  # KIP-392: a consumer's fetch names its rack and may be served by a follower


def handlers(broker) -> dict:
    sessions = FetchSessionCache()
    broker.fetch_sessions = sessions
    leader_quota = ReplicationQuota(broker, LEADER_RATE)

    def targets_of(request, version: int) -> tuple[list[FetchTarget], list, list]:
        """The request's partitions as FetchTargets, the forgotten keys, and answers for unknown topic ids."""
        targets, unknown = [], []
        by_id = broker.metadata.topics_by_id
        for fetch_topic in request.topics:
            if version >= TOPIC_IDS_FROM_VERSION:
                topic = by_id.get(fetch_topic.topic_id)
                if topic is None:
                    unknown.append(fetch_topic)
                    continue
                name = topic.name
            else:
                name = fetch_topic.topic
            for p in fetch_topic.partitions:
                targets.append(FetchTarget(name, p.partition, fetch_topic.topic_id if version >= TOPIC_IDS_FROM_VERSION else None,
                                           p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                                           last_fetched_epoch=p.last_fetched_epoch))
        forgotten = []
        for gone in request.forgotten_topics_data or ():
            if version >= TOPIC_IDS_FROM_VERSION:
                topic = by_id.get(gone.topic_id)
                if topic is None:
                    continue
                name = topic.name
            else:
                name = gone.topic
            forgotten.extend((name, index) for index in gone.partitions)
        return targets, forgotten, unknown

    def readable_partition(target: FetchTarget, client_rack: str | None):
        """The partition to read for this target: the one this broker leads, or, for a consumer that named its
        rack (Fetch v11+, KIP-392), any replica this broker holds, a follower serving up to its own high
        watermark. NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        if client_rack is not None:
            partition = broker.partitions.get((target.topic, target.partition))
            if partition is not None:
                return partition
        return broker.partition(target.topic, target.partition)

    def preferred_replica(partition, selector: str, client_rack: str, fetch_offset: int, racks: dict) -> int:
        """As leader, the follower a consumer in `client_rack` should read from by `selector`
        (replica.selector.class), or NO_PREFERRED_REPLICA. `racks` is filled with the live brokers' racks on first
        use, once per request."""
        if not partition.is_leader:
            return NO_PREFERRED_REPLICA
        if not racks:
            racks.update((b.node_id, b.rack) for b in broker.membership.live_brokers())
        followers = [FollowerView(node_id, state.log_end_offset, state.last_caught_up_ms)
                     for node_id, state in partition.followers.items()]
        return preferred_read_replica(selector, client_rack, partition.node_id, fetch_offset, followers,
                                      partition.assignment.isr, racks, now_ms())

    def read(targets: list[FetchTarget], max_bytes: int, isolation_level: int, incremental: bool,
             denied: frozenset, replica_id: int = -1, client_rack: str | None = None):
        """One pass over the targets: (partition answers by target, bytes of records gathered, whether to answer
        now without waiting: an error, or a consumer sent to another replica, the writer thread's writes in flight
        whose records a partition's read stopped short of). A follower's fetch (replica_id >= 0)
        reads up to the log end and tells the partition how far that follower has the log. A consumer's fetch that
        names its rack (`client_rack`, not None) may read from a follower here, or be told by the leader to read
        from a follower (preferred_read_replica, no records). Topics in `denied` (no READ for this principal)
        answer TOPIC_AUTHORIZATION_FAILED."""
        answers = []
        total = 0
        answer_now = False
        writes = []
        racks: dict = {}
        selector = broker.config["replica.selector.class"] if client_rack is not None else None  # once a request
        for target in targets:
            if target.topic in denied:  # checked first: says nothing of the topic to whoever may not read it
                answers.append((target, _partition_error(target, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
                answer_now = True
                continue
            try:
                partition = readable_partition(target, client_rack)
            except KafkaError as exc:  # unknown, or led by another broker
                answers.append((target, _partition_error(target, exc.code)))
                answer_now = True
                continue
            log = partition.log
            high_watermark = partition.high_watermark
            last_stable = partition.last_stable_offset
            log_start = log.log_start_offset
            code = None
            records = EMPTY_RECORDS
            bound = last_stable if isolation_level == READ_COMMITTED else high_watermark
            remaining = max_bytes - total
            preferred = NO_PREFERRED_REPLICA
            try:
                partition.check_leader_epoch(target.current_leader_epoch)
                if target.last_fetched_epoch >= 0 and replica_id < 0:
                    diverging = diverging_epoch(partition, target, log_start)
                    if diverging is not None:  # as Kafka: no records, where the consumer's log parts from ours
                        answers.append((target, FetchResponse.PartitionData(
                            partition_index=target.partition, error_code=_NO_ERROR, high_watermark=high_watermark,
                            last_stable_offset=last_stable, log_start_offset=log_start, diverging_epoch=diverging,
                            aborted_transactions=None, preferred_read_replica=-1, records=EMPTY_RECORDS)))
                        answer_now = True
                        continue
                if not log_start <= target.fetch_offset <= log.log_end_offset:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
                if selector:  # none for a follower or a consumer's Fetch before v11: never sent on
                    preferred = preferred_replica(partition, selector, client_rack, target.fetch_offset, racks)
                if preferred != NO_PREFERRED_REPLICA:
                    answer_now = True  # as Kafka: the consumer is sent on at once, with no records
                    bound = target.fetch_offset
                if replica_id >= 0:
                    partition.follower_fetched(replica_id, target.fetch_offset, now_ms())
                    high_watermark = partition.high_watermark
                    bound = log.log_end_offset
                    if leader_quota.holds_back(partition, log.config.leader_replication_throttled_replicas,
                                               replica_id, time.monotonic() * 1000):
                        bound = target.fetch_offset  # no records for now: leader.replication.throttled.rate
                if target.fetch_offset < bound and (remaining > 0 or total == 0):
                    # Kafka's minOneMessage: only while nothing has been gathered may a batch exceed the limits
                    wanted = target.max_bytes if target.max_bytes < remaining else remaining
                    # looked at before the read: a write that ends between the two was either waited for by the
                    # read, or is waited for here (a done one costs a read again), never missed
                    write = log.write_in_flight()
                    region = log.read(target.fetch_offset, wanted, max_offset=bound, min_one_batch=total == 0,
                                      written_only=True)
                    if region is not None:
                        records = region
                        total += region.length
                    if write is not None and (region is None or region.length < wanted):
                        writes.append(write)
            except KafkaError as exc:
                code = exc.code
            except OSError as exc:
                code = storage_error(exc, f"{target.topic}-{target.partition}").code
            if code is not None:
                answer_now = True
                # a consumer is told -1 for all three, as Kafka's readFromLog answers a failed read; our own
                # followers take the leader's offsets from an OFFSET_OUT_OF_RANGE (replica_fetcher.py)
                answers.append((target, _partition_error(target, code, high_watermark, last_stable, log_start)
                                if replica_id >= 0 else _partition_error(target, code)))
                continue
            if (incremental and records is EMPTY_RECORDS and preferred == NO_PREFERRED_REPLICA
                    and not target.moved(high_watermark, last_stable, log_start)):
                continue
            aborted = None
            if isolation_level == READ_COMMITTED:
                aborted = [FetchResponse.AbortedTransaction(producer_id=entry.producer_id,
                                                            first_offset=entry.first_offset)
                           for entry in log.aborted_transactions(target.fetch_offset, bound)
                           ] if records is not EMPTY_RECORDS else []
            answers.append((target, FetchResponse.PartitionData(
                partition_index=target.partition, error_code=_NO_ERROR, high_watermark=high_watermark,
                last_stable_offset=last_stable, log_start_offset=log_start, aborted_transactions=aborted,
                preferred_read_replica=preferred, records=records)))
        return answers, total, answer_now, writes

    def record_throttled_replication(answers) -> None:
        """The bytes a follower's answer carries of partitions throttled here as leader count against
        leader.replication.throttled.rate (odradek/broker/replication_quotas.py)."""
        size = 0
        for target, data in answers:
            partition = broker.partitions.get((target.topic, target.partition))
            if (isinstance(data.records, FileRegion) and partition is not None
                    and leader_quota.throttles(partition, partition.log.config.leader_replication_throttled_replicas)):
                size += data.records.length
        if size:
            leader_quota.record(size, time.monotonic() * 1000)

    def respond(connection, header, answers, session, unknown_topics, error=ErrorCode.NONE, follower=False):
        """The answer; a consumer's records count against its consumer_byte_rate, a follower's against
        leader.replication.throttled.rate where the partition is throttled, as in Kafka."""
        session_id = session.session_id if session is not None else 0
        throttle_ms = 0
        if follower:
            record_throttled_replication(answers)
        elif broker.quotas.catalogue.client_quotas:  # the bytes are summed only for a quota to count them against
            sent_bytes = sum(data.records.length if isinstance(data.records, FileRegion)
                             else len(data.records or b"") for _, data in answers)
            throttle_ms = throttle_connection(broker.quotas, connection, header, CONSUMER_BYTE_RATE, sent_bytes)
            if throttle_ms and sent_bytes:
                # Kafka's throttled fetch: an empty answer, its bytes not counted, the session told nothing
                forget_usage(broker.quotas, connection, header, CONSUMER_BYTE_RATE, sent_bytes)
                return FetchResponse(throttle_time_ms=throttle_ms, error_code=error, session_id=session_id,
                                     responses=[])
        by_topic: dict = {}
        for target, data in answers:
            if session is not None:  # what its next incremental answer compares with (librdkafka opens none)
                target.told(data.high_watermark, data.last_stable_offset, data.log_start_offset)
                if data.records is not EMPTY_RECORDS:
                    session.served_last(target)
            if broker.metrics is not None:
                broker.metrics.record_fetch(target.topic, data.records)
            entry = by_topic.get(target.topic)
            if entry is None:
                entry = by_topic[target.topic] = FetchResponse.FetchableTopicResponse(
                    topic=target.topic, topic_id=target.topic_id or ZERO_UUID, partitions=[])
            entry.partitions.append(data)
        responses = list(by_topic.values())
        for fetch_topic in unknown_topics:
            responses.append(FetchResponse.FetchableTopicResponse(
                topic="", topic_id=fetch_topic.topic_id, partitions=[
                    _partition_error(FetchTarget("", p.partition, fetch_topic.topic_id, p.fetch_offset, 0),
                                     ErrorCode.UNKNOWN_TOPIC_ID)
                    for p in fetch_topic.partitions]))
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=error, session_id=session_id,
                             responses=responses)

    def answer_fetch(connection, header, request):
        version = header.api_version
        targets, forgotten, unknown = targets_of(request, version)
        session_id = request.session_id if version >= 7 else 0
        epoch = request.session_epoch if version >= 7 else -1
        try:
            session, targets, incremental = sessions.begin(session_id, epoch, targets, forgotten)
        except KafkaError as exc:
            return respond(connection, header, [], None, [], exc.code)
        max_bytes = request.max_bytes if version >= 3 else 2**31 - 1
        isolation = request.isolation_level if version >= 4 else 0
        replica_id = request.replica_id if version <= 14 else request.replica_state.replica_id
        client_rack = request.rack_id if version >= CLIENT_RACK_FROM_VERSION and replica_id < 0 else None
        access = broker.access(connection)
        if replica_id >= 0:  # a follower: CLUSTER_ACTION on the cluster for all of it, as Kafka, not READ per topic
            denied = frozenset() if access.allows_cluster(AclOperation.CLUSTER_ACTION) else \
                frozenset(target.topic for target in targets)
        else:
            denied = access.denied(_READ, _TOPIC, map(_TOPIC_OF, targets))  # (a generator costs 0.5 us)
        answers, total, answer_now, writes = read(targets, max_bytes, isolation, incremental, denied, replica_id,
                                                  client_rack)
        if not writes and (total >= request.min_bytes or request.max_wait_ms <= 0 or answer_now or unknown):
            return respond(connection, header, answers, session, unknown, follower=replica_id >= 0)
        return long_poll(connection, header, targets, request, session, max_bytes, isolation, incremental, unknown,
                         denied, replica_id, client_rack, writes)

    async def long_poll(connection, header, targets, request, session, max_bytes, isolation, incremental, unknown,
                        denied, replica_id, client_rack, writes):
        """The answer once `min_bytes` are there or `max_wait_ms` ran out; but first, records appended before this
        fetch that the writer thread is still writing (`writes`) are waited for, without blocking the loop: the
        answer holds them as it would have if they were in the file, max_wait_ms 0 included."""
        deadline = time.monotonic() + request.max_wait_ms / 1000
        watched = [broker.partitions[key] for key in {(t.topic, t.partition) for t in targets}
                   if key in broker.partitions]
        await written(writes)
        while True:  # read before waiting: an append after answer_fetch's read, before this task ran, woke no one
            answers, total, answer_now, writes = read(targets, max_bytes, isolation, incremental, denied,
                                                      replica_id, client_rack)
            if total >= request.min_bytes or answer_now or broker.stopping or time.monotonic() >= deadline:
                return respond(connection, header, answers, session, unknown, follower=replica_id >= 0)
            await next_change(watched, deadline - time.monotonic(), writes)

    return {FETCH.key: answer_fetch}


def diverging_epoch(partition, target: FetchTarget, log_start: int):
    """Kafka's Partition.readRecords check of a fetch's last_fetched_epoch: OFFSET_OUT_OF_RANGE when the log has no
    end offset for that epoch or the fetch offset is below the log start, the epoch and end offset where the fetcher's
    log parts from this one when they diverge, None when they agree."""
    epoch, end_offset = partition.last_offset_for_leader_epoch(target.last_fetched_epoch)
    if epoch < 0 or end_offset < 0 or target.fetch_offset < log_start:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
    if epoch < target.last_fetched_epoch or end_offset < target.fetch_offset:
        return FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return None


def _partition_error(target: FetchTarget, code: ErrorCode, high_watermark: int = -1, last_stable: int = -1,
                     log_start: int = -1):
    return FetchResponse.PartitionData(
        partition_index=target.partition, error_code=code, high_watermark=high_watermark,
        last_stable_offset=last_stable, log_start_offset=log_start,
        aborted_transactions=[] if code in _REFUSED_BEFORE_READ else None,
        preferred_read_replica=-1, records=EMPTY_RECORDS)
