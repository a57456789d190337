"""One partition as this broker holds it: the log plus what replication needs around it.

The log knows bytes and offsets; the partition adds the leader epoch, the replica set, the in-sync replicas and the
high watermark (the offset below which every in-sync replica has the data, so consumers may see it). While the
in-sync set is this broker alone (always on a single node) the high watermark follows the log end at every append.
Otherwise, as Kafka's Partition.scala: the leader keeps each follower's log end offset and when it last caught up
(`FollowerState`, updated by the followers' fetches), the high watermark is the smallest log end offset in the ISR,
and `wanted_isr` says how the ISR should change (a follower that has not caught up for replica.lag.time.max.ms
leaves; one that reached the high watermark joins); the broker writes that to ZooKeeper and the new ISR comes back
through the catalogue. A follower appends the leader's batches as they are (`append_replicated`) and takes the
leader's high watermark, capped at its own log end. A replica that becomes a follower (at start, or at a new leader
epoch) first finds where its log parts from the leader's by leader epoch (KIP-101, KIP-279): `needs_truncation` is
set until the replica fetcher has asked the leader OffsetForLeaderEpoch and `truncate_to_epoch_end` has cut the log
there. The high watermark is never the cut point: it lags the leader's by a round trip, so cutting to it could drop
a record the leader had acknowledged, which is lost for good if this replica then leads. A leader starts its epoch in
the log's leader epoch cache at its log end when it takes over (Kafka's makeLeader).

Idempotent and transactional appends pass the log's producer state first (odradek/storage/producer_state.py): a
client's retry of a recent batch is answered with that batch's offsets and not written again, and the first offset of
the earliest open transaction caps the last stable offset. Transaction markers are written here too, by the
transaction coordinator, and an abort is recorded in the active segment's `.txnindex`.

Waiters (fetch long polls, appends waiting for the ISR or an election) register a callback that runs once, after
the next append, high watermark move or assignment; the partition does not know about event loops, so the network
shell decides what a wake-up means.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Collection

from odradek.cluster.metadata import PartitionAssignment
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import encode_control_batch, parse_header, rebased
from odradek.storage.log import AppendResult, Log
from odradek.storage.producer_state import AppendOrigin, CompletedTransaction


class FollowerState:
    """What the leader knows of one follower: its log end offset (its last fetch offset) and when it last caught up
    (Kafka's lastCaughtUpTimeMs: it fetched from the leader's log end, or from the end the leader had at its
    previous fetch), and the broker epoch of the process those fetches came from (None until the leader checks)."""

    __slots__ = ("log_end_offset", "last_caught_up_ms", "_last_fetch_leader_end", "_last_fetch_ms", "broker_epoch")

    def __init__(self, now_ms: int, broker_epoch: int | None = None):
        self.broker_epoch = broker_epoch
        self.log_end_offset = -1
        self.last_caught_up_ms = now_ms
        self._last_fetch_leader_end = -1
        self._last_fetch_ms = now_ms

    def fetched(self, fetch_offset: int, leader_end: int, now_ms: int) -> None:
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self._last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self._last_fetch_ms)
        self.log_end_offset = fetch_offset
        self._last_fetch_leader_end = leader_end
        self._last_fetch_ms = now_ms


class Partition:
    __slots__ = ("topic", "index", "topic_id", "log", "assignment", "is_leader", "isr_is_self", "node_id",
                 "high_watermark", "_waiters", "followers", "needs_truncation", "isr_change")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log,
                 assignment: PartitionAssignment, node_id: int, high_watermark: int = 0):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self._set_assignment(assignment)
        # the high watermark saved in replication-offset-checkpoint, which never passes what the log holds
        self.high_watermark = log.log_end_offset if self.isr_is_self else min(high_watermark, log.log_end_offset)
        self._waiters: list[Callable[[], None]] = []
        self.followers: dict[int, FollowerState] = {}  # as leader: every other replica
        self.needs_truncation = not self.is_leader  # a follower's tail may not be its leader's
        self.isr_change: list[int] | None = None  # as leader: the ISR being written to the state znode
        if self.is_leader:
            log.leader_epochs.assign(assignment.leader_epoch, log.log_end_offset)

    def update_assignment(self, assignment: PartitionAssignment, now_ms: int) -> None:
        """Take the catalogue's replicas, leader, epoch and ISR. A new epoch starts the leader's view of its
        followers afresh (each one counts as caught up now, as Kafka's makeLeader) and starts the epoch at the log
        end, or, on a follower, has it find by leader epoch where its log parts from the new leader's."""
        previous = self.assignment
        self._set_assignment(assignment)
        new_epoch = (assignment.leader_epoch, assignment.leader) != (previous.leader_epoch, previous.leader)
        if self.is_leader:
            self.needs_truncation = False
            if new_epoch:
                self.log.leader_epochs.assign(assignment.leader_epoch, self.log.log_end_offset)
            if new_epoch or set(self.followers) != set(assignment.replicas) - {self.node_id}:
                self.followers = {r: FollowerState(now_ms) for r in assignment.replicas if r != self.node_id}
            self._advance_high_watermark()
        else:
            self.followers = {}
            if new_epoch:
                self.needs_truncation = True
        if assignment != previous:
            self.wake()  # long polls, and appends waiting for an election (append_waits.until_led)

    def last_offset_for_leader_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch at or below `leader_epoch`, where it ends) from the log's
        leader epoch cache; (-1, -1) when it has none."""
        return self.log.leader_epochs.end_offset_for(leader_epoch, self.log.log_end_offset)

    def truncate_to_epoch_end(self, leader_epoch: int, leader_end_offset: int) -> bool:
        """As follower, take the leader's OffsetForLeaderEpoch answer for our latest epoch (Kafka's
        AbstractFetcherThread.getOffsetTruncationState, KIP-279) and cut the log; True when the log now agrees with
        the leader's, False when the leader named an epoch we end elsewhere (cut there, then ask again with the
        epoch we have at the new end). An answer without an end offset leaves the high watermark as the only safe
        point, as Kafka's fallback."""
        log = self.log
        if leader_end_offset < 0:
            log.truncate_to(self.high_watermark)
            self.needs_truncation = False
            return True
        own_epoch, own_end = log.leader_epochs.end_offset_for(leader_epoch, log.log_end_offset)
        if leader_epoch < 0 or own_epoch < 0:
            log.truncate_to(leader_end_offset)
        elif own_epoch != leader_epoch:
            log.truncate_to(own_end)
            return False
        else:
            log.truncate_to(min(own_end, leader_end_offset))
        self.needs_truncation = False
        self.high_watermark = min(self.high_watermark, log.log_end_offset)
        return True

    def follower_fetched(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower's fetch from `fetch_offset`: everything below it is on that follower's log."""
        follower = self.followers.get(replica_id)
        if follower is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"Broker {replica_id} is no replica of this partition")
        follower.fetched(fetch_offset, self.log.log_end_offset, now_ms)
        self._advance_high_watermark()

    def _advance_high_watermark(self) -> None:
        """The smallest log end offset in the ISR (never backwards); waiters are woken when it moves."""
        end = self.log.log_end_offset
        for replica in self.assignment.isr:
            follower = self.followers.get(replica)
            if follower is not None:
                end = min(end, follower.log_end_offset)
        if end > self.high_watermark:
            self.high_watermark = end
            self.wake()

    def forget_restarted(self, broker_epochs: dict[int, int], now_ms: int) -> None:
        """As leader, start afresh the view of each follower registered under a new broker epoch since its fetches
        were counted: what its previous process fetched is no measure of the restarted one's log (which may have
        lost its tail), so it joins the ISR only once its own fetches reach the high watermark (Kafka's KIP-903)."""
        for replica, follower in self.followers.items():
            epoch = broker_epochs.get(replica)
            if follower.broker_epoch is None:
                follower.broker_epoch = epoch
            elif epoch is not None and epoch != follower.broker_epoch:
                self.followers[replica] = FollowerState(now_ms, epoch)

    def wanted_isr(self, now_ms: int, lag_time_max_ms: int, live: Collection[int]) -> list[int] | None:
        """As leader, the ISR the partition should have, or None when the current one is right: members that have
        not caught up for lag_time_max_ms leave (maybeShrinkIsr), live replicas that reached the high watermark
        join (maybeExpandIsr). Only a registered broker not in controlled shutdown may join (`live`, KIP-841's
        eligibility): a follower that just stopped, or is stopping and still fetching, looks caught up, and taking
        it back after the controller dropped it would have the two rewrite the ISR every check (acks=all appends
        refused NOT_ENOUGH_REPLICAS in between)."""
        isr = self.assignment.isr
        wanted = [r for r in isr if r == self.node_id or r not in self.followers
                  or now_ms - self.followers[r].last_caught_up_ms <= lag_time_max_ms]
        wanted += [r for r, follower in self.followers.items()
                   if r not in isr and r in live and follower.log_end_offset >= self.high_watermark
                   and now_ms - follower.last_caught_up_ms <= lag_time_max_ms]
        return None if wanted == isr else wanted

    def begin_isr_change(self, isr: list[int]) -> None:
        """As leader, the ISR `wanted_isr` asked for is being written to the state znode. Until the write ends,
        min.insync.replicas counts only the replicas in both the current ISR and the new one (see
        `check_min_insync`), while the high watermark still waits for every current member: a shrink's write may
        lose to the controller's, and only a written ISR may let the high watermark pass a replica."""
        self.isr_change = isr

    def end_isr_change(self, leader_epoch: int, written: bool) -> None:
        """The ISR write begun at `leader_epoch` ended. A written ISR is taken at once, as Kafka's leader takes its
        shrink under the lock that produce requests check the ISR under: waiting for the catalogue to read the
        znode back would let an acks=all produce in between be checked against the ISR just left (and fail after its
        append, NOT_ENOUGH_REPLICAS_AFTER_APPEND, where NOT_ENOUGH_REPLICAS refuses it before). The catalogue's read
        of the same znode then changes nothing."""
        isr, self.isr_change = self.isr_change, None
        if written and isr is not None and self.is_leader and self.leader_epoch == leader_epoch:
            self._set_assignment(dataclasses.replace(self.assignment, isr=isr))
            self._advance_high_watermark()
            self.wake()

    def check_min_insync(self) -> None:
        """acks=all on a partition with fewer in-sync replicas than min.insync.replicas (before the append, and once
        it is replicated); while an ISR change is being written, only replicas in the ISR both before and after it
        count."""
        isr = self.assignment.isr
        if self.isr_change is not None:
            isr = [replica for replica in isr if replica in self.isr_change]
        if len(isr) < self.log.config.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {set(isr)} is insufficient to satisfy the "
                             f"min.isr requirement of {self.log.config.min_insync_replicas} for partition "
                             f"{self.topic}-{self.index}")

    def append_replicated(self, data, headers, leader_high_watermark: int) -> None:
        """As follower: the leader's batches as they are (offsets, leader epochs), its producers' state with them,
        then the leader's high watermark up to our log end."""
        if headers:
            self.log.append(data, headers, assign_offsets=False)
            position = 0
            for header in headers:
                if header.producer_id >= 0:
                    completed = self.log.producer_state.replay(header, data[position:position + header.size])
                    if completed is not None and completed.aborted:
                        self.log.segments[-1].transaction_index.append(
                            self.log.producer_state.aborted_entry(completed))
                position += header.size
        high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            self.wake()  # consumers' long polls on this follower (KIP-392) read up to the high watermark

    def _set_assignment(self, assignment: PartitionAssignment) -> None:
        """`assignment` becomes the partition's, with what every append asks of it kept beside it (attributes, not
        properties: each read of a property is a Python call)."""
        self.assignment = assignment
        self.is_leader = assignment.leader == self.node_id
        self.isr_is_self = assignment.isr == [self.node_id]

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
        """Below this offset no transaction is open: the first offset of the earliest open one, at most the high
        watermark."""
        high_watermark = self.high_watermark
        first_unstable = self.log.producer_state.first_unstable_offset(default=high_watermark)
        return first_unstable if first_unstable < high_watermark else high_watermark

    def append(self, data, headers, origin: AppendOrigin = AppendOrigin.CLIENT, *,
               sizes_checked: bool = False) -> AppendResult:
        """Append as leader; returns the log's AppendResult (a retried batch's original offsets, nothing written)
        and wakes every waiter. Batches of idempotent producers come one per append (Produce v3+). A replica that
        is no longer the leader refuses (NOT_LEADER_OR_FOLLOWER, as Kafka's appendRecordsToLeader): an append can
        wait behind an earlier one or its record checks, and leadership can move meanwhile. `sizes_checked` as
        `Log.append`'s."""
        self._check_leader()
        producer_state = self.log.producer_state
        for header in headers:
            if header.producer_id >= 0:
                duplicate = producer_state.check_batch(header, origin)
                if duplicate is not None:
                    # Kafka answers a duplicate with the earlier batch's max timestamp as its log append time
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                        self.log.log_start_offset)
        result = self.log.append(data, headers, partition_leader_epoch=self.assignment.leader_epoch,
                                 sizes_checked=sizes_checked)
        base_offset = result.first_offset
        for header in headers:
            if header.producer_id >= 0:
                producer_state.record_batch(rebased(header, base_offset, header.partition_leader_epoch))
            base_offset += header.last_offset_delta + 1
        self._appended()
        return result

    def write_transaction_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                                 coordinator_epoch: int) -> CompletedTransaction | None:
        """Append a COMMIT or ABORT control batch for the producer; the transaction it closed here, if any."""
        self._check_leader()
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

    def _check_leader(self) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Broker {self.node_id} is not the leader of {self.topic}-{self.index} any more")

    def _appended(self) -> None:
        if self.isr_is_self:
            self.high_watermark = self.log.log_end_offset
        if self._waiters:  # long polls, followers' fetches among them (no call when none waits)
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
