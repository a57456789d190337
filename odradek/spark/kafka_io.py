"""What the Spark integration asks the broker through confluent-kafka: lookups on the driver, topic creation, and
the errors and offset ranges that reads share.

Lookups (which partitions a subscription covers, earliest/latest offsets, offsets for timestamps) run on the driver
when a query is planned. A task then reads one offset range [start, end) of one partition (odradek.spark.fetcher)
and never commits: Spark's checkpoint or the caller's manifest is the only record of progress, which is what lets a
failed task rerun its exact range.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, Subscription

LOOKUP_ATTEMPT_S = 1.0
_UNREACHABLE = (KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._AUTHENTICATION, KafkaError._SSL)


class BrokerUnavailableError(RuntimeError):
    """The broker named by kafka.bootstrap.servers cannot be reached or did not answer in time."""


class TopicNotFoundError(LookupError):
    """A subscribed or assigned topic (or partition) does not exist."""


class DataLossError(RuntimeError):
    """Offsets a read needs are gone (deleted by retention, or the partition was recreated); see failOnDataLoss."""


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition: the unit a task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def consumer_config(client_config: dict[str, str]) -> dict:
    """The user's kafka.* settings plus the ones the source owns: no group membership, no commits, exact offsets.
    isolation.level defaults to read_uncommitted, as the Java consumer under Spark's Kafka source (librdkafka's own
    default is read_committed), so "latest" is the high watermark unless the user asks for read_committed."""
    return {
        "log.connection.close": False,
        "isolation.level": "read_uncommitted",
        **client_config,
        "group.id": f"odradek-spark-source-{uuid.uuid4().hex}",  # required by the client; never joined or committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
    }


def committed_reads(client_config: dict[str, str]) -> dict[str, str]:
    """The settings with isolation.level=read_committed unless the user chose a level: the pipelines that copy or
    restore state (warehouse load, changelog snapshot) must not take in records of aborted or still open
    transactions, and stop at the last stable offset."""
    return {"isolation.level": "read_committed", **client_config}


def open_consumer(client_config: dict[str, str], **extra) -> Consumer:
    try:
        return Consumer({**consumer_config(client_config), **extra})
    except KafkaException as exc:
        raise OptionError(f"kafka.*: the client refused a setting: {exc.args[0].str()}") from None


class LogLookup:
    """Driver-side questions about the log; one consumer connection, closed with the lookup."""

    def __init__(self, client_config: dict[str, str], timeout_s: float):
        self._bootstrap = client_config["bootstrap.servers"]
        self._timeout_s = timeout_s
        self._client_errors: list[KafkaError] = []
        self._consumer = open_consumer(client_config, error_cb=self._client_errors.append)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> "LogLookup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions_of(self, subscription: Subscription, *, missing_ok: bool = False) -> list[tuple[str, int]]:
        """Partitions the subscription covers now, sorted. A named topic that does not exist is an error."""
        topics = self._call(lambda timeout: self._consumer.list_topics(timeout=timeout).topics, "list topics")
        existing = {name: sorted(meta.partitions) for name, meta in topics.items() if meta.error is None}
        if subscription.pattern is not None:
            return [(t, p) for t in sorted(existing) if not t.startswith("__") and subscription.matches(t)
                    for p in existing[t]]
        wanted = subscription.assigned or [(t, p) for t in subscription.topics for p in existing.get(t, [])]
        named = {t for t, _ in subscription.assigned} or set(subscription.topics)
        absent = sorted(t for t in named if t not in existing)
        if absent and not missing_ok:
            raise TopicNotFoundError(f"{subscription.option}: topic {', '.join(map(repr, absent))} does not exist "
                                     f"on {self._bootstrap}")
        missing = [(t, p) for t, p in wanted if t in existing and p not in existing[t]]
        if missing and not missing_ok:
            raise TopicNotFoundError(f"assign: partition {', '.join(f'{t}-{p}' for t, p in missing)} does not exist "
                                     f"on {self._bootstrap}")
        return sorted((t, p) for t, p in wanted if t in existing and p in existing[t])

    def watermarks(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(earliest, latest) offsets of each partition."""
        return {(t, p): self._call(lambda timeout: self._consumer.get_watermark_offsets(
                    TopicPartition(t, p), timeout=timeout, cached=False), f"read offsets of {t}-{p}")
                for t, p in partitions}

    def offsets_for_times(self, timestamps: dict[tuple[str, int], int]) -> dict[tuple[str, int], int | None]:
        """First offset whose timestamp is >= the given one, per partition; None where no record qualifies."""
        if not timestamps:
            return {}
        query = [TopicPartition(t, p, ts) for (t, p), ts in timestamps.items()]
        answers = self._call(lambda timeout: self._consumer.offsets_for_times(query, timeout=timeout),
                             "look up offsets for timestamps")
        return {(a.topic, a.partition): (a.offset if a.offset >= 0 else None) for a in answers}

    def resolve(self, spec: OffsetSpec, partitions: list[tuple[str, int]], *, starting: bool,
                no_match: str = "latest") -> dict[tuple[str, int], int]:
        """Concrete offsets for a starting or ending spec, with Spark's rules for each kind."""
        marks = self.watermarks(partitions)
        if spec.kind in ("earliest", "latest"):
            return {tp: marks[tp][0 if spec.kind == "earliest" else 1] for tp in partitions}
        if spec.kind == "timestamp":
            timestamps = {tp: spec.timestamp for tp in partitions}
        else:
            undeclared = [f"{t}-{p}" for t, p in partitions if (t, p) not in spec.per_partition]
            if undeclared:
                raise OptionError(f"{spec.option}: no entry for partition {', '.join(undeclared)}; "
                                  "give every partition the query reads")
            timestamps = {tp: spec.per_partition[tp] for tp in partitions}
        if spec.kind == "offsets":
            return {tp: marks[tp][0] if offset == EARLIEST else marks[tp][1] if offset == LATEST else offset
                    for tp, offset in timestamps.items()}
        found = self.offsets_for_times(timestamps)
        resolved = {}
        for tp in partitions:
            if found.get(tp) is not None:
                resolved[tp] = found[tp]
            elif starting and no_match == "error":
                raise OptionError(f"{spec.option}: no record at or after timestamp {timestamps[tp]} in "
                                  f"{tp[0]}-{tp[1]} (startingOffsetsByTimestampStrategy=latest reads from the end)")
            else:
                resolved[tp] = marks[tp][1]
        return resolved

    def _call(self, request, what: str):
        """Retry a request in short attempts; fail fast with one line when the client reports the broker down."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                return request(min(LOOKUP_ATTEMPT_S, max(0.1, deadline - time.monotonic())))
            except KafkaException as exc:
                self._consumer.poll(0)  # delivers connection errors to error_cb
                down = [e for e in self._client_errors if e.code() in _UNREACHABLE]
                if down or time.monotonic() >= deadline:
                    cause = (down or [exc.args[0]])[0].str()
                    raise BrokerUnavailableError(f"kafka.bootstrap.servers={self._bootstrap}: could not {what}: "
                                                 f"{cause}") from None


def ensure_topic(client_config: dict[str, str], topic: str, partitions: int,
                 config: dict[str, str] | None = None) -> None:
    """Create the topic if it does not exist yet (pipelines' outputs, generators' inputs)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"log.connection.close": False, **client_config})
    if topic in admin.list_topics(timeout=10).topics:
        return
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
