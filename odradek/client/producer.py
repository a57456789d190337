"""Producer: sync and async sends over confluent-kafka, with our partitioner and encoders in front.

librdkafka batches (linger.ms, batch.size) and retries; this layer only picks the partition (so the default is
exactly the Java client's murmur2, whatever librdkafka's own default), encodes keys and values, and turns
delivery callbacks into futures. A background thread serves those callbacks, so `send()` never has to be
followed by `poll()`: `send()` returns a concurrent.futures.Future (await it with `asyncio.wrap_future`),
`send_sync()` waits for it. A refused login, or every bootstrap server refusing connections, fails the waits for
metadata and flush at once (errors.ConnectionFailures) rather than after their timeouts.

Finding the brokers (seed 002): `bootstrap_servers`; or `broker_list`, a static list used as it is (a broker of it
that is down fails the sends it would take); or `zk_connect`: the brokers are read from /brokers/ids and followed by
a watch (a broker joining or leaving refreshes librdkafka's metadata at once, so its connection pool follows), and
partition counts come from /brokers/topics/[topic] (watched, so added partitions are used). kazoo is loaded only
with `zk_connect`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import confluent_kafka

from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError, ConnectionFailures
from odradek.client.messages import RecordMetadata
from odradek.client.partitioners import Partitioner, murmur2_partitioner

Encoder = Callable[[Any], bytes | None]
METADATA_TIMEOUT_S = 10.0
METADATA_STEP_S = 1.0  # a Metadata request is given this long before the connection failures are looked at again
FLUSH_STEP_S = 0.1


def encode_default(value: Any) -> bytes | None:
    """bytes and None pass through; str is UTF-8; anything else is an error (plug in an encoder for it)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot encode {type(value).__name__}; pass an encoder")


class Producer:
    def __init__(self, bootstrap_servers: str | None = None, *, partitioner: Partitioner = murmur2_partitioner,
                 key_encoder: Encoder = encode_default, value_encoder: Encoder = encode_default,
                 linger_ms: int = 5, acks: str = "all", broker_list: str | None = None, zk_connect: str | None = None,
                 config: Mapping[str, Any] | None = None):
        """`config`: more librdkafka settings under their own names ({"batch.size": 65536})."""
        if [bootstrap_servers, broker_list, zk_connect].count(None) != 2:
            raise ValueError("give exactly one of bootstrap_servers, broker_list and zk_connect")
        self._zookeeper = self._cluster_view = None
        if zk_connect is not None:
            from odradek.client import zookeeper  # kazoo is loaded only by ZooKeeper users

            self._zookeeper = zookeeper.connect(zk_connect)
            self._cluster_view = zookeeper.ZooKeeperClusterView(self._zookeeper)
            bootstrap_servers = zookeeper.bootstrap_servers(self._zookeeper)
        # a refused login, or every bootstrap server refusing connections, fails the calls waiting at once
        self.failures = ConnectionFailures(bootstrap_servers or broker_list)
        settings = {"bootstrap.servers": bootstrap_servers or broker_list, "linger.ms": linger_ms, "acks": acks,
                    "logger": LIBRDKAFKA_LOGGER, "error_cb": self.failures, **(config or {})}
        self._producer = confluent_kafka.Producer(settings)
        self._brokers_changed = threading.Event()
        if self._cluster_view is not None:
            self._cluster_view.on_brokers_changed.append(lambda brokers: self._brokers_changed.set())
        self.partitioner = partitioner
        self.key_encoder = key_encoder
        self.value_encoder = value_encoder
        self._partition_counts: dict[str, int] = {}
        # records queued whose delivery callback has not run: what flush reports, since librdkafka's count (its
        # out queue) also holds the log lines and error events waiting for poll()
        self._undelivered = 0
        self._undelivered_lock = threading.Lock()
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._serve_callbacks, name="odradek-producer-callbacks", daemon=True)
        self._poller.start()

    def _serve_callbacks(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)
            if self._brokers_changed.is_set():  # zk_connect: librdkafka learns the new brokers and leaders now
                self._brokers_changed.clear()
                try:
                    self._producer.list_topics(timeout=5)
                except confluent_kafka.KafkaException:
                    self._brokers_changed.set()  # no broker answered; try again on the next turn

    def partition_count(self, topic: str, timeout: float = METADATA_TIMEOUT_S) -> int:
        """Partitions of `topic` (cached, or followed in ZooKeeper with zk_connect; asking about a missing topic lets
        the broker auto-create it)."""
        count = (self._cluster_view and self._cluster_view.partition_count(topic)) or self._partition_counts.get(topic)
        if count is not None:
            return count
        deadline = time.monotonic() + timeout
        while True:
            try:
                metadata = self._producer.list_topics(topic, timeout=max(0.1, min(METADATA_STEP_S,
                                                                                  deadline - time.monotonic())))
            except confluent_kafka.KafkaException:
                self.failures.check()
                if time.monotonic() >= deadline:
                    raise
                continue
            self.failures.reached()
            entry = metadata.topics.get(topic)
            if entry is not None and entry.error is None and entry.partitions:
                self._partition_counts[topic] = len(entry.partitions)
                return len(entry.partitions)
            if time.monotonic() >= deadline:
                raise ClientError.of(entry.error) if entry is not None and entry.error else ClientError(
                    f"topic {topic!r} has no partitions")
            time.sleep(0.05)

    def refresh_metadata(self, topic: str, timeout: float = METADATA_STEP_S) -> None:
        """Ask for the topic's metadata now: librdkafka keeps a topic's error (a refused authorization, say) and
        fails sends to it at once until its next refresh (topic.metadata.refresh.interval.ms, 5 minutes)."""
        try:
            self._producer.list_topics(topic, timeout=timeout)
        except confluent_kafka.KafkaException:
            self.failures.check()

    def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
             headers: Iterable[tuple[str, bytes | str | None]] | None = None,
             timestamp_ms: int | None = None) -> "Future[RecordMetadata]":
        """Queue one record; the future resolves once the broker has it (or fails with ClientError)."""
        key_bytes = self.key_encoder(key)
        value_bytes = self.value_encoder(value)
        if partition is None:
            partition = self.partitioner(key_bytes, self.partition_count(topic))
        future: Future[RecordMetadata] = Future()

        def delivered(error, message) -> None:
            self._count_undelivered(-1)
            if error is not None:
                future.set_exception(ClientError.of(error))
            else:
                self.failures.reached()
                timestamp_type, timestamp = message.timestamp()
                future.set_result(RecordMetadata(message.topic(), message.partition(), message.offset(),
                                                 timestamp if timestamp_type else None))

        while True:
            try:
                self._count_undelivered(1)  # before the callback can run
                try:
                    self._producer.produce(topic, value_bytes, key_bytes, partition, on_delivery=delivered,
                                           timestamp=timestamp_ms or 0, headers=list(headers) if headers else None)
                except BaseException:
                    self._count_undelivered(-1)
                    raise
                return future
            except BufferError:  # librdkafka's queue is full: let deliveries drain it
                self._producer.flush(0.1)
            except confluent_kafka.KafkaException as exc:
                raise ClientError.of(exc) from None

    def _count_undelivered(self, change: int) -> None:
        with self._undelivered_lock:
            self._undelivered += change

    def send_sync(self, topic: str, value: Any = None, key: Any = None, *, timeout: float | None = 30.0,
                  **options: Any) -> RecordMetadata:
        """Send and wait for the broker's acknowledgement."""
        return self.send(topic, value, key, **options).result(timeout)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued record is delivered (or failed); ClientError if some are still queued.
        librdkafka's own flush waits for its whole out queue, log lines and error events too, so it runs in short
        steps (each serving delivery callbacks) until this producer's records are done."""
        deadline = time.monotonic() + timeout
        while True:
            self._producer.flush(max(0.0, min(FLUSH_STEP_S, deadline - time.monotonic())))
            left = self._undelivered
            if not left:
                return
            self.failures.check()
            if time.monotonic() >= deadline:
                raise ClientError(f"{left} record(s) still undelivered after {timeout:g}s")

    def close(self, timeout: float = 30.0) -> None:
        """Wait up to `timeout` for queued records, as Kafka's producer close does; what is still queued then fails
        (its futures get ClientError) and librdkafka's handle is destroyed here, not at interpreter exit, where its
        threads could still be calling into Python. Closing again does nothing."""
        if self._closed.is_set():
            return
        try:
            self.flush(timeout)
        finally:
            self._closed.set()
            self._poller.join()
            self._producer.purge()
            self._producer.flush(0)  # serve the purged records' delivery callbacks
            self._producer.close()
            if self._zookeeper is not None:
                self._zookeeper.stop()
                self._zookeeper.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
