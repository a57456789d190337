"""ConsumerConnector: the design's high-level consumer: a group member whose messages arrive on streams.

One confluent-kafka Consumer joins the group; a fetcher thread polls it and deals each message to a stream
(a queue with an iterator), always the same stream for a given partition so per-partition order holds.
Streams are asked for per topic (`create_message_streams({"orders": 2})`) or by a filter over topic names
(`Whitelist("orders|payments")`, `Blacklist("tmp-.*")`); a filter is re-evaluated against the cluster's topics
every `topic_refresh_ms`, so topics created later are picked up (internal `__` topics never match).
`caught_up` is true once the group has handed this member its partitions (possibly none), or the filter matches no
topic, and each of them has been read to its end once (client/behind.py): until then, waiting (joining a new group
takes the broker's group.initial.rebalance.delay.ms, then the first fetches) is not idleness.
`commit_offsets()` commits, for every partition, the offset after the last message a stream handed out: what the
application has seen, not merely what was fetched. Offsets are committed when asked, or every
`auto_commit_interval_ms` when given; a partition leaving this member in a rebalance is committed then only with
auto commit, as Kafka's old consumer did (auto.commit.enable): otherwise the application commits what it has
processed, and the partition's next owner starts from there, so a message handed out but not yet processed when
the member dies is read again rather than lost. Messages fetched for an assignment that has ended (still queued
in a stream when the partition left, or came back) are dropped, never handed out: each assignment of a partition
has its own number, and a queued message carries the one it was fetched under. Every call into the librdkafka
consumer (commits, assignments) runs on the fetcher thread: a synchronous librdkafka commit made while another
thread polls the same consumer never returns.

Two ways to be a group member:
- `bootstrap_servers` alone: the broker's group coordinator (JoinGroup/SyncGroup, offsets by OffsetCommit).
- `zookeeper_connect` (seed 004): the consumers coordinate through ZooKeeper themselves
  (odradek.client.zookeeper: registration, the seed's range algorithm, partition owners); librdkafka is only told
  which partitions to fetch (assign). Offsets go where `offsets_storage` says ("zookeeper": the persistent
  /consumers/[group]/offsets nodes; "kafka": the group coordinator, by OffsetCommit/OffsetFetch), to both with
  `dual_commit_enabled`, in which case a partition starts from the later of the two: so the seed's migration
  (zookeeper -> kafka with dual commit -> dual off, and back the same way) neither loses nor repeats a position.
  docs/zookeeper-consumers.md has the design.
"""

from __future__ import annotations

import itertools
import queue
import re
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import confluent_kafka

from odradek.client.behind import Behind
from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError
from odradek.client.messages import Decoder, Message, identity

Partition = tuple[str, int]

_END = object()
STREAM_QUEUE_SIZE = 1000


class TopicFilter:
    def __init__(self, pattern: str):
        self.pattern = re.compile(pattern)

    def matches(self, topic: str) -> bool:
        raise NotImplementedError


class Whitelist(TopicFilter):
    """Topics whose whole name matches the regex."""

    def matches(self, topic: str) -> bool:
        return not topic.startswith("__") and self.pattern.fullmatch(topic) is not None


class Blacklist(TopicFilter):
    """Topics whose whole name does not match the regex."""

    def matches(self, topic: str) -> bool:
        return not topic.startswith("__") and self.pattern.fullmatch(topic) is None


class KafkaStream:
    """An iterator of Messages. It ends at `shutdown()`, or after `consumer_timeout_ms` with nothing to hand out
    when the connector was given one."""

    def __init__(self, connector: "ConsumerConnector"):
        self._connector = connector
        self._queue: queue.Queue = queue.Queue(STREAM_QUEUE_SIZE)

    def __iter__(self) -> Iterator[Message]:
        timeout = self._connector.consumer_timeout_ms
        while True:
            try:
                item = self._queue.get(timeout=None if timeout is None else timeout / 1000)
            except queue.Empty:
                return
            if item is _END:
                self._queue.put(_END)  # every later iteration ends too
                return
            assignment, message = item
            if self._connector._hand_out(message, assignment):
                yield message


class ConsumerConnector:
    def __init__(self, bootstrap_servers: str | None, group_id: str, *, auto_offset_reset: str = "earliest",
                 consumer_timeout_ms: int | None = None, topic_refresh_ms: int = 2000,
                 key_decoder: Decoder = identity, value_decoder: Decoder = identity,
                 zookeeper_connect: str | None = None, offsets_storage: str | None = None,
                 dual_commit_enabled: bool = False, auto_commit_interval_ms: int | None = None,
                 config: dict[str, Any] | None = None):
        """`bootstrap_servers` may be None with `zookeeper_connect` (the brokers are read from /brokers/ids).
        `offsets_storage` is "zookeeper" (the default with `zookeeper_connect`, as Kafka's old consumer) or
        "kafka"."""
        self.group_id = group_id
        self.consumer_timeout_ms = consumer_timeout_ms
        self.topic_refresh_ms = topic_refresh_ms
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.auto_offset_reset = auto_offset_reset
        self.offsets_storage = offsets_storage or ("zookeeper" if zookeeper_connect else "kafka")
        self.dual_commit_enabled = dual_commit_enabled
        self.auto_commit_interval_ms = auto_commit_interval_ms
        if self.offsets_storage not in ("zookeeper", "kafka"):
            raise ValueError(f"offsets.storage must be zookeeper or kafka, not {self.offsets_storage!r}")
        if not zookeeper_connect and (self.offsets_storage == "zookeeper" or dual_commit_enabled):
            raise ValueError("offsets.storage=zookeeper and dual.commit.enabled need zookeeper.connect")
        self._zookeeper = None
        self._member = None
        if zookeeper_connect:
            from odradek.client import zookeeper  # kazoo is loaded only by ZooKeeper users

            self._zookeeper = zookeeper.connect(zookeeper_connect)
            bootstrap_servers = bootstrap_servers or zookeeper.bootstrap_servers(self._zookeeper)
        self._consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": group_id, "auto.offset.reset": auto_offset_reset,
            "enable.auto.commit": False, "enable.partition.eof": True, "logger": LIBRDKAFKA_LOGGER,
            **(config or {})})
        self._consumed: dict[tuple[str, int], int] = {}
        self._assignments: dict[Partition, int] = {}  # the number of each assigned partition's assignment
        self._assignment_numbers = itertools.count()
        self._consumed_lock = threading.Lock()  # both dicts: read by the application's thread, set by the fetcher
        self._streams_of: dict[str, list[KafkaStream]] = {}  # topic ("" for a filter) -> its streams
        self._filter: TopicFilter | None = None
        self._stopping = threading.Event()
        self._behind = Behind()  # (topic, partition) pairs not read to their end yet
        self._fetcher: threading.Thread | None = None
        self._fetcher_calls: queue.SimpleQueue[tuple[Any, Future]] = queue.SimpleQueue()

    # ----------------------------------------------------------------------------------------- streams
    def create_message_streams(self, topic_count: dict[str, int]) -> dict[str, list[KafkaStream]]:
        """`{topic: number of streams}` -> `{topic: streams}`."""
        self._claim()
        self._streams_of = {topic: [KafkaStream(self) for _ in range(count)] for topic, count in topic_count.items()}
        if self._zookeeper is None:  # before the fetcher polls: librdkafka calls from two threads can hang
            self._consumer.subscribe(sorted(topic_count), on_assign=self._assigned, on_revoke=self._revoked)
        self._start()
        if self._zookeeper is not None:
            self._join_through_zookeeper(dict(topic_count), "static")
        return dict(self._streams_of)

    def create_message_streams_by_filter(self, topic_filter: TopicFilter, num_streams: int = 1) -> list[KafkaStream]:
        """Streams over every topic the filter accepts, now or later."""
        self._claim()
        self._filter = topic_filter
        self._streams_of = {"": [KafkaStream(self) for _ in range(num_streams)]}
        self._start()
        if self._zookeeper is not None:
            pattern = "white_list" if isinstance(topic_filter, Whitelist) else "black_list"
            self._join_through_zookeeper({topic_filter.pattern.pattern: num_streams}, pattern)
        return list(self._streams_of[""])

    def _claim(self) -> None:
        if self._fetcher is not None:
            raise ClientError("this connector already has its streams; create another connector")

    def _start(self) -> None:
        self._fetcher = threading.Thread(target=self._fetch, name="odradek-connector-fetcher", daemon=True)
        self._fetcher.start()

    def _join_through_zookeeper(self, subscription: dict[str, int], pattern: str) -> None:
        from odradek.client.zookeeper import Registration, ZooKeeperGroupMember

        self._member = ZooKeeperGroupMember(self._zookeeper, self.group_id, Registration(subscription, pattern),
                                            release=self._release, acquire=self._acquire)
        self._member.start()

    def _release(self, partitions: set[Partition]) -> None:
        """Before giving partitions up: stop fetching and handing out their messages (committing what the streams
        handed out of them with auto commit)."""
        tps = [confluent_kafka.TopicPartition(topic, index) for topic, index in sorted(partitions)]
        def unassign():
            self._consumer.incremental_unassign(tps)
            self._behind.released(partitions)
            return self._ended(partitions)

        self._given_up(self._on_fetcher(unassign))

    def _acquire(self, partitions: set[Partition]) -> None:
        """After claiming partitions: fetch each from its committed offset (auto_offset_reset where none is)."""
        committed = self._committed(partitions)
        reset = confluent_kafka.OFFSET_BEGINNING if self.auto_offset_reset == "earliest" else confluent_kafka.OFFSET_END
        tps = [confluent_kafka.TopicPartition(topic, index, committed.get((topic, index), reset))
               for topic, index in sorted(partitions)]
        def assign():
            self._consumer.incremental_assign(tps)
            self._behind.acquired(partitions)
            self._numbered(partitions)

        self._on_fetcher(assign)

    def _fetch(self) -> None:
        next_refresh = 0.0
        next_auto_commit = self._next_auto_commit()
        subscribed: list[str] = []
        try:
            while not self._stopping.is_set():
                self._serve_fetcher_calls()
                if time.monotonic() >= next_auto_commit:
                    self.commit_offsets()
                    next_auto_commit = self._next_auto_commit()
                if self._filter is not None and self._member is None and time.monotonic() >= next_refresh:
                    subscribed = self._follow_filter(subscribed)
                    next_refresh = time.monotonic() + self.topic_refresh_ms / 1000
                if not subscribed and self._filter is not None and self._member is None:
                    self._stopping.wait(0.05)
                    continue
                fetched = self._consumer.consume(500, 0.1)
                with self._consumed_lock:  # what they were fetched under (dealing may serve a rebalance's calls)
                    assignments = dict(self._assignments)
                for raw in fetched:
                    error = raw.error()
                    if error is None:
                        self._deal(Message.of(raw, self.key_decoder, self.value_decoder), assignments)
                    elif error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        self._behind.reached_end((raw.topic(), raw.partition()))
        finally:
            self._serve_fetcher_calls()
            for streams in self._streams_of.values():
                for stream in streams:
                    self._end(stream)

    def _follow_filter(self, subscribed: list[str]) -> list[str]:
        try:
            topics = self._consumer.list_topics(timeout=5).topics
        except confluent_kafka.KafkaException:
            return subscribed  # the cluster is unreachable for now; keep what we have
        wanted = sorted(name for name in topics if self._filter.matches(name))
        if wanted != subscribed:
            if wanted:
                self._consumer.subscribe(wanted, on_assign=self._assigned, on_revoke=self._revoked)
            else:
                self._consumer.unsubscribe()
        if not wanted:
            self._behind.assigned(())
        return wanted

    def _assigned(self, consumer, partitions) -> None:
        """on_assign: confluent-kafka assigns `partitions` itself after this returns."""
        assigned = [(tp.topic, tp.partition) for tp in partitions]
        self._behind.assigned(assigned)
        self._numbered(assigned)

    def _revoked(self, consumer, partitions) -> None:
        """on_revoke (on the fetcher thread, inside consume; or in close, after shutdown's own commit): as a
        ZooKeeper member's release."""
        consumed = self._ended([(tp.topic, tp.partition) for tp in partitions])
        if not self._stopping.is_set():
            self._given_up(consumed)

    def _numbered(self, partitions) -> None:
        """Partitions just assigned: a new assignment number each, which the messages fetched for it carry."""
        with self._consumed_lock:
            for tp in partitions:
                self._assignments[tp] = next(self._assignment_numbers)

    def _ended(self, partitions) -> dict[Partition, int]:
        """Partitions no longer assigned: none of their queued messages is handed out any more; the offsets the
        streams had handed out of them."""
        with self._consumed_lock:
            for tp in partitions:
                self._assignments.pop(tp, None)
            return {tp: self._consumed.pop(tp) for tp in partitions if tp in self._consumed}

    def _given_up(self, consumed: dict[Partition, int]) -> None:
        """What was handed out of partitions leaving this member: committed with auto commit only (see the module
        docstring)."""
        if self.auto_commit_interval_ms is not None:
            self._store(consumed)

    @property
    def caught_up(self) -> bool:
        """Whether every partition this member has was read to its end once (see the module docstring)."""
        if self._member is not None and self._member.rebalances and self._behind.partitions is None:
            return True  # the ZooKeeper group settled and left this member nothing (acquire is never called)
        return self._behind.caught_up

    def _deal(self, message: Message, assignments: dict[Partition, int]) -> None:
        streams = self._streams_of.get(message.topic) or self._streams_of[""]
        stream = streams[zlib.crc32(f"{message.topic}\0{message.partition}".encode()) % len(streams)]
        self._put(stream, (assignments.get((message.topic, message.partition), -1), message))  # -1: none matches

    def _put(self, stream: KafkaStream, item: tuple[int, Message]) -> None:
        """Wait for room in the stream (back-pressure on fetching), unless we are shutting down."""
        while not self._stopping.is_set():
            try:
                stream._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                self._serve_fetcher_calls()  # a rebalance must not wait for a reader

    @staticmethod
    def _end(stream: KafkaStream) -> None:
        """Put the end marker, dropping an undelivered message if the stream is full (nobody may be reading)."""
        while True:
            try:
                stream._queue.put_nowait(_END)
                return
            except queue.Full:
                try:
                    stream._queue.get_nowait()
                except queue.Empty:
                    pass

    def _hand_out(self, message: Message, assignment: int) -> bool:
        """Whether a stream hands `message` out: only under the assignment it was fetched for (then it counts as
        consumed)."""
        tp = (message.topic, message.partition)
        with self._consumed_lock:
            if self._assignments.get(tp) != assignment:
                return False
            self._consumed[tp] = message.offset + 1
            return True

    # ------------------------------------------------------------------------------------------ offsets
    def _next_auto_commit(self) -> float:
        interval = self.auto_commit_interval_ms
        return float("inf") if interval is None else time.monotonic() + interval / 1000

    def commit_offsets(self, timeout: float = 30.0) -> dict[tuple[str, int], int]:
        """Commit the position after the last message handed out on each partition; returns what was committed.
        Through ZooKeeper, only partitions this consumer still owns: a released one was committed when released,
        and its new owner's commits must not be overwritten."""
        with self._consumed_lock:
            consumed = dict(self._consumed)
        if self._member is not None:
            owned = self._member.owned
            consumed = {tp: offset for tp, offset in consumed.items() if tp in owned}
        self._store(consumed, timeout)
        return consumed

    def _store(self, offsets: dict[Partition, int], timeout: float = 30.0) -> None:
        """Write offsets where offsets_storage says, and to both stores with dual commit."""
        if not offsets:
            return
        if self.offsets_storage == "zookeeper" or self.dual_commit_enabled:
            from odradek.client.zookeeper import write_offset

            for (topic, index), offset in sorted(offsets.items()):
                write_offset(self._zookeeper, self.group_id, topic, index, offset)
        if self.offsets_storage == "kafka" or self.dual_commit_enabled:
            tps = [confluent_kafka.TopicPartition(topic, index, offset)
                   for (topic, index), offset in sorted(offsets.items())]
            self._on_fetcher(lambda: self._commit(tps), timeout)

    def _committed(self, partitions: set[Partition]) -> dict[Partition, int]:
        """The committed offset of each partition that has one: from offsets_storage, or the later of both stores
        with dual commit (during a migration the store being left may be ahead)."""
        found: dict[Partition, int] = {}
        if self.offsets_storage == "kafka" or self.dual_commit_enabled:
            asked = [confluent_kafka.TopicPartition(topic, index) for topic, index in sorted(partitions)]
            for tp in self._on_fetcher(lambda: self._consumer.committed(asked, timeout=10)):
                if tp.error is None and tp.offset >= 0:
                    found[(tp.topic, tp.partition)] = tp.offset
        if self.offsets_storage == "zookeeper" or self.dual_commit_enabled:
            from odradek.client.zookeeper import read_offset

            for topic, index in partitions:
                offset = read_offset(self._zookeeper, self.group_id, topic, index)
                if offset is not None:
                    found[(topic, index)] = max(offset, found.get((topic, index), offset))
        return found

    def _on_fetcher(self, call, timeout: float = 30.0):
        """Run `call` on the fetcher thread (at once when that is this thread, or there is none) and return its
        result."""
        if self._fetcher is None or not self._fetcher.is_alive() or threading.current_thread() is self._fetcher:
            return call()
        done: Future = Future()
        self._fetcher_calls.put((call, done))
        return done.result(timeout)

    def _serve_fetcher_calls(self) -> None:
        while True:
            try:
                call, done = self._fetcher_calls.get_nowait()
            except queue.Empty:
                return
            try:
                done.set_result(call())
            except Exception as exc:  # handed to the caller's thread
                done.set_exception(exc)

    def _commit(self, offsets: list) -> None:
        try:
            results = self._consumer.commit(offsets=offsets, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            raise ClientError.of(exc) from None
        for result in results or ():
            if result.error is not None:
                raise ClientError.of(result.error)

    def shutdown(self) -> None:
        """Leave the group and end every stream (uncommitted progress is not committed, unless auto commit is on).
        Through ZooKeeper, closing the session drops this consumer's registration and owner nodes at once, so the
        others rebalance immediately."""
        if self._member is not None:
            self._member.stop()
        if self.auto_commit_interval_ms is not None:
            self.commit_offsets()
        self._stopping.set()
        if self._fetcher is not None:
            self._fetcher.join()
        self._consumer.close()
        if self._zookeeper is not None:
            self._zookeeper.stop()
            self._zookeeper.close()

    def __enter__(self) -> "ConsumerConnector":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
