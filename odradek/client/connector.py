"""ConsumerConnector: the design's high-level consumer: a group member whose messages arrive on streams.

One confluent-kafka Consumer joins the group; a fetcher thread polls it and deals each message to a stream
(a queue with an iterator), always the same stream for a given partition so per-partition order holds.
Streams are asked for per topic (`create_message_streams({"orders": 2})`) or by a filter over topic names
(`Whitelist("orders|payments")`, `Blacklist("tmp-.*")`); a filter is re-evaluated against the cluster's topics
every `topic_refresh_ms`, so topics created later are picked up (internal `__` topics never match).
`settled` is set once the group has handed this member its partitions (possibly none) or the filter matches no topic:
until then, waiting (joining a new group takes the broker's group.initial.rebalance.delay.ms) is not idleness.
`commit_offsets()` commits, for every partition, the offset after the last message a stream handed out: what the
application has seen, not merely what was fetched. Offsets are committed only when asked. The commit itself runs
on the fetcher thread: a synchronous librdkafka commit made while another thread polls the same consumer never
returns.
"""

from __future__ import annotations

import queue
import re
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import confluent_kafka

from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError
from odradek.client.messages import Decoder, Message, identity

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
            self._connector._handed_out(item)
            yield item


class ConsumerConnector:
    def __init__(self, bootstrap_servers: str, group_id: str, *, auto_offset_reset: str = "earliest",
                 consumer_timeout_ms: int | None = None, topic_refresh_ms: int = 2000,
                 key_decoder: Decoder = identity, value_decoder: Decoder = identity,
                 config: dict[str, Any] | None = None):
        self.consumer_timeout_ms = consumer_timeout_ms
        self.topic_refresh_ms = topic_refresh_ms
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self._consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": group_id, "auto.offset.reset": auto_offset_reset,
            "enable.auto.commit": False, "logger": LIBRDKAFKA_LOGGER, **(config or {})})
        self._consumed: dict[tuple[str, int], int] = {}
        self._consumed_lock = threading.Lock()
        self._streams_of: dict[str, list[KafkaStream]] = {}  # topic ("" for a filter) -> its streams
        self._filter: TopicFilter | None = None
        self._stopping = threading.Event()
        self.settled = threading.Event()
        self._fetcher: threading.Thread | None = None
        self._commit_requests: queue.SimpleQueue[tuple[list, Future]] = queue.SimpleQueue()

    # ----------------------------------------------------------------------------------------- streams
    def create_message_streams(self, topic_count: dict[str, int]) -> dict[str, list[KafkaStream]]:
        """`{topic: number of streams}` -> `{topic: streams}`."""
        self._claim()
        self._streams_of = {topic: [KafkaStream(self) for _ in range(count)] for topic, count in topic_count.items()}
        self._consumer.subscribe(sorted(topic_count), on_assign=self._assigned)
        self._start()
        return dict(self._streams_of)

    def create_message_streams_by_filter(self, topic_filter: TopicFilter, num_streams: int = 1) -> list[KafkaStream]:
        """Streams over every topic the filter accepts, now or later."""
        self._claim()
        self._filter = topic_filter
        self._streams_of = {"": [KafkaStream(self) for _ in range(num_streams)]}
        self._start()
        return list(self._streams_of[""])

    def _claim(self) -> None:
        if self._fetcher is not None:
            raise ClientError("this connector already has its streams; create another connector")

    def _start(self) -> None:
        self._fetcher = threading.Thread(target=self._fetch, name="odradek-connector-fetcher", daemon=True)
        self._fetcher.start()

    def _fetch(self) -> None:
        next_refresh = 0.0
        subscribed: list[str] = []
        try:
            while not self._stopping.is_set():
                self._serve_commit_requests()
                if self._filter is not None and time.monotonic() >= next_refresh:
                    subscribed = self._follow_filter(subscribed)
                    next_refresh = time.monotonic() + self.topic_refresh_ms / 1000
                if not subscribed and self._filter is not None:
                    self._stopping.wait(0.05)
                    continue
                for raw in self._consumer.consume(500, 0.1):
                    if raw.error() is None:
                        self._deal(Message.of(raw, self.key_decoder, self.value_decoder))
        finally:
            self._serve_commit_requests()
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
                self._consumer.subscribe(wanted, on_assign=self._assigned)
            else:
                self._consumer.unsubscribe()
        if not wanted:
            self.settled.set()
        return wanted

    def _assigned(self, consumer, partitions) -> None:
        """on_assign: confluent-kafka assigns `partitions` itself after this returns."""
        self.settled.set()

    def _deal(self, message: Message) -> None:
        streams = self._streams_of.get(message.topic) or self._streams_of[""]
        stream = streams[zlib.crc32(f"{message.topic}\0{message.partition}".encode()) % len(streams)]
        self._put(stream, message)

    def _put(self, stream: KafkaStream, message: Message) -> None:
        """Wait for room in the stream (back-pressure on fetching), unless we are shutting down."""
        while not self._stopping.is_set():
            try:
                stream._queue.put(message, timeout=0.1)
                return
            except queue.Full:
                continue

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

    def _handed_out(self, message: Message) -> None:
        with self._consumed_lock:
            self._consumed[(message.topic, message.partition)] = message.offset + 1

    # ------------------------------------------------------------------------------------------ offsets
    def commit_offsets(self, timeout: float = 30.0) -> dict[tuple[str, int], int]:
        """Commit the position after the last message handed out on each partition; returns what was committed."""
        with self._consumed_lock:
            consumed = dict(self._consumed)
        if not consumed:
            return consumed
        offsets = [confluent_kafka.TopicPartition(topic, partition, offset)
                   for (topic, partition), offset in sorted(consumed.items())]
        if self._fetcher is None or not self._fetcher.is_alive():
            self._commit(offsets)
        else:
            done: Future = Future()
            self._commit_requests.put((offsets, done))
            done.result(timeout)
        return consumed

    def _serve_commit_requests(self) -> None:
        while True:
            try:
                offsets, done = self._commit_requests.get_nowait()
            except queue.Empty:
                return
            try:
                self._commit(offsets)
            except ClientError as exc:
                done.set_exception(exc)
            else:
                done.set_result(None)

    def _commit(self, offsets: list) -> None:
        try:
            results = self._consumer.commit(offsets=offsets, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            raise ClientError.of(exc) from None
        for result in results or ():
            if result.error is not None:
                raise ClientError.of(result.error)

    def shutdown(self) -> None:
        """Leave the group and end every stream (uncommitted progress is not committed)."""
        self._stopping.set()
        if self._fetcher is not None:
            self._fetcher.join()
        self._consumer.close()

    def __enter__(self) -> "ConsumerConnector":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
