"""v2 consumer instances: each a real confluent-kafka Consumer, a member of its group (subscribe) or reading
partitions it was assigned, owned by the principal that made it, closed when it is deleted or idle longer than
consumer.instance.timeout.ms (300000, as Confluent's proxy).

An instance's offsets are stored only for the records a read hands out (enable.auto.offset.store false): records
fetched beyond a read's max_bytes wait in the instance for the next read, and neither auto commit nor a commit
without offsets counts them. A commit with offsets commits each offset + 1 (the offsets named are of the last
records processed), as Confluent's proxy does. Seeking a partition that is not assigned yet (a subscription's
partitions come with the first read) is kept and applied when the partition is assigned.

Bounded: at most `max_instances` at once (429 beyond); each consumer's prefetch queue is small
(queued.max.messages.kbytes), so an idle instance holds little memory beyond librdkafka's threads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Mapping

import confluent_kafka

from odradek.client import ClientError
from odradek.client.errors import LIBRDKAFKA_LOGGER
from odradek.restproxy.errors import (CONSUMER_ALREADY_EXISTS, CONSUMER_ALREADY_SUBSCRIBED,
                                      CONSUMER_INSTANCE_NOT_FOUND, ILLEGAL_STATE, INVALID_CONSUMER_CONFIG,
                                      TOO_MANY_REQUESTS, RestError, of_client_error, unprocessable)
from odradek.restproxy.formats import EMBEDDED_FORMATS, SCHEMA_FORMATS, schema_format

log = logging.getLogger("odradek.restproxy")
DEFAULT_INSTANCE_TIMEOUT_MS = 300_000
DEFAULT_MAX_INSTANCES = 1000
PREFETCH_KBYTES = 1024  # librdkafka's per-consumer prefetch queue (its default is 65536)
BATCH = 500  # records asked of librdkafka at once
OFFSET_BEGINNING, OFFSET_END = confluent_kafka.OFFSET_BEGINNING, confluent_kafka.OFFSET_END


@dataclasses.dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @property
    def size(self) -> int:
        return len(self.key or b"") + len(self.value or b"")


def instance_not_found() -> RestError:
    return RestError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")


class ConsumerInstance:
    def __init__(self, group: str, name: str, fmt: str, owner, config: Mapping[str, str]):
        self.group, self.name, self.format, self.owner = group, name, fmt, owner
        self.consumer = confluent_kafka.Consumer({**config, "group.id": group, "client.id": name,
                                                  "enable.auto.offset.store": False,
                                                  "queued.max.messages.kbytes": PREFETCH_KBYTES,
                                                  "logger": LIBRDKAFKA_LOGGER})
        self.lock = threading.Lock()  # one call at a time: a Consumer is not to be used from two threads at once
        self.last_used = time.monotonic()
        self.subscription: list[str] = []
        self.pattern: str | None = None
        self.assignment: dict[tuple[str, int], int] | None = None  # manual assignment: partition -> start offset
        self.pending_seeks: dict[tuple[str, int], int] = {}
        self.buffered: list[Record] = []
        self.returned: dict[tuple[str, int], int] = {}  # partition -> offset after the last record handed out
        self.closed = False

    # ------------------------------------------------------------------------------------ subscription
    def subscribe(self, topics: list[str], pattern: str | None) -> None:
        if self.assignment is not None:
            raise RestError(409, CONSUMER_ALREADY_SUBSCRIBED, "Consumer cannot subscribe: it has partitions "
                                                               "assigned manually")
        if pattern is not None:
            topics = [pattern if pattern.startswith("^") else f"^{pattern}"]
        self.consumer.subscribe(topics, on_assign=self._assigned)
        self.subscription, self.pattern = ([], pattern) if pattern is not None else (topics, None)

    def _assigned(self, consumer, partitions) -> None:
        for tp in partitions:
            seek = self.pending_seeks.pop((tp.topic, tp.partition), None)
            if seek is not None:
                tp.offset = seek
        consumer.assign(partitions)

    def unsubscribe(self) -> None:
        self.consumer.unsubscribe()
        self.subscription, self.pattern, self.buffered = [], None, []

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        if self.subscription or self.pattern is not None:
            raise RestError(409, CONSUMER_ALREADY_SUBSCRIBED, "Consumer cannot assign partitions: it has "
                                                               "subscribed to topics")
        self.assignment = {tp: self.pending_seeks.pop(tp, confluent_kafka.OFFSET_INVALID) for tp in partitions}
        self.buffered = [record for record in self.buffered if (record.topic, record.partition) in self.assignment]
        self._apply_assignment()

    def _apply_assignment(self) -> None:
        self.consumer.assign([confluent_kafka.TopicPartition(topic, partition, offset)
                              for (topic, partition), offset in self.assignment.items()])

    def assigned(self) -> list[tuple[str, int]]:
        if self.assignment is not None:
            return sorted(self.assignment)
        return sorted((tp.topic, tp.partition) for tp in self.consumer.assignment())

    def seek(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Read each partition from the offset next (OFFSET_BEGINNING / OFFSET_END for its ends)."""
        self.buffered = [record for record in self.buffered if (record.topic, record.partition) not in offsets]
        if self.assignment is not None:
            for tp, offset in offsets.items():
                if tp not in self.assignment:
                    raise RestError(409, ILLEGAL_STATE, f"Illegal state: No current assignment for partition "
                                                        f"{tp[0]}-{tp[1]}")
                self.assignment[tp] = offset
            self._apply_assignment()
            return
        current = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        for tp, offset in offsets.items():
            if tp in current:
                self.consumer.seek(confluent_kafka.TopicPartition(*tp, offset))
            else:
                self.pending_seeks[tp] = offset

    # ----------------------------------------------------------------------------------------- records
    def read(self, timeout_s: float, max_bytes: int) -> list[Record]:
        """Records handed out: at least one if any comes within the timeout, then what is at hand, up to max_bytes
        (at least one record, however large)."""
        if not self.buffered:
            self._fetch(1, timeout_s)  # librdkafka waits out the timeout unless the batch fills: one, then the rest
            if self.buffered:
                self._fetch(BATCH, 0)
        taken, size = [], 0
        while self.buffered and (not taken or size + self.buffered[0].size <= max_bytes):
            record = self.buffered.pop(0)
            size += record.size
            taken.append(record)
        if taken:
            self.consumer.store_offsets(offsets=[confluent_kafka.TopicPartition(r.topic, r.partition, r.offset + 1)
                                                 for r in self._last_per_partition(taken)])
            for record in taken:
                self.returned[(record.topic, record.partition)] = record.offset + 1
        return taken

    def _fetch(self, count: int, timeout_s: float) -> None:
        for message in self.consumer.consume(count, timeout_s):
            error = message.error()
            if error is not None:
                if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise of_client_error(ClientError.of(error))
            self.buffered.append(Record(message.topic(), message.partition(), message.offset(), message.key(),
                                        message.value()))

    @staticmethod
    def _last_per_partition(records: list[Record]) -> list[Record]:
        return list({(r.topic, r.partition): r for r in records}.values())

    # ----------------------------------------------------------------------------------------- offsets
    def commit(self, offsets: list[tuple[str, int, int]] | None) -> None:
        """Commit the offsets after the records handed out (None), or each given offset + 1."""
        if offsets is None:
            asked = [confluent_kafka.TopicPartition(topic, partition, offset)
                     for (topic, partition), offset in self.returned.items()]
        else:
            asked = [confluent_kafka.TopicPartition(topic, partition, offset + 1)
                     for topic, partition, offset in offsets]
        if not asked:
            return
        for tp in self.consumer.commit(offsets=asked, asynchronous=False) or ():
            if tp.error is not None:
                raise of_client_error(ClientError.of(tp.error))

    def committed(self, partitions: list[tuple[str, int]], timeout_s: float) -> list[tuple[str, int, int]]:
        found = self.consumer.committed([confluent_kafka.TopicPartition(t, p) for t, p in partitions], timeout_s)
        return [(tp.topic, tp.partition, tp.offset) for tp in found]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


class ConsumerInstances:
    """The live instances by (group, name), bounded in number, each expiring when idle `timeout_ms`."""

    def __init__(self, timeout_ms: int = DEFAULT_INSTANCE_TIMEOUT_MS, max_instances: int = DEFAULT_MAX_INSTANCES,
                 schema_formats: tuple[str, ...] = ()):
        self.schema_formats = schema_formats  # the schema formats served (a registry is known)
        self.timeout_ms = timeout_ms
        self.max_instances = max_instances
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="odradek-restproxy-consumers", daemon=True)
        self._reaper.start()

    def create(self, group: str, body: dict, owner, config: Mapping[str, str]) -> ConsumerInstance:
        """A new instance from a v2 create request's body (name, format, auto.offset.reset, auto.commit.enable,
        fetch.min.bytes, consumer.request.timeout.ms); `config` the owner's client settings."""
        name = body.get("name") or f"rest-consumer-{uuid.uuid4()}"
        fmt = str(body.get("format") or "binary").lower()
        if not isinstance(name, str):
            raise unprocessable("Invalid consumer configuration: name must be text", INVALID_CONSUMER_CONFIG)
        if fmt in SCHEMA_FORMATS:
            schema_format(fmt, self.schema_formats)
        elif fmt not in EMBEDDED_FORMATS:
            raise unprocessable(f"Invalid consumer configuration: format {fmt!r} (binary or json)",
                                INVALID_CONSUMER_CONFIG)
        settings = dict(config)
        reset = body.get("auto.offset.reset")
        if reset is not None:
            if reset not in ("earliest", "latest", "none", "smallest", "largest"):
                raise unprocessable(f"Invalid consumer configuration: auto.offset.reset {reset!r}",
                                    INVALID_CONSUMER_CONFIG)
            settings["auto.offset.reset"] = "error" if reset == "none" else reset
        commit = body.get("auto.commit.enable")
        if commit is not None:
            if str(commit).lower() not in ("true", "false"):
                raise unprocessable(f"Invalid consumer configuration: auto.commit.enable {commit!r}",
                                    INVALID_CONSUMER_CONFIG)
            settings["enable.auto.commit"] = str(commit).lower()
        if body.get("fetch.min.bytes") is not None:
            settings["fetch.min.bytes"] = str(body["fetch.min.bytes"])
        with self._lock:
            if (group, name) in self._instances:
                raise RestError(409, CONSUMER_ALREADY_EXISTS, "Consumer with specified consumer ID already exists "
                                                               "in the specified consumer group.")
            if len(self._instances) >= self.max_instances:
                raise RestError(429, TOO_MANY_REQUESTS, f"Too many consumer instances ({self.max_instances})")
            try:
                instance = ConsumerInstance(group, name, fmt, owner, settings)
            except (confluent_kafka.KafkaException, ValueError, TypeError) as exc:
                raise unprocessable(f"Invalid consumer configuration: {exc}", INVALID_CONSUMER_CONFIG) from None
            self._instances[(group, name)] = instance
        return instance

    def get(self, group: str, name: str, owner) -> ConsumerInstance:
        with self._lock:
            instance = self._instances.get((group, name))
        if instance is None or instance.owner != owner:
            raise instance_not_found()
        instance.last_used = time.monotonic()
        return instance

    def delete(self, group: str, name: str, owner) -> None:
        instance = self.get(group, name, owner)
        with self._lock:
            self._instances.pop((group, name), None)
        with instance.lock:
            instance.close()

    def __len__(self) -> int:
        return len(self._instances)

    def _reap(self) -> None:
        interval = min(1.0, self.timeout_ms / 4000)
        while not self._stop.wait(interval):
            deadline = time.monotonic() - self.timeout_ms / 1000
            with self._lock:
                idle = [key for key, instance in self._instances.items() if instance.last_used < deadline]
                expired = [self._instances.pop(key) for key in idle]
            for instance in expired:
                log.info("consumer instance %s of group %s expired", instance.name, instance.group)
                with instance.lock:
                    try:
                        instance.close()
                    except confluent_kafka.KafkaException:
                        log.warning("closing consumer instance %s failed", instance.name, exc_info=True)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            instances, self._instances = list(self._instances.values()), {}
        for instance in instances:
            with instance.lock:
                instance.close()

