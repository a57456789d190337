"""Options of the "odradek" Spark data source: parsed and checked once, with Spark's Kafka names and rules.

Users switching from format("kafka") keep their options, so this module mirrors Spark's Kafka source and sink
option contract (names, defaults, precedence, what is rejected) and turns every mistake into one line that names
the option. It is plain Python, with no Spark or broker access, so the rules are testable on their own and the
driver fails before any task starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from odradek.client.properties import librdkafka_settings
from odradek.security.client import client_security

EARLIEST = -2  # Spark's and Kafka's sentinels inside JSON offsets
LATEST = -1

# Kafka client settings Spark refuses because the source or sink manages them itself.
REJECTED_SOURCE_SETTINGS = ("group.id", "auto.offset.reset", "key.deserializer", "value.deserializer",
                            "enable.auto.commit", "interceptor.classes")
REJECTED_SINK_SETTINGS = ("key.serializer", "value.serializer", "interceptor.classes")

SUBSCRIPTION_OPTIONS = ("subscribe", "subscribepattern", "assign")
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs default (spark.network.timeout)


class OptionError(ValueError):
    """A bad or missing option; the message is one line and starts with the option's name."""


TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: a topic list, a full-match regex over topic names, or explicit partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartitionKey, ...] = ()

    @property
    def option(self) -> str:
        return "subscribePattern" if self.pattern is not None else "assign" if self.assigned else "subscribe"

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    kind is "earliest", "latest", "offsets" (per_partition holds offsets, -2/-1 meaning earliest/latest),
    "timestamps" (per_partition holds epoch milliseconds) or "timestamp" (one timestamp for every partition).
    """

    option: str
    kind: str
    per_partition: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    client_config: dict[str, str] = field(repr=False)  # librdkafka's names; holds passwords, so never shown
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # None for streaming reads
    include_headers: bool
    fail_on_data_loss: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    starting_timestamp_strategy: str  # "error" or "latest": when no record is at or after a starting timestamp
    poll_timeout_ms: int
    iceberg: dict[str, str] = field(default_factory=dict)  # startingOffsets=iceberg: the iceberg.* options given


@dataclass(frozen=True)
class SinkOptions:
    client_config: dict[str, str] = field(repr=False)
    topic: str | None


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lowercased(options)
    starting = _starting_spec(opts, streaming)
    if streaming:
        for name in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if name in opts:
                raise OptionError(f"{_spark_name(name)}: not valid for streaming queries")
        ending = None
    else:
        ending = _ending_spec(opts)
    client_config = _client_config(opts, REJECTED_SOURCE_SETTINGS, "source")
    try:
        client_security(client_config)  # what the read tasks' own connections need, checked before any task runs
    except ValueError as exc:
        raise OptionError(f"kafka.{exc}") from None
    return SourceOptions(
        client_config=client_config,
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        include_headers=_boolean(opts, "includeHeaders", False),
        fail_on_data_loss=_boolean(opts, "failOnDataLoss", True),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        starting_timestamp_strategy=_choice(opts, "startingOffsetsByTimestampStrategy", ("error", "latest")),
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
        iceberg={key: value for key, value in opts.items() if key in ICEBERG_OPTIONS},
    )


# startingOffsets=iceberg (batch and streaming reads): a topic's Iceberg table (docs/iceberg.md) up to its last commit,
# then the log from the offsets that commit covers; the catalog is the broker's unless these name it
ICEBERG_OPTIONS = ("iceberg.catalog.uri", "iceberg.warehouse", "iceberg.namespace")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lowercased(options)
    return SinkOptions(client_config=_client_config(opts, REJECTED_SINK_SETTINGS, "sink"),
                       topic=opts.get("topic") or None)


def _lowercased(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items() if value is not None}


_SPARK_NAMES = {name.lower(): name for name in (
    "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets", "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp", "includeHeaders", "failOnDataLoss",
    "minPartitions", "maxOffsetsPerTrigger", "startingOffsetsByTimestampStrategy", "kafkaConsumer.pollTimeoutMs")}


def _spark_name(lowered: str) -> str:
    return _SPARK_NAMES.get(lowered, lowered)


def _client_config(opts: dict[str, str], rejected: tuple[str, ...], role: str) -> dict[str, str]:
    """The kafka.* options as librdkafka settings: Kafka's Java client names, as Spark's connector takes them
    (sasl.jaas.config, ssl.truststore.location, ...), translated; librdkafka's own names kept."""
    config = {key[len("kafka."):]: value for key, value in opts.items() if key.startswith("kafka.")}
    for name in rejected:
        if name in config:
            raise OptionError(f"kafka.{name}: not supported by the odradek {role}, which manages it itself "
                              f"(as Spark's Kafka {role} does)")
    if not config.get("bootstrap.servers"):
        raise OptionError("kafka.bootstrap.servers: required (host:port of the broker)")
    try:
        return librdkafka_settings(config)
    except ValueError as exc:
        raise OptionError(f"kafka.{exc}") from None


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [name for name in SUBSCRIPTION_OPTIONS if name in opts]
    if len(given) != 1:
        raise OptionError("subscribe, subscribePattern, assign: exactly one is required, "
                          f"got {', '.join(_spark_name(n) for n in given) or 'none'}")
    name = given[0]
    value = opts[name].strip()
    if name == "subscribe":
        topics = tuple(topic.strip() for topic in value.split(",") if topic.strip())
        if not topics:
            raise OptionError("subscribe: expected a comma-separated list of topics, got an empty value")
        return Subscription(topics=topics)
    if name == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"subscribePattern: not a valid regular expression ({exc})") from None
        return Subscription(pattern=value)
    parsed = _json_object(value, "assign", 'like {"topic":[0,1]}')
    assigned = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(isinstance(p, int) for p in partitions):
            raise OptionError(f'assign: expected a list of partition numbers for topic {topic!r}, like {{"t":[0,1]}}')
        assigned += [(topic, p) for p in partitions]
    if not assigned:
        raise OptionError("assign: no partitions given")
    return Subscription(assigned=tuple(sorted(set(assigned))))


def _starting_spec(opts: dict[str, str], streaming: bool) -> OffsetSpec:
    by_time = _timestamp_spec(opts, "startingTimestamp", "startingOffsetsByTimestamp")
    if by_time is not None:
        return by_time
    if opts.get("startingoffsets", "").strip().lower() == "iceberg":
        return OffsetSpec("startingOffsets", "iceberg")
    spec = _offsets_spec(opts, "startingOffsets", "latest" if streaming else "earliest")
    if not streaming and (spec.kind == "latest" or LATEST in spec.per_partition.values()):
        raise OptionError("startingOffsets: latest is not valid as the start of a batch query")
    return spec


def _ending_spec(opts: dict[str, str]) -> OffsetSpec:
    by_time = _timestamp_spec(opts, "endingTimestamp", "endingOffsetsByTimestamp")
    if by_time is not None:
        return by_time
    spec = _offsets_spec(opts, "endingOffsets", "latest")
    if spec.kind == "earliest" or EARLIEST in spec.per_partition.values():
        raise OptionError("endingOffsets: earliest is not valid as the end of a batch query")
    return spec


def _timestamp_spec(opts: dict[str, str], global_name: str, per_partition_name: str) -> OffsetSpec | None:
    """Spark's precedence: the global timestamp wins over the per-partition one, which wins over offsets."""
    if global_name.lower() in opts:
        return OffsetSpec(global_name, "timestamp", timestamp=_int(opts[global_name.lower()], global_name))
    if per_partition_name.lower() in opts:
        return OffsetSpec(per_partition_name, "timestamps",
                          per_partition=_partition_numbers(opts[per_partition_name.lower()], per_partition_name,
                                                            TIMESTAMPS_EXAMPLE))
    return None


def _offsets_spec(opts: dict[str, str], name: str, default: str) -> OffsetSpec:
    value = opts.get(name.lower(), default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(name, value.lower())
    offsets = _partition_numbers(value, name, OFFSETS_EXAMPLE)
    if any(offset < EARLIEST for offset in offsets.values()):
        raise OptionError(f"{name}: offsets must be >= 0, or -2 (earliest) or -1 (latest)")
    return OffsetSpec(name, "offsets", per_partition=offsets)


OFFSETS_EXAMPLE = 'earliest, latest or JSON like {"topic":{"0":23,"1":-2}}'
TIMESTAMPS_EXAMPLE = 'JSON like {"topic":{"0":1700000000000}}'


def _partition_numbers(value: str, name: str, example: str) -> dict[TopicPartitionKey, int]:
    parsed = _json_object(value, name, example)
    numbers = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"{name}: expected {example}, got {value!r}")
        for partition, number in partitions.items():
            if not str(partition).lstrip("-").isdigit() or not isinstance(number, int) or isinstance(number, bool):
                raise OptionError(f"{name}: expected {example}, got {value!r}")
            numbers[(topic, int(partition))] = number
    return numbers


def _json_object(value: str, name: str, example: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise OptionError(f"{name}: expected {example}, got {value!r}")
    return parsed


def _boolean(opts: dict[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise OptionError(f"{name}: expected true or false, got {value!r}")
    return value.strip().lower() == "true"


def _int(value: str, name: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise OptionError(f"{name}: expected an integer, got {value!r}") from None


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    if name.lower() not in opts:
        return None
    number = _int(opts[name.lower()], name)
    if number < 1:
        raise OptionError(f"{name}: must be a positive integer, got {number}")
    return number


def _choice(opts: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = opts.get(name.lower(), choices[0]).strip().lower()
    if value not in choices:
        raise OptionError(f"{name}: expected one of {', '.join(choices)}, got {value!r}")
    return value
