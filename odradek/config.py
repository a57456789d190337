"""Broker and topic configuration under Kafka's names, types and defaults.

One table (`TOPIC_CONFIGS`, `BROKER_CONFIGS`) says every key we honour: its type, Kafka's default and, for a topic
key, the broker keys that supply its default (`segment.bytes` <- `log.segment.bytes`; `TOPIC_DEFAULT_BROKER_KEYS`
types those broker keys with Kafka's own defaults). Everything that reads or reports config goes through these
tables: `odradek serve --config` (an unknown key is named in the log, as Kafka's "supplied but isn't a known
config"), CreateTopics/AlterConfigs validation (Kafka 3.x's deprecated topic keys are taken and ignored),
DescribeConfigs (with the source and synonyms a Kafka user expects), the dynamic broker configs
(`DYNAMIC_BROKER_CONFIGS`, laid over the static ones by `layered_broker_props`), and `LogConfig`, the typed,
immutable view that the storage layer reads on its hot paths as plain attributes.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger("odradek.config")

LONG_MAX = 2**63 - 1
LONG_MIN = -2**63
INT_MAX = 2**31 - 1

# replica.selector.class's values (KIP-392; odradek/cluster/replica_selector.py makes the choice)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = ("", RACK_AWARE_SELECTOR)  # "": none, the leader serves every consumer


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ `config_type` codes."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ `config_source` codes."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    GROUP_CONFIG = 8


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str = ""
    broker_synonyms: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    check: Callable[[Any], str | None] | None = None  # a further rule: the reason a value is refused, or None

    def parse(self, raw: Any, as_name: str | None = None) -> Any:
        """Turn a string (or an already typed value) into this key's type; KafkaError(INVALID_CONFIG) if it isn't.
        Numbers must fit their Java type (segment.bytes is an int: the log's file positions are int32). Errors name
        `as_name` when given: the broker key the user typed (log.retention.hours) for the topic key it defaults."""
        name = as_name or self.name
        try:
            value = _PARSERS[self.type](raw)
        except (TypeError, ValueError):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw!r} for configuration {name}") from None
        lowest, highest = _JAVA_RANGES.get(self.type, (None, None))
        out_of_type = (lowest is not None and not lowest <= value <= highest
                       or self.type == ConfigType.DOUBLE and not math.isfinite(value))
        if out_of_type:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw!r} for configuration {name}: "
                                                       f"Not a number of type {self.type.name}")
        if self.choices is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.choices:
                    raise KafkaError(
                        ErrorCode.INVALID_CONFIG,
                        f"Invalid value {raw!r} for configuration {name}: must be one of {', '.join(self.choices)}",
                    )
        if self.minimum is not None and value < self.minimum:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {raw!r} for configuration {name}: Value must be at least {self.minimum:g}",
            )
        if self.maximum is not None and value > self.maximum:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {raw!r} for configuration {name}: Value must be no more than {self.maximum:g}",
            )
        reason = self.check(value) if self.check is not None else None
        if reason is not None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw!r} for configuration {name}: {reason}")
        return value

    def render(self, value: Any) -> str | None:
        """The string DescribeConfigs reports."""
        if value is None:
            return None
        if self.type == ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type == ConfigType.LIST:
            return ",".join(value)
        return str(value)


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(raw)
    return text == "true"


def _parse_list(raw: Any) -> list[str]:
    if isinstance(raw, (list, tuple)):
        return [str(item).strip() for item in raw]
    return [item.strip() for item in str(raw).split(",") if item.strip()]


def _parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(raw)
    return int(str(raw).strip()) if not isinstance(raw, int) else raw


_PARSERS = {
    ConfigType.BOOLEAN: _parse_bool,
    ConfigType.STRING: lambda raw: str(raw).strip(),
    ConfigType.INT: _parse_int,
    ConfigType.SHORT: _parse_int,
    ConfigType.LONG: _parse_int,
    ConfigType.DOUBLE: lambda raw: float(str(raw).strip()) if not isinstance(raw, float) else raw,
    ConfigType.LIST: _parse_list,
    ConfigType.CLASS: lambda raw: str(raw).strip(),
    ConfigType.PASSWORD: lambda raw: str(raw),
}

_JAVA_RANGES = {ConfigType.SHORT: (-2**15, 2**15 - 1), ConfigType.INT: (-2**31, INT_MAX),
                ConfigType.LONG: (LONG_MIN, LONG_MAX)}

_T = ConfigType


def _gzip_level(level: int) -> str | None:
    return None if level == -1 or 1 <= level <= 9 else "Value must be between 1 and 9 or equal to -1"


def _throttled_replicas(items: list[str]) -> str | None:
    """Kafka's ThrottledReplicaListValidator: '*' or partition:brokerId pairs."""
    if items == ["*"] or all(re.fullmatch(r"\d+:\d+", item) for item in items):
        return None
    return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],..."


ICEBERG_MODES = ("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")  # docs/iceberg.md
ICEBERG_COLUMNS = ("key", "value", "headers", "timestamp", "partition", "offset")  # a key_value table's columns
_ICEBERG_FIELD = re.compile(r"(year|month|day|hour|identity)\((\w+)\)|(bucket|truncate)\((\d+),\s*(\w+)\)")


def parse_iceberg_partition_spec(text: str) -> list[tuple[str, int | None, str]]:
    """odradek.iceberg.partition.spec: comma-separated Iceberg transforms of a key_value table's columns, as
    `hour(timestamp)`, `identity(partition)`, `bucket(16, key)` or `truncate(1000, offset)`; empty: unpartitioned.
    Each field as (transform, width or None, column); ValueError naming what is wrong."""
    fields = []
    for item in filter(None, (part.strip() for part in re.split(r",(?![^(]*\))", text))):  # commas outside ()
        match = _ICEBERG_FIELD.fullmatch(item)
        if match is None:
            raise ValueError(f"{item!r} is not a transform: expected year|month|day|hour|identity(column) "
                             f"or bucket|truncate(width, column)")
        transform, column = (match[1], match[2]) if match[1] else (match[3], match[5])
        width = int(match[4]) if match[4] else None
        if column not in ICEBERG_COLUMNS:
            raise ValueError(f"no column {column!r}: the columns are {', '.join(ICEBERG_COLUMNS)}")
        if transform in ("year", "month", "day", "hour") and column != "timestamp":
            raise ValueError(f"{transform}() applies to timestamp only")
        if column == "headers":
            raise ValueError("headers is a list: it cannot partition a table")
        if width is not None and width < 1:
            raise ValueError(f"the width of {transform}() must be at least 1")
        fields.append((transform, width, column))
    return fields


def _iceberg_partition_spec(text: str) -> str | None:
    try:
        parse_iceberg_partition_spec(text)
    except ValueError as exc:
        return str(exc)
    return None


def _tiered_storage(enabled: bool) -> str | None:
    return ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log "
            "storage.") if enabled else None


# Confluent Server's broker-side schema validation (odradek/broker/schema_validation.py, docs/schema-registry.md)
SUBJECT_NAME_STRATEGIES = tuple(f"io.confluent.kafka.serializers.subject.{name}" for name in
                                ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"))


TOPIC_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in [
        ConfigKey("cleanup.policy", _T.LIST, ["delete"], "delete, compact, or both",
                  ("log.cleanup.policy",), choices=("delete", "compact")),
        ConfigKey("compression.gzip.level", _T.INT, -1, "gzip level of the final compression (-1: zlib's default)",
                  ("compression.gzip.level",), check=_gzip_level),
        ConfigKey("compression.lz4.level", _T.INT, 9, "lz4 level of the final compression",
                  ("compression.lz4.level",), minimum=1, maximum=17),
        ConfigKey("compression.type", _T.STRING, "producer", "Final compression of the topic's batches",
                  ("compression.type",), choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigKey("compression.zstd.level", _T.INT, 3, "zstd level of the final compression",
                  ("compression.zstd.level",), minimum=-131072, maximum=22),
        ConfigKey("confluent.key.schema.validation", _T.BOOLEAN, False, "Refuse records whose key is not framed "
                  "by a schema id registered for the key's subject, or does not decode with it"),
        ConfigKey("confluent.key.subject.name.strategy", _T.STRING, SUBJECT_NAME_STRATEGIES[0],
                  "The key's subject under validation", choices=SUBJECT_NAME_STRATEGIES),
        ConfigKey("confluent.value.schema.validation", _T.BOOLEAN, False, "Refuse records whose value is not framed "
                  "by a schema id registered for the value's subject, or does not decode with it"),
        ConfigKey("confluent.value.subject.name.strategy", _T.STRING, SUBJECT_NAME_STRATEGIES[0],
                  "The value's subject under validation", choices=SUBJECT_NAME_STRATEGIES),
        ConfigKey("delete.retention.ms", _T.LONG, 86400000, "How long tombstones are kept in a compacted topic",
                  ("log.cleaner.delete.retention.ms",), minimum=0),
        ConfigKey("file.delete.delay.ms", _T.LONG, 60000, "Delay before a deleted segment's files are removed",
                  ("log.segment.delete.delay.ms",), minimum=0),
        ConfigKey("flush.messages", _T.LONG, LONG_MAX, "fsync after this many messages",
                  ("log.flush.interval.messages",), minimum=1),
        ConfigKey("flush.ms", _T.LONG, LONG_MAX, "fsync after this many milliseconds",
                  ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), minimum=0),
        ConfigKey("follower.replication.throttled.replicas", _T.LIST, [],
                  "Replicas whose replication is throttled on the follower side (partition:broker, or *)",
                  check=_throttled_replicas),
        ConfigKey("index.interval.bytes", _T.INT, 4096, "Bytes of log between two offset index entries",
                  ("log.index.interval.bytes",), minimum=0),
        ConfigKey("leader.replication.throttled.replicas", _T.LIST, [],
                  "Replicas whose replication is throttled on the leader side (partition:broker, or *)",
                  check=_throttled_replicas),
        ConfigKey("local.retention.bytes", _T.LONG, -2, "Local size limit of a tiered topic (-2: retention.bytes)",
                  ("log.local.retention.bytes",), minimum=-2),
        ConfigKey("local.retention.ms", _T.LONG, -2, "Local age limit of a tiered topic (-2: retention.ms)",
                  ("log.local.retention.ms",), minimum=-2),
        ConfigKey("max.compaction.lag.ms", _T.LONG, LONG_MAX, "Longest a record stays ineligible for compaction",
                  ("log.cleaner.max.compaction.lag.ms",), minimum=1),
        ConfigKey("max.message.bytes", _T.INT, 1048588, "Largest record batch the topic accepts",
                  ("message.max.bytes",), minimum=0),
        ConfigKey("message.timestamp.after.max.ms", _T.LONG, 3600000,
                  "Largest allowed lead of a CreateTime timestamp over the broker's clock",
                  ("log.message.timestamp.after.max.ms",), minimum=0),
        ConfigKey("message.timestamp.before.max.ms", _T.LONG, LONG_MAX,
                  "Largest allowed lag of a CreateTime timestamp behind the broker's clock",
                  ("log.message.timestamp.before.max.ms",), minimum=0),
        ConfigKey("message.timestamp.type", _T.STRING, "CreateTime", "CreateTime or LogAppendTime",
                  ("log.message.timestamp.type",), choices=("CreateTime", "LogAppendTime")),
        ConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, 0.5, "Dirty share of the log that makes it cleanable",
                  ("log.cleaner.min.cleanable.ratio",), minimum=0, maximum=1),
        ConfigKey("min.compaction.lag.ms", _T.LONG, 0, "Shortest time a record stays uncompacted",
                  ("log.cleaner.min.compaction.lag.ms",), minimum=0),
        ConfigKey("min.insync.replicas", _T.INT, 1, "Replicas that must acknowledge an acks=all write",
                  ("min.insync.replicas",), minimum=1),
        ConfigKey("odradek.iceberg.mode", _T.STRING, "disabled", "Write the topic into an Iceberg table: disabled, "
                  "key_value, value_schema_id_prefix or value_schema_latest (docs/iceberg.md)", choices=ICEBERG_MODES),
        ConfigKey("odradek.iceberg.partition.spec", _T.STRING, "hour(timestamp)", "Partitioning of the topic's "
                  "Iceberg table, as Iceberg transforms: hour(timestamp), identity(partition), ... (empty: none)",
                  check=_iceberg_partition_spec),
        ConfigKey("preallocate", _T.BOOLEAN, False, "Preallocate segment files", ("log.preallocate",)),
        ConfigKey("remote.log.copy.disable", _T.BOOLEAN, False, "Stop copying a tiered topic's segments"),
        ConfigKey("remote.log.delete.on.disable", _T.BOOLEAN, False, "Delete remote data when tiering is turned off"),
        ConfigKey("remote.storage.enable", _T.BOOLEAN, False, "Tiered storage (not available on this broker)",
                  check=_tiered_storage),
        ConfigKey("retention.bytes", _T.LONG, -1, "Largest size of the log before old segments go (-1: no limit)",
                  ("log.retention.bytes",)),
        ConfigKey("retention.ms", _T.LONG, 604800000, "Age after which a segment goes (-1: no limit)",
                  ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), minimum=-1),
        ConfigKey("segment.bytes", _T.INT, 1073741824, "Size at which the active segment rolls",
                  ("log.segment.bytes",), minimum=14),
        ConfigKey("segment.index.bytes", _T.INT, 10485760, "Largest size of an offset or time index",
                  ("log.index.size.max.bytes",), minimum=4),
        ConfigKey("segment.jitter.ms", _T.LONG, 0, "Random jitter subtracted from segment.ms",
                  ("log.roll.jitter.ms", "log.roll.jitter.hours"), minimum=0),
        ConfigKey("segment.ms", _T.LONG, 604800000, "Age at which the active segment rolls",
                  ("log.roll.ms", "log.roll.hours"), minimum=1),
        ConfigKey("unclean.leader.election.enable", _T.BOOLEAN, False, "Allow an out-of-sync replica to lead",
                  ("unclean.leader.election.enable",)),
    ]
}

# Topic keys Kafka 3.x still takes but Kafka 4 removed (message formats v0/v1 are gone, KIP-724; the timestamp
# difference gave way to before/after.max.ms, KIP-937): accepted and ignored with a warning, as a 3.x broker ignores
# message.format.version, so topics created by older tools keep working.
DEPRECATED_TOPIC_CONFIGS = frozenset({"message.format.version", "message.timestamp.difference.max.ms",
                                      "message.downconversion.enable"})

# Broker keys whose unit differs from the topic key they default (hours or minutes -> ms).
_BROKER_UNITS = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}

BROKER_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in [
        ConfigKey("node.id", _T.INT, 1, "This broker's id", ("broker.id",)),
        ConfigKey("log.dirs", _T.LIST, ["./odradek-data"], "Where partition logs are kept", ("log.dir",)),
        ConfigKey("listeners", _T.STRING, "PLAINTEXT://127.0.0.1:9092", "Where the broker listens"),
        ConfigKey("advertised.listeners", _T.STRING, "", "Address handed to clients (default: listeners)"),
        ConfigKey("listener.security.protocol.map", _T.STRING,
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  "Security protocol of each listener name"),
        ConfigKey("inter.broker.listener.name", _T.STRING, "",
                  "Listener brokers connect to each other on (empty: security.inter.broker.protocol's)"),
        ConfigKey("security.inter.broker.protocol", _T.STRING, "",
                  "Names the inter-broker listener when inter.broker.listener.name is not set (empty: PLAINTEXT)"),
        ConfigKey("broker.rack", _T.STRING, "", "This broker's rack, shown to clients in Metadata and matched "
                  "against consumers' client.rack by replica.selector.class"),
        ConfigKey("replica.selector.class", _T.STRING, "", "Names the replica a consumer should fetch from "
                  "(KIP-392): org.apache.kafka.common.replica.RackAwareReplicaSelector picks one in the consumer's "
                  "rack; empty: the leader serves every consumer", choices=REPLICA_SELECTORS),
        ConfigKey("zookeeper.connect", _T.STRING, "", "HOST:PORT[,...][/chroot] of the cluster's ZooKeeper "
                                                      "(empty: a single-node broker)"),
        ConfigKey("zookeeper.session.timeout.ms", _T.INT, 18000, "ZooKeeper session timeout", minimum=1),
        ConfigKey("zookeeper.connection.timeout.ms", _T.INT, 0,
                  "Longest wait for the first ZooKeeper connection (0: zookeeper.session.timeout.ms)", minimum=0),
        # Protecting ZooKeeper (odradek/cluster/zk_security.py, docs/security.md): Kafka's names and defaults
        ConfigKey("zookeeper.set.acl", _T.BOOLEAN, False, "Create znodes writable only by the brokers' identity "
                  "(SASL or TLS), SCRAM credentials and broker configs readable only by them"),
        ConfigKey("zookeeper.sasl.client", _T.STRING, "", "true: log in to ZooKeeper with SASL DIGEST-MD5 when the "
                  "JAAS file has the zookeeper.sasl.clientconfig section (empty: -Dzookeeper.sasl.client in "
                  "$KAFKA_OPTS, else true)"),
        ConfigKey("zookeeper.sasl.clientconfig", _T.STRING, "", "The JAAS file's section for ZooKeeper (empty: "
                  "-Dzookeeper.sasl.clientconfig in $KAFKA_OPTS, else Client)"),
        ConfigKey("java.security.auth.login.config", _T.STRING, "", "The JAAS file (empty: "
                  "-Djava.security.auth.login.config=PATH in $KAFKA_OPTS, as Kafka reads it)"),
        ConfigKey("zookeeper.ssl.client.enable", _T.BOOLEAN, False, "TLS to ZooKeeper"),
        ConfigKey("zookeeper.clientCnxnSocket", _T.STRING, "", "Java's socket class for TLS to ZooKeeper "
                  "(taken for Kafka compatibility; TLS follows zookeeper.ssl.client.enable)"),
        ConfigKey("zookeeper.ssl.keystore.location", _T.STRING, "", "PEM file with the client certificate and key"),
        ConfigKey("zookeeper.ssl.keystore.password", _T.PASSWORD, "", "Password of the keystore's key"),
        ConfigKey("zookeeper.ssl.keystore.type", _T.STRING, "", "Keystore format: PEM (empty: PEM)"),
        ConfigKey("zookeeper.ssl.truststore.location", _T.STRING, "", "PEM file with the CA certificate(s)"),
        ConfigKey("zookeeper.ssl.truststore.password", _T.PASSWORD, "", "Truststore password (not needed for PEM)"),
        ConfigKey("zookeeper.ssl.truststore.type", _T.STRING, "", "Truststore format: PEM (empty: PEM)"),
        ConfigKey("zookeeper.ssl.endpoint.identification.algorithm", _T.STRING, "HTTPS",
                  "HTTPS: check ZooKeeper's certificate names its host; empty: do not"),
        ConfigKey("num.partitions", _T.INT, 1, "Partitions of an auto-created topic", minimum=1),
        ConfigKey("default.replication.factor", _T.SHORT, 1, "Replication factor of an auto-created topic"),
        ConfigKey("replica.lag.time.max.ms", _T.LONG, 30000, "A follower that has not caught up this long leaves "
                  "the ISR", minimum=0),
        ConfigKey("replica.high.watermark.checkpoint.interval.ms", _T.LONG, 5000, "How often the partitions' high "
                  "watermarks are saved to replication-offset-checkpoint", minimum=1),
        ConfigKey("auto.leader.rebalance.enable", _T.BOOLEAN, True, "The controller moves leadership back to "
                  "preferred replicas when brokers lead too many partitions of others"),
        ConfigKey("leader.imbalance.check.interval.seconds", _T.LONG, 300, "How often the controller checks the "
                  "leader imbalance", minimum=1),
        ConfigKey("leader.imbalance.per.broker.percentage", _T.INT, 10, "Share of a broker's preferred partitions "
                  "others may lead before the controller rebalances", minimum=0),
        ConfigKey("controlled.shutdown.enable", _T.BOOLEAN, True, "At a clean stop, move leadership away first"),
        ConfigKey("controlled.shutdown.max.retries", _T.INT, 3, "Attempts of a controlled shutdown", minimum=1),
        ConfigKey("controlled.shutdown.retry.backoff.ms", _T.LONG, 5000, "Pause between attempts of a controlled "
                  "shutdown", minimum=0),
        ConfigKey("replica.fetch.wait.max.ms", _T.INT, 500, "Longest wait of a follower's fetch", minimum=0),
        ConfigKey("replica.fetch.min.bytes", _T.INT, 1, "Bytes a follower's fetch waits for", minimum=1),
        ConfigKey("replica.fetch.max.bytes", _T.INT, 1048576, "Bytes a follower fetches per partition", minimum=0),
        ConfigKey("replica.fetch.response.max.bytes", _T.INT, 10485760, "Bytes a follower fetches per request",
                  minimum=0),
        ConfigKey("leader.replication.throttled.rate", _T.LONG, LONG_MAX, "Bytes/s a leader sends to out-of-sync "
                  "followers of the partitions leader.replication.throttled.replicas names", minimum=0),
        ConfigKey("follower.replication.throttled.rate", _T.LONG, LONG_MAX, "Bytes/s a follower fetches for the "
                  "partitions follower.replication.throttled.replicas names while out of sync", minimum=0),
        ConfigKey("replication.quota.window.num", _T.INT, 11, "Samples of the replication throttles' rates",
                  minimum=1),
        ConfigKey("replication.quota.window.size.seconds", _T.INT, 1, "Length of one sample of the replication "
                  "throttles' rates", minimum=1),
        ConfigKey("replica.socket.timeout.ms", _T.INT, 30000, "A follower's wait for an answer beyond its fetch "
                  "wait", minimum=1),
        ConfigKey("auto.create.topics.enable", _T.BOOLEAN, True, "Create a topic on first Metadata or Produce"),
        ConfigKey("delete.topic.enable", _T.BOOLEAN, True, "Allow DeleteTopics"),
        ConfigKey("message.max.bytes", _T.INT, 1048588, "Largest record batch (topic default)", minimum=0),
        ConfigKey("socket.request.max.bytes", _T.INT, 104857600, "Largest request frame", minimum=1),
        ConfigKey("sasl.server.max.receive.size", _T.INT, 524288, "Largest request frame before SASL "
                  "authentication is done; a larger one closes the connection at once", minimum=1),
        ConfigKey("connections.max.idle.ms", _T.LONG, 600000, "Close connections idle this long"),
        ConfigKey("max.connections", _T.INT, INT_MAX, "Connections at once; more wait to be accepted", minimum=0),
        ConfigKey("max.connections.per.ip", _T.INT, INT_MAX, "Connections at once from one address; more are "
                  "closed at once", minimum=0),
        ConfigKey("max.connections.per.ip.overrides", _T.STRING, "", "Per-address limits: host:count,..."),
        ConfigKey("max.connection.creation.rate", _T.INT, INT_MAX, "New connections per second; more wait",
                  minimum=0),
        ConfigKey("metrics.port", _T.INT, 0, "Port of the Prometheus /metrics endpoint (0: off)", minimum=0),
        ConfigKey("console.port", _T.INT, 0, "Port of the web console on 127.0.0.1, served beside the broker (0: "
                  "off; docs/console.md)", minimum=0),
        ConfigKey("schema.registry.port", _T.INT, 0, "Port of the schema registry (Confluent Schema Registry's REST "
                  "API) on 127.0.0.1, served beside the broker (0: off; docs/schema-registry.md)", minimum=0),
        ConfigKey("rest.proxy.port", _T.INT, 0, "Port of the REST proxy (Confluent REST Proxy's v2 and v3 APIs) on "
                  "127.0.0.1, served beside the broker (0: off; docs/rest-proxy.md)", minimum=0),
        ConfigKey("rest.proxy.authentication.method", _T.STRING, "NONE", "How the REST proxy's requests "
                  "authenticate (Confluent's authentication.method): NONE, or BASIC, each request logging in to the "
                  "broker's first SASL_PLAINTEXT listener as its basic-auth user", choices=("NONE", "BASIC")),
        ConfigKey("rest.proxy.ssl.certfile", _T.STRING, "", "PEM certificate chain: the REST proxy serves HTTPS "
                  "(with rest.proxy.ssl.keyfile)"),
        ConfigKey("rest.proxy.ssl.keyfile", _T.STRING, "", "PEM private key of rest.proxy.ssl.certfile"),
        ConfigKey("iceberg.catalog.uri", _T.STRING, "", "Catalog of the topics' Iceberg tables: a SQLAlchemy URI "
                  "of a SQL catalog, or http(s)://... of a REST catalog (empty: SQLite in <log dir>/iceberg/; "
                  "docs/iceberg.md)"),
        ConfigKey("iceberg.warehouse", _T.STRING, "", "Where the tables' files go (empty: "
                  "<log dir>/iceberg/warehouse)"),
        ConfigKey("iceberg.namespace", _T.STRING, "odradek", "Namespace of the topics' tables: <namespace>.<topic>"),
        ConfigKey("iceberg.commit.interval.ms", _T.LONG, 60000, "How often a topic's new records are committed to "
                  "its Iceberg table", minimum=1),
        ConfigKey("log.retention.check.interval.ms", _T.LONG, 300000, "How often retention runs", minimum=1),
        ConfigKey("log.flush.scheduler.interval.ms", _T.LONG, LONG_MAX, "How often flush.ms is checked"),
        ConfigKey("log.flush.offset.checkpoint.interval.ms", _T.INT, 60000, "How often recovery points are saved"),
        ConfigKey("log.cleaner.enable", _T.BOOLEAN, True, "Run the log cleaner"),
        ConfigKey("log.cleaner.threads", _T.INT, 1, "Cleaner threads", minimum=0),
        ConfigKey("log.cleaner.dedupe.buffer.size", _T.LONG, 134217728, "Memory for the cleaners' key maps"),
        ConfigKey("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, 1.7976931348623157e308, "Cleaner I/O cap"),
        ConfigKey("log.cleaner.backoff.ms", _T.LONG, 15000, "Sleep when no log is cleanable", minimum=0),
        ConfigKey("offsets.topic.num.partitions", _T.INT, 50, "Partitions of __consumer_offsets", minimum=1),
        ConfigKey("offsets.topic.replication.factor", _T.SHORT, 3, "Replication factor of __consumer_offsets in a "
                  "ZooKeeper cluster (a single node: 1)", minimum=1),
        ConfigKey("transaction.state.log.replication.factor", _T.SHORT, 3, "Replication factor of "
                  "__transaction_state in a ZooKeeper cluster (a single node: 1)", minimum=1),
        ConfigKey("transaction.state.log.min.isr", _T.INT, 2, "min.insync.replicas of __transaction_state in a "
                  "ZooKeeper cluster (a single node: 1)", minimum=1),
        ConfigKey("offsets.topic.segment.bytes", _T.INT, 104857600, "segment.bytes of __consumer_offsets"),
        ConfigKey("offsets.commit.required.acks", _T.SHORT, -1, "acks of an offset commit's write: -1 answers once "
                  "the ISR has it (Kafka 2.x), any other value once the leader has", minimum=-1),
        ConfigKey("offsets.commit.timeout.ms", _T.INT, 5000, "How long an offset commit waits for the ISR",
                  minimum=1),
        ConfigKey("offsets.retention.minutes", _T.INT, 10080, "Keep an empty group's offsets this long", minimum=1),
        ConfigKey("offsets.retention.check.interval.ms", _T.LONG, 600000, "How often offsets expire", minimum=1),
        ConfigKey("group.initial.rebalance.delay.ms", _T.INT, 3000, "Wait for more members of a new group"),
        ConfigKey("group.min.session.timeout.ms", _T.INT, 6000, "Smallest session timeout a member may ask"),
        ConfigKey("group.max.session.timeout.ms", _T.INT, 1800000, "Largest session timeout a member may ask"),
        ConfigKey("group.max.size", _T.INT, INT_MAX, "Members a group may have", minimum=1),
        ConfigKey("group.consumer.heartbeat.interval.ms", _T.INT, 5000, "KIP-848 heartbeat interval"),
        ConfigKey("group.consumer.session.timeout.ms", _T.INT, 45000, "KIP-848 session timeout"),
        ConfigKey("group.share.heartbeat.interval.ms", _T.INT, 5000, "Share group heartbeat interval (KIP-932)",
                  minimum=1),
        ConfigKey("group.share.session.timeout.ms", _T.INT, 45000, "Share group session timeout", minimum=1),
        ConfigKey("group.share.record.lock.duration.ms", _T.INT, 30000, "How long a share consumer holds an "
                  "acquired record", minimum=1000, maximum=3600000),
        ConfigKey("group.share.delivery.count.limit", _T.INT, 5, "Deliveries of a record to a share group before "
                  "it is archived", minimum=2, maximum=10),
        ConfigKey("group.share.min.record.lock.duration.ms", _T.INT, 15000, "Smallest share.record.lock.duration.ms "
                  "of a group config", minimum=1000, maximum=30000),
        ConfigKey("group.share.max.record.lock.duration.ms", _T.INT, 60000, "Largest share.record.lock.duration.ms "
                  "of a group config", minimum=30000, maximum=3600000),
        ConfigKey("group.share.min.delivery.count.limit", _T.INT, 2, "Smallest share.delivery.count.limit of a "
                  "group config", minimum=2, maximum=5),
        ConfigKey("group.share.max.delivery.count.limit", _T.INT, 10, "Largest share.delivery.count.limit of a "
                  "group config", minimum=5, maximum=25),
        ConfigKey("group.share.partition.max.record.locks", _T.INT, 2000, "Records of a share-partition in flight",
                  minimum=100, maximum=10000),
        ConfigKey("share.coordinator.state.topic.num.partitions", _T.INT, 50, "Partitions of __share_group_state",
                  minimum=1),
        ConfigKey("share.coordinator.state.topic.replication.factor", _T.SHORT, 3, "Replication factor of "
                  "__share_group_state in a ZooKeeper cluster (a single node: 1)", minimum=1),
        ConfigKey("share.coordinator.state.topic.segment.bytes", _T.INT, 104857600, "segment.bytes of "
                  "__share_group_state", minimum=1),
        ConfigKey("share.coordinator.state.topic.min.isr", _T.SHORT, 2, "min.insync.replicas of "
                  "__share_group_state in a ZooKeeper cluster (a single node: 1)", minimum=1),
        ConfigKey("transaction.state.log.num.partitions", _T.INT, 50, "Partitions of __transaction_state"),
        ConfigKey("transaction.state.log.segment.bytes", _T.INT, 104857600, "segment.bytes of __transaction_state",
                  minimum=1),
        ConfigKey("request.timeout.ms", _T.INT, 30000, "How long a transaction coordinator's write (its state, a "
                  "marker) waits for the ISR", minimum=0),
        ConfigKey("transaction.max.timeout.ms", _T.INT, 900000, "Largest transaction.timeout.ms", minimum=1),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, 10000,
                  "How often abandoned transactions are aborted", minimum=1),
        ConfigKey("transactional.id.expiration.ms", _T.INT, 604800000, "Forget idle transactional ids", minimum=1),
        ConfigKey("producer.id.expiration.ms", _T.INT, 86400000, "Forget idle idempotent producers", minimum=1),
        ConfigKey("authorizer.class.name", _T.STRING, "", "Turns ACL checks on (Kafka's AclAuthorizer or "
                  "StandardAuthorizer class name)"),
        ConfigKey("super.users", _T.STRING, "", "Principals the authorizer always allows, ';'-separated"),
        ConfigKey("allow.everyone.if.no.acl.found", _T.BOOLEAN, False, "Allow access to a resource without ACLs"),
        ConfigKey("quota.window.num", _T.INT, 11, "Samples a client quota's rate is measured over", minimum=1),
        ConfigKey("quota.window.size.seconds", _T.INT, 1, "Length of each client quota sample", minimum=1),
    ]
}


# Broker keys of the topic defaults that Kafka defines without a default of their own (the next synonym supplies it).
_BROKER_KEYS_WITHOUT_DEFAULT = frozenset({"log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms",
                                          "log.retention.ms", "log.retention.minutes"})


def _topic_default_broker_key(name: str, topic_key: ConfigKey) -> ConfigKey:
    unit = _BROKER_UNITS.get(name, 1)
    default = None if name in _BROKER_KEYS_WITHOUT_DEFAULT else topic_key.default
    if unit != 1:
        return dataclasses.replace(topic_key, name=name, type=_T.INT, broker_synonyms=(),
                                   default=None if default is None else default // unit)
    return dataclasses.replace(topic_key, name=name, default=default, broker_synonyms=())


# Every broker key that supplies a topic default (log.retention.hours, log.cleanup.policy, ...), typed as the
# topic key it defaults and with Kafka's default for it; keys that are also broker settings stay in BROKER_CONFIGS.
TOPIC_DEFAULT_BROKER_KEYS: dict[str, ConfigKey] = {
    name: _topic_default_broker_key(name, topic_key)
    for topic_key in TOPIC_CONFIGS.values() for name in topic_key.broker_synonyms if name not in BROKER_CONFIGS
}


def broker_default_for(topic_key: ConfigKey, broker_props: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The broker-level default of a topic key and the broker key it came from (None: Kafka's own default).

    Synonyms are listed most specific first (`log.retention.ms` beats `log.retention.hours`), as Kafka reads them.
    """
    for synonym in topic_key.broker_synonyms:
        if synonym in broker_props:
            value = topic_key.parse(broker_props[synonym], synonym)
            unit = _BROKER_UNITS.get(synonym)  # log.retention.hours and the like: a multiple of the topic's unit
            return (value if unit is None else value * unit), synonym
    return topic_key.default, None


def validate_topic_configs(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Parse a topic's overrides; KafkaError(INVALID_CONFIG) on an unknown key or a bad value. Deprecated keys
    (DEPRECATED_TOPIC_CONFIGS) pass unparsed: they are ignored (accepted_topic_configs drops them)."""
    parsed = {}
    for name, raw in overrides.items():
        if name in DEPRECATED_TOPIC_CONFIGS:
            continue
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        parsed[name] = key.parse(raw)
    _iceberg_spec_of_mode(parsed)
    return parsed


def _iceberg_spec_of_mode(parsed: Mapping[str, Any]) -> None:
    """A schema mode's table has no `value` column (the value's fields are its columns; kafka.value keeps its bytes
    to read the records back, no partition column): a spec of it is refused."""
    spec = parsed.get("odradek.iceberg.partition.spec", "hour(timestamp)")
    if parsed.get("odradek.iceberg.mode", "disabled").startswith("value_schema") and \
            any(column == "value" for _, _, column in parse_iceberg_partition_spec(spec)):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {spec!r} for configuration "
                                                   f"odradek.iceberg.partition.spec: a schema mode's table has no "
                                                   f"column value (its columns are the value's fields)")


def accepted_topic_configs(topic: str, overrides: Mapping[str, Any]) -> dict[str, str]:
    """The overrides a topic keeps, as strings: the deprecated keys are dropped, each with a warning in the log."""
    for name in sorted(DEPRECATED_TOPIC_CONFIGS & overrides.keys()):
        log.warning("Topic configuration %s with value `%s` is ignored for `%s`: it is deprecated and Kafka 4.0 "
                    "removed it", name, overrides[name], topic)
    return {name: str(value) for name, value in overrides.items() if name not in DEPRECATED_TOPIC_CONFIGS}


@dataclasses.dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one partition log, as typed attributes (read on hot paths)."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    confluent_key_schema_validation: bool = False
    confluent_key_subject_name_strategy: str = SUBJECT_NAME_STRATEGIES[0]
    confluent_value_schema_validation: bool = False
    confluent_value_subject_name_strategy: str = SUBJECT_NAME_STRATEGIES[0]
    # derived from the settings above once, not at each read: every produced partition asks them (a property is a
    # Python call each time)
    compact: bool = dataclasses.field(init=False, repr=False, compare=False)
    delete: bool = dataclasses.field(init=False, repr=False, compare=False)
    log_append_time: bool = dataclasses.field(init=False, repr=False, compare=False)
    schema_validation: bool = dataclasses.field(init=False, repr=False, compare=False)  # key's or value's

    def __post_init__(self) -> None:
        object.__setattr__(self, "compact", "compact" in self.cleanup_policy)
        object.__setattr__(self, "delete", "delete" in self.cleanup_policy)
        object.__setattr__(self, "log_append_time", self.message_timestamp_type == "LogAppendTime")
        object.__setattr__(self, "schema_validation",
                           self.confluent_key_schema_validation or self.confluent_value_schema_validation)

    def create_time_range(self, now_ms: int) -> tuple[int, int]:
        """The CreateTime timestamps accepted at `now_ms` (message.timestamp.{before,after}.max.ms), inside int64."""
        earliest = now_ms - self.message_timestamp_before_max_ms  # per produced partition: no max(), min() calls
        latest = now_ms + self.message_timestamp_after_max_ms
        return (earliest if earliest > LONG_MIN else LONG_MIN, latest if latest < LONG_MAX else LONG_MAX)

    @classmethod
    def resolve(cls, topic_overrides: Mapping[str, Any] | None = None,
                broker_props: Mapping[str, Any] | None = None) -> "LogConfig":
        """Topic override, else broker default, else Kafka's default, for every topic key."""
        topic_overrides = topic_overrides or {}
        broker_props = broker_props or {}
        values = {}
        for name, key in TOPIC_CONFIGS.items():
            field = name.replace(".", "_")
            if field not in _LOG_CONFIG_FIELDS:
                continue  # accepted and reported, but nothing here acts on it (tiering, throttles, levels)
            if name in topic_overrides:
                value = key.parse(topic_overrides[name])
            else:
                value, _ = broker_default_for(key, broker_props)
            if isinstance(value, list):
                value = tuple(value)
            values[field] = value
        return cls(**values)


_LOG_CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(LogConfig) if field.init)


# Older or alternative broker key names, read when the main name is absent.
_BROKER_KEY_SYNONYMS = {"broker.id": "node.id", "log.dir": "log.dirs"}


def parse_properties(text: str) -> dict[str, str]:
    """server.properties: `key=value` (or `key: value`) lines; '#' and '!' start comments."""
    props = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ValueError(f"not a key=value line: {raw!r}")
        props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def resolve_broker_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """Typed values of every broker key (given, else its synonym, else Kafka's default); rejects bad values, naming
    the key as given."""
    values = {}
    for name, key in BROKER_CONFIGS.items():
        given = name if name in props else next(
            (old for old, new in _BROKER_KEY_SYNONYMS.items() if new == name and old in props), None)
        values[name] = key.default if given is None else key.parse(props[given], given)
    for name, raw in props.items():  # the topic defaults (log.retention.hours, ...) are checked here too
        if name in TOPIC_DEFAULT_BROKER_KEYS:
            TOPIC_DEFAULT_BROKER_KEYS[name].parse(raw, name)
    return values


# Keys of Kafka's own server.properties that mean nothing on a single-node broker speaking PLAINTEXT: taken
# quietly (a note in the log) so a Kafka config file works as it is; any other unknown key is likely a typo.
_KAFKA_KEYS_NOT_USED_HERE = frozenset({
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers", "controller.listener.names",
    "num.network.threads", "num.io.threads",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
})


def warn_about_unknown_broker_keys(props: Mapping[str, Any]) -> None:
    """Kafka's AbstractConfig.logUnknown: a key no table knows is taken but named in the log, so a typo
    (`num.partiton`) does not pass silently."""
    for name in props:
        if name in _KAFKA_KEYS_NOT_USED_HERE:
            log.info("The configuration '%s' is a Kafka setting this broker does not use.", name)
        elif (name not in BROKER_CONFIGS and name not in TOPIC_DEFAULT_BROKER_KEYS and name not in _BROKER_KEY_SYNONYMS
              and not name.startswith(LISTENER_SECURITY_PREFIXES)):
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)


# The cleaner's settings it can take while running (Kafka's LogCleaner.ReconfigurableConfigs that apply here).
CLEANER_DYNAMIC_CONFIGS = ("log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.io.max.bytes.per.second",
                           "log.cleaner.dedupe.buffer.size")

# Broker keys that can change while the broker runs (IncrementalAlterConfigs/AlterConfigs on a BROKER resource):
# as in Kafka, the first broker key of every topic default (log.retention.ms, not log.retention.hours), the
# cleaner's settings and the replication throttles' rates.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {key.broker_synonyms[0] for key in TOPIC_CONFIGS.values() if key.broker_synonyms} | set(CLEANER_DYNAMIC_CONFIGS)
    | {"leader.replication.throttled.rate", "follower.replication.throttled.rate"})

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only per listener (listener.name.<name>.ssl.keystore.location).
SSL_RECONFIGURABLE_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates"})
# Kafka's DynamicListenerConfig.ReconfigurableConfigs: per broker, except the three connection settings below.
_LISTENER_RECONFIGURABLE_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate", "num.network.threads"})
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_PER_BROKER_CONFIGS = (SSL_RECONFIGURABLE_CONFIGS | _LISTENER_RECONFIGURABLE_CONFIGS) - _CLUSTER_LEVEL_LISTENER_CONFIGS
# Everything Kafka lets change on a BROKER resource (DynamicBrokerConfig.AllDynamicConfigs and the broker quotas).
# Beyond DYNAMIC_BROKER_CONFIGS, which apply at once, these are stored and described back, and the ones this broker
# reads at start (listener-prefixed security settings, connection limits) are in force from its next start.
KAFKA_DYNAMIC_BROKER_CONFIGS = DYNAMIC_BROKER_CONFIGS | _LISTENER_RECONFIGURABLE_CONFIGS | {
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "num.io.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "background.threads", "metric.reporters", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms", "replica.alter.log.dirs.io.max.bytes.per.second"}
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)")


def dynamic_base_name(name: str) -> str:
    """The key a dynamic broker config sets: listener.name.<listener>.<key> sets <key> for that listener."""
    match = _LISTENER_PREFIX.fullmatch(name)
    return match.group(1) if match else name


def dynamic_broker_configs_refusal(names, per_broker: bool) -> str | None:
    """Kafka's DynamicBrokerConfig.validateConfigs of the names a BROKER resource would have (its message, None if
    they may be set): a Kafka setting that cannot change while running; an SSL store setting without its listener's
    prefix; at the cluster default ("" resource), a setting each broker must have of its own. A name Kafka does not
    know is taken, as Kafka takes it."""
    known = {*BROKER_CONFIGS, *TOPIC_DEFAULT_BROKER_KEYS, *_BROKER_KEY_SYNONYMS, *_KAFKA_KEYS_NOT_USED_HERE}
    checks = [
        ({name for name in names if name in known and name not in KAFKA_DYNAMIC_BROKER_CONFIGS},
         "Cannot update these configs dynamically"),
        ({name for name in names if name in SSL_RECONFIGURABLE_CONFIGS},
         "These security configs can be dynamically updated only per-listener using the listener prefix")]
    if not per_broker:
        checks.append(({name for name in names if name in _PER_BROKER_CONFIGS or (
            name != dynamic_base_name(name) and dynamic_base_name(name) not in _CLUSTER_LEVEL_LISTENER_CONFIGS)},
            "Cannot update these configs at default cluster level, broker id must be specified"))
    for refused, message in checks:
        if refused:
            return f"{message}: Set({', '.join(sorted(refused))})"
    return None


def broker_key_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys that set the same thing as `name`, `name` included (log.retention.ms/minutes/hours)."""
    return next((key.broker_synonyms for key in TOPIC_CONFIGS.values() if name in key.broker_synonyms), (name,))


def layered_broker_props(static: Mapping[str, Any], *dynamic_layers: Mapping[str, Any]) -> dict[str, Any]:
    """The broker settings in force: the static ones under the dynamic layers (cluster default, then this broker's
    own), each key of a higher layer hiding its synonyms below (a dynamic log.retention.ms beats a static
    log.retention.hours), as Kafka's DynamicBrokerConfig.overrideProps."""
    props = dict(static)
    for layer in dynamic_layers:
        for name, value in layer.items():
            for synonym in broker_key_synonyms(name):
                if synonym not in BROKER_CONFIGS:  # log.flush.scheduler.interval.ms also times the flusher
                    props.pop(synonym, None)
            props[name] = value
    return props


def host_port(host: str, port: int) -> str:
    """host:port as bootstrap.servers and listeners write it: an IPv6 host in brackets ([::1]:9092)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_listener(text: str) -> tuple[str, int]:
    """(host, port) of the first entry of a `listeners`-style value: `PLAINTEXT://host:port,...`."""
    address = text.split(",")[0].split("://", 1)[-1]
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


# Security settings, read per listener by odradek.security (ssl.*, sasl.*, <mechanism>.sasl.jaas.config,
# listener.name.<name>.<key>): taken as
# given rather than typed in BROKER_CONFIGS, because Kafka lets each listener carry its own.
LISTENER_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.", "plain.sasl.", "scram-sha-256.sasl.",
                              "scram-sha-512.sasl.", "connections.max.reauth.ms")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclasses.dataclass(frozen=True)
class Listener:
    """One entry of `listeners`: its name (PLAINTEXT, SSL, CLIENT, ...), security protocol and address."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def setting(self, props: Mapping[str, Any], key: str, default: Any = None) -> Any:
        """A security key as this listener sees it: `listener.name.<name>.<key>` (name in lower case, as Kafka
        writes it) over the bare `<key>`."""
        prefixed = f"listener.name.{self.name.lower()}.{key}"
        return props.get(prefixed, props.get(key, default))


def _listener_entries(text: str) -> list[tuple[str, str, int]]:
    entries = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, separator, address = entry.partition("://")
        host, _, port = address.rpartition(":")
        if not separator or not port.isdigit():
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid listener {entry!r}: expected NAME://host:port")
        entries.append((name.upper(), host.strip("[]"), int(port)))
    return entries


def parse_listeners(text: str, protocol_map: str) -> list[Listener]:
    """The `listeners` value as Listener entries, each name's protocol from listener.security.protocol.map (a name
    that is itself a protocol needs no entry, as in Kafka); names must be unique, as Kafka requires."""
    protocols = {name.strip().upper(): protocol.strip().upper()
                 for name, _, protocol in (pair.partition(":") for pair in protocol_map.split(",") if ":" in pair)}
    listeners = []
    for name, host, port in _listener_entries(text):
        protocol = protocols.get(name, name if name in SECURITY_PROTOCOLS else None)
        if protocol not in SECURITY_PROTOCOLS:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"No security protocol defined for listener {name} (listener.security.protocol.map)")
        if any(listener.name == name for listener in listeners):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Each listener must have a different name, {name} repeats")
        listeners.append(Listener(name, protocol, host, port))
    return listeners


def parse_advertised_listeners(text: str) -> dict[str, tuple[str, int]]:
    """advertised.listeners as listener name -> (host, port)."""
    return {name: (host, port) for name, host, port in _listener_entries(text)}
