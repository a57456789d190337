"""The transaction coordinator: the asyncio edge around the plain transaction state machine (transaction_state.py).

It owns producer ids (idempotent producers get theirs here too, as in Kafka), the in-memory transactions, the
compacted __transaction_state topic (created on first use, written before every state change takes effect, read back
at start while requests answer COORDINATOR_LOAD_IN_PROGRESS), the markers and the periodic abort of transactions past
their timeout. On one broker every write is a local append, so EndTxn writes PrepareCommit/PrepareAbort, the marker
of every partition of the transaction and CompleteCommit/CompleteAbort in one go; a crash between them leaves a
prepared transaction that loading (or the periodic check, after a failed write) completes by writing the markers
again, which is harmless for partitions that already have one. Markers on __consumer_offsets partitions also settle
the offsets the group coordinator holds for the transaction.

In a cluster every write waits for the in-sync replicas, as Kafka's (acks=-1, request.timeout.ms), and a request finds
fewer of them than transaction.state.log.min.isr (__transaction_state's min.insync.replicas, default 2) answered
COORDINATOR_NOT_AVAILABLE, so the client retries; a request that changed a transaction is answered once the replicas
of its __transaction_state partition have the change (`until_durable`), so the broker that leads the partition next
knows every transition a client was told of (an acknowledged commit is prepared there and completes); markers go out
only once the prepared state is on those replicas too, so no successor aborts a transaction some partitions already
hold committed; and a transaction is written complete only once each of its markers is on its partition's in-sync
replicas, so no partition is left with an open transaction that no coordinator will close. A broker cut off from
ZooKeeper answers COORDINATOR_NOT_AVAILABLE and aborts nothing at its timeout: past the session timeout the controller
has moved its partitions while its own view (and the transactions it holds) stands still, and answering from that
stale state told a producer already going on at the new coordinator INVALID_TXN_STATE.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Coroutine

from odradek.clock import now_ms
from odradek.cluster.append_waits import until_replicated
from odradek.cluster.peer import call_peer
from odradek.cluster.producer_ids import ProducerIdManager
from odradek.coordinator.offsets_topic import OFFSETS_TOPIC, partition_count, partition_for
from odradek.coordinator.transaction_state import (
    COMPLETED, PREPARED, TRANSACTION_STATE_TOPIC, TopicPartition, TransactionMetadata, TransactionState,
    add_partitions, begin_abort, check_producer, complete, fence_epoch, init_producer, parse_transaction_record,
    prepare_end, transaction_record,
)
from odradek.errors import ErrorCode, KafkaError
from odradek.periodic import every
from odradek.protocol import api
from odradek.records.batch import Record, decode_batch, encode_batch, validate_batches

WRITE_TXN_MARKERS = api("WriteTxnMarkers")

log = logging.getLogger("odradek.transactions")

LOAD_BATCHES_BETWEEN_YIELDS = 1000  # loading gives the event loop a turn this often
# Markers a partition's leader refused or did not get are sent again this soon (to the leader of then), not at the
# next periodic check (10 s): the transaction stays prepared meanwhile, and the producer's next one waits on it.
MARKER_RETRY_BACKOFF_S = 0.25



class TransactionCoordinator:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.max_timeout_ms: int = config["transaction.max.timeout.ms"]
        self.producer_ids = ProducerIdManager(broker.metadata)
        self.transactions: dict[str, TransactionMetadata] = {}
        self._loading: set[int] = set()  # led partitions being read: their ids answer COORDINATOR_LOAD_IN_PROGRESS
        self._leading: set[int] = set()
        self._markers_in_flight: set[str] = set()  # transactional ids whose markers are on their way
        self._tasks: list[asyncio.Task] = []

    @property
    def num_partitions(self) -> int:
        """How many partitions the transactional ids are spread over: those of __transaction_state once it exists,
        whatever this broker's transaction.state.log.num.partitions says (as Kafka's TransactionStateManager: the
        setting only sizes the topic it creates)."""
        return partition_count(self.broker.metadata.topics, TRANSACTION_STATE_TOPIC,
                               self.broker.config["transaction.state.log.num.partitions"])

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if TRANSACTION_STATE_TOPIC in self.broker.metadata.topics:
            self._leading = self._led_partitions()
            self._loading = set(self._leading)
            self._tasks.append(loop.create_task(self._load(sorted(self._leading))))
        interval_ms = self.broker.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._tasks.append(loop.create_task(every(interval_ms, self.check_transactions, "transaction timeout check")))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def ensure_topic(self) -> None:
        """__transaction_state, created on first use with Kafka's topic configs for it (TransactionStateManager's:
        compacted, uncompressed, no unclean election, transaction.state.log.segment.bytes) and min.insync.replicas =
        transaction.state.log.min.isr in a cluster (1 on a single node, whose replication factor is 1)."""
        config = self.broker.config
        min_isr = 1 if self.broker.controller is None else config["transaction.state.log.min.isr"]
        self.broker.ensure_internal_topic(TRANSACTION_STATE_TOPIC, config["transaction.state.log.num.partitions"], {
            "unclean.leader.election.enable": "false", "compression.type": "uncompressed",
            "cleanup.policy": "compact", "min.insync.replicas": str(min_isr),
            "segment.bytes": str(config["transaction.state.log.segment.bytes"])},
            "transaction.state.log.replication.factor")

    def _check_available(self, transactional_id: str) -> None:
        if not transactional_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "The transactional id must not be empty.")
        self.ensure_topic()
        self.broker.check_coordinator_partition(TRANSACTION_STATE_TOPIC,
                                                partition_for(transactional_id, self.num_partitions))
        if partition_for(transactional_id, self.num_partitions) in self._loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    def _check_writable(self, transactional_id: str) -> None:
        """_check_available for a request that writes the transaction's state: Kafka's coordinator writes with
        acks=all, so fewer in-sync replicas than min.insync.replicas refuse it, retriably (COORDINATOR_NOT_AVAILABLE,
        as Kafka's TransactionStateManager maps NOT_ENOUGH_REPLICAS)."""
        self._check_available(transactional_id)
        try:
            self._state_partition(transactional_id).check_min_insync()
        except KafkaError as exc:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, exc.message) from None

    def _led_partitions(self) -> set[int]:
        return {index for index in range(self.num_partitions) if self.broker.leads(TRANSACTION_STATE_TOPIC, index)}

    def follow_leadership(self) -> None:
        """In a ZooKeeper cluster: load the __transaction_state partitions this broker has come to lead, only those
        (their ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile; the others' stay available), and forget the
        transactional ids of those led elsewhere now (NOT_COORDINATOR from then on), as Kafka's
        TransactionStateManager on leadership changes."""
        led = self._led_partitions()
        for transactional_id in [t for t in self.transactions
                                 if partition_for(t, self.num_partitions) in self._leading - led]:
            del self.transactions[transactional_id]
        gained = led - self._leading
        self._leading = led
        self._loading = (self._loading & led) | gained
        if gained:
            self._tasks.append(asyncio.get_running_loop().create_task(self._load(sorted(gained))))

    # ------------------------------------------------------------------------------------------- requests
    def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch). Without a transactional id: a fresh id at epoch 0. With one: the next epoch of its
        producer id, after aborting an open transaction of an older instance (Kafka aborts and answers
        CONCURRENT_TRANSACTIONS so the client asks again; here the abort is already done, so we answer at once)."""
        if transactional_id is None:
            return self.producer_ids.next_id(), 0
        self._check_writable(transactional_id)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise KafkaError(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        now = now_ms()
        current = self.transactions.get(transactional_id)
        if current is not None and current.state is TransactionState.ONGOING:
            self._abort(fence_epoch(current, now))
            current, producer_id = self.transactions[transactional_id], -1
        elif current is not None and current.state in PREPARED:
            current = self._send_markers(current)
        metadata = init_producer(current, transactional_id, timeout_ms, now, self.producer_ids.next_id, producer_id,
                                 producer_epoch)
        self._write(metadata)
        return metadata.producer_id, metadata.producer_epoch

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[TopicPartition]) -> None:
        self._check_writable(transactional_id)
        metadata = add_partitions(self.transactions.get(transactional_id), producer_id, producer_epoch,
                                  frozenset(partitions), now_ms())
        if metadata is not None:
            self._write(metadata)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""
        self.broker.group_coordinator.ensure_offsets_topic()
        offsets_partition = partition_for(group_id, self.broker.group_coordinator.num_partitions)
        self.add_partitions(transactional_id, producer_id, producer_epoch, {(OFFSETS_TOPIC, offsets_partition)})

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        self._check_writable(transactional_id)
        prepared = prepare_end(self.transactions.get(transactional_id), producer_id, producer_epoch, commit,
                               now_ms())
        if prepared is not None:
            self._write(prepared)
            self._send_markers(prepared)

    def check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> None:
        """TxnOffsetCommit's guard: the producer is the transactional id's current one. Only this id's coordinator
        knows; the group's coordinator on another broker relies, as Kafka's, on the offsets partition's producer
        state, which refuses a stale epoch on append."""
        if not self.broker.leads(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, self.num_partitions)):
            return
        self._check_available(transactional_id)
        check_producer(self.transactions.get(transactional_id), producer_id, producer_epoch)

    def describe(self, transactional_id: str) -> TransactionMetadata:
        self._check_available(transactional_id)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return metadata

    def list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int,
                          pattern: str | None) -> list[TransactionMetadata]:
        """ListTransactions' filters: state names, producer ids, open for at least `min_duration_ms` (-1: any), and a
        regular expression over the transactional id."""
        if self._loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        matcher = re.compile(pattern) if pattern else None
        now = now_ms()
        return [metadata for transactional_id, metadata in sorted(self.transactions.items())
                if (not states or metadata.state.display_name in states)
                and (not producer_ids or metadata.producer_id in producer_ids)
                and (min_duration_ms < 0 or (metadata.start_ms >= 0 and now - metadata.start_ms >= min_duration_ms))
                and (matcher is None or matcher.fullmatch(transactional_id))]

    def until_durable(self, transactional_id: str) -> Awaitable[None] | None:
        """None when every write of this transactional id's __transaction_state partition is on its in-sync
        replicas (always on a single node), else an awaitable that ends when it is: KafkaError NOT_COORDINATOR if
        leadership moved meanwhile, COORDINATOR_NOT_AVAILABLE if the replicas did not take it in
        request.timeout.ms (Kafka's TransactionStateManager maps an append's errors so)."""
        tail = self._unreplicated_tail(transactional_id)
        return None if tail is None else self._until_replicated(*tail)

    def _unreplicated_tail(self, transactional_id: str) -> tuple[tuple[str, int], int] | None:
        """(partition, last offset) of this transactional id's __transaction_state partition while its high
        watermark has not passed its end; None once it has."""
        key = (TRANSACTION_STATE_TOPIC, partition_for(transactional_id, self.num_partitions))
        partition = self.broker.partitions.get(key)
        if partition is None or partition.high_watermark >= partition.log.log_end_offset:
            return None
        return key, partition.log.log_end_offset - 1

    def _replicated(self, key: tuple[str, int], last_offset: int) -> Awaitable[KafkaError | None]:
        return until_replicated(lambda: self.broker.partitions.get(key), last_offset,
                                time.monotonic() + self.broker.config["request.timeout.ms"] / 1000)

    async def _until_replicated(self, key: tuple[str, int], last_offset: int) -> None:
        error = await self._replicated(key, last_offset)
        if error is not None:
            log.warning("write to %s-%d not on the in-sync replicas: %s", *key, error)
            raise KafkaError(ErrorCode.NOT_COORDINATOR if error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                             else ErrorCode.COORDINATOR_NOT_AVAILABLE, error.message)

    # ----------------------------------------------------------------------------------------- internals
    def _abort(self, fenced: TransactionMetadata) -> None:
        aborting = begin_abort(fenced, now_ms())
        self._write(aborting)
        self._send_markers(aborting)

    def _send_markers(self, prepared: TransactionMetadata) -> TransactionMetadata:
        """Write the marker to every partition of a prepared transaction, then complete it; the metadata after (still
        prepared while markers are on their way, or if a write failed: the periodic check tries again). No marker
        goes out before the prepared state is on the in-sync replicas of __transaction_state (Kafka's coordinator
        sends them from its append's callback): markers of a commit whose record died with its leader, then the
        abort its successor does (at the timeout, or fencing the producer), left a transaction half committed.
        Partitions led by other brokers get theirs through WriteTxnMarkers, and markers written here that are not on
        their in-sync replicas yet are waited for, in the background: the transaction completes when every marker is
        safe."""
        if prepared.transactional_id in self._markers_in_flight:
            return prepared
        tail = self._unreplicated_tail(prepared.transactional_id)
        if tail is not None:
            self._in_background(prepared, self._markers_once_replicated(prepared, *tail))
            return prepared
        return self._write_markers(prepared)

    def _write_markers(self, prepared: TransactionMetadata) -> TransactionMetadata:
        """_send_markers once the prepared state is on the in-sync replicas."""
        commit = prepared.state is TransactionState.PREPARE_COMMIT
        coordinator_epoch = self._state_partition(prepared.transactional_id).leader_epoch
        remote: dict[int, list[TopicPartition]] = {}
        unreplicated: list[tuple[TopicPartition, int]] = []  # markers written here, and their offsets
        for topic, index in sorted(prepared.partitions):
            if not self.broker.has_partition(topic, index):  # deleted since
                continue
            if not self.broker.leads(topic, index):
                leader = self.broker.metadata.topics[topic].partitions[index].leader
                remote.setdefault(leader, []).append((topic, index))
                continue
            try:
                self.broker.write_transaction_marker(topic, index, prepared.producer_id, prepared.producer_epoch,
                                                     commit, coordinator_epoch)
            except KafkaError as exc:
                log.warning("marker for %s on %s-%d refused: %s", prepared.transactional_id, topic, index, exc)
            except OSError as exc:
                log.error("marker for %s on %s-%d failed: %s", prepared.transactional_id, topic, index, exc)
                return prepared
            else:
                partition = self.broker.partitions[(topic, index)]
                if partition.high_watermark < partition.log.log_end_offset:
                    unreplicated.append(((topic, index), partition.log.log_end_offset - 1))
        if remote or unreplicated:
            self._in_background(prepared, self._finish_markers(prepared, unreplicated, remote, commit,
                                                               coordinator_epoch))
            return prepared
        completed = complete(prepared, now_ms())
        self._write(completed)
        return completed

    def _in_background(self, prepared: TransactionMetadata, work: Coroutine) -> None:
        """Run `work` on the prepared transaction's markers; none other starts for it until `work` ends (it takes
        the transactional id out of _markers_in_flight)."""
        self._markers_in_flight.add(prepared.transactional_id)
        self._tasks = [task for task in self._tasks if not task.done()]
        self._tasks.append(asyncio.get_running_loop().create_task(work))

    async def _markers_once_replicated(self, prepared: TransactionMetadata, key: tuple[str, int],
                                       last_offset: int) -> None:
        """_send_markers once the high watermark of __transaction_state passed the prepared state: whichever replica
        leads next has it (so min.insync.replicas does not matter here). Again soon if the replicas did not take it
        in request.timeout.ms; nothing if leadership moved: the next leader finishes what it loads."""
        try:
            error = await self._replicated(key, last_offset)
        finally:
            self._markers_in_flight.discard(prepared.transactional_id)
        if error is None or error.code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:  # the high watermark passed it
            if self.transactions.get(prepared.transactional_id) == prepared:
                # not _send_markers: the partition's end may have moved on with other ids' writes, and waiting for
                # it again could go on as long as they keep coming
                self._write_markers(prepared)
        elif error.code == ErrorCode.REQUEST_TIMED_OUT:
            log.warning("%s prepared, not on the in-sync replicas of %s-%d in time; its markers wait",
                        prepared.transactional_id, *key)
            await self._send_markers_again_soon(prepared)

    async def _send_markers_again_soon(self, prepared: TransactionMetadata) -> None:
        """As Kafka's marker channel, again soon (MARKER_RETRY_BACKOFF_S), to each partition's leader of then, unless
        the transaction moved on or this broker is cut off from ZooKeeper (the periodic check takes it up then)."""
        await asyncio.sleep(MARKER_RETRY_BACKOFF_S)
        if self.transactions.get(prepared.transactional_id) == prepared and self.broker.membership.in_session:
            self._send_markers(prepared)

    async def _finish_markers(self, prepared: TransactionMetadata, unreplicated: list[tuple[TopicPartition, int]],
                              remote: dict[int, list[TopicPartition]], commit: bool, coordinator_epoch: int) -> None:
        """Wait for the markers written here to reach their in-sync replicas and send WriteTxnMarkers to each other
        leader (which answers once its replicas have them); the transaction completes once every partition has its
        marker, else they are sent again after MARKER_RETRY_BACKOFF_S."""
        Request = WRITE_TXN_MARKERS.request
        endpoints = {b.node_id: b for b in self.broker.membership.live_brokers()}
        done = True
        try:
            for key, last_offset in unreplicated:
                try:
                    await self._until_replicated(key, last_offset)
                except KafkaError:
                    done = False
            for leader, partitions in remote.items():
                topics: dict[str, list[int]] = {}
                for topic, index in partitions:
                    topics.setdefault(topic, []).append(index)
                request = Request(markers=[Request.WritableTxnMarker(
                    producer_id=prepared.producer_id, producer_epoch=prepared.producer_epoch,
                    transaction_result=commit, coordinator_epoch=coordinator_epoch,
                    topics=[Request.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                            for name, indexes in topics.items()])])
                endpoint = endpoints.get(leader)
                try:
                    if endpoint is None:
                        raise ConnectionError(f"broker {leader} is not live")
                    answer = await call_peer(self.broker.inter_broker, endpoint, "WriteTxnMarkers", 1, request,
                                             client_id=f"broker-{self.broker.node_id}-txn-coordinator",
                                             timeout=self.broker.config["request.timeout.ms"] / 1000 + 5)
                except (OSError, asyncio.TimeoutError) as exc:
                    log.warning("markers for %s to broker %d failed (%s); retried later", prepared.transactional_id,
                                leader, exc)
                    done = False
                    continue
                failed = [(t.name, p.partition_index, ErrorCode(p.error_code)) for m in answer.markers
                          for t in m.topics for p in t.partitions
                          if p.error_code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
                if failed:
                    log.warning("markers for %s refused by broker %d: %s; retried later", prepared.transactional_id,
                                leader, failed)
                    done = False
        finally:
            self._markers_in_flight.discard(prepared.transactional_id)
        if done and self.transactions.get(prepared.transactional_id) == prepared:
            self._write(complete(prepared, now_ms()))
        elif not done:
            await self._send_markers_again_soon(prepared)

    def _state_partition(self, transactional_id: str):
        return self.broker.partition(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, self.num_partitions))

    def _write(self, metadata: TransactionMetadata) -> None:
        """Persist the transaction's new metadata, then make it current."""
        key, value = transaction_record(metadata)
        data = encode_batch([Record(0, now_ms(), key, value)])
        try:
            self._state_partition(metadata.transactional_id).append(data, validate_batches(data))
        except OSError as exc:
            log.error("writing the state of %s failed: %s", metadata.transactional_id, exc)
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from None
        self.transactions[metadata.transactional_id] = metadata

    def _forget(self, metadata: TransactionMetadata) -> None:
        """transactional.id.expiration.ms: drop an idle transactional id (a tombstone for compaction)."""
        key, _ = transaction_record(metadata)
        data = encode_batch([Record(0, now_ms(), key, None)])
        self._state_partition(metadata.transactional_id).append(data, validate_batches(data))
        del self.transactions[metadata.transactional_id]

    # ---------------------------------------------------------------------------------- periodic work
    def check_transactions(self, now: int) -> None:
        """Abort (with a bumped epoch) transactions open past their timeout, finish prepared ones whose markers
        failed, forget transactional ids idle past transactional.id.expiration.ms. Not while loading, nor cut off
        from ZooKeeper (another broker may coordinate these ids by now: an abort from here would fence the producer
        there with markers of a bumped epoch)."""
        if self._loading or not self.broker.membership.in_session:
            return
        id_expiration_ms = self.broker.config["transactional.id.expiration.ms"]
        for metadata in list(self.transactions.values()):
            if metadata.expired(now):
                log.info("aborting transaction %s: open longer than %d ms", metadata.transactional_id,
                         metadata.timeout_ms)
                self._abort(fence_epoch(metadata, now))
            elif metadata.state in PREPARED:
                self._send_markers(metadata)
            elif metadata.state in COMPLETED and now - metadata.last_update_ms > id_expiration_ms:
                self._forget(metadata)

    # -------------------------------------------------------------------------------------------- loading
    async def _load(self, indexes: list[int]) -> None:
        """Read these partitions' transactions (each one still led), then finish their prepared ones."""
        started = time.monotonic()
        for index in indexes:
            if index not in self._leading:
                continue  # led elsewhere since
            try:
                await self._load_partition(index)
            except (KafkaError, OSError):
                log.exception("loading %s-%d failed; its transactions start empty", TRANSACTION_STATE_TOPIC, index)
            self._loading.discard(index)
        loaded = set(indexes) & self._leading
        for metadata in list(self.transactions.values()):
            if metadata.state in PREPARED and partition_for(metadata.transactional_id, self.num_partitions) in loaded:
                self._send_markers(metadata)
        log.info("loaded %s partition(s) %s: %d transactional id(s) in all, %.0f ms", TRANSACTION_STATE_TOPIC,
                 sorted(loaded), len(self.transactions), (time.monotonic() - started) * 1000)

    async def _load_partition(self, index: int) -> None:
        batches = self.broker.partition(TRANSACTION_STATE_TOPIC, index).log.iter_batches()
        for count, (header, batch) in enumerate(batches, 1):
            if not header.is_control:
                for record in decode_batch(batch)[1]:
                    transactional_id, metadata = parse_transaction_record(record.key, record.value)
                    if metadata is None:
                        self.transactions.pop(transactional_id, None)
                    else:
                        self.transactions[transactional_id] = metadata
            if count % LOAD_BATCHES_BETWEEN_YIELDS == 0:
                await asyncio.sleep(0)
