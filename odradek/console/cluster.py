"""What the console reads from and does to a cluster, only through the Kafka protocol (odradek.client's Admin,
SimpleConsumer and Producer over confluent-kafka) and, in cluster mode, ZooKeeper read-only (kazoo).

So it works against any Kafka-compatible cluster, and with SASL/ACLs on it sees what its principal may see: it
connects with the client properties it is given (`client_config`) and the brokers filter their answers. Every read
is sized to one page: topics come from one Metadata request, offsets are asked for the partitions on the page only,
messages are read chunk by chunk from the page's first offset, never a whole partition, and a search across a
topic's partitions reads at most its bound of records (the newest of each partition). Records are read with the
consumer group `read_group` (assign only: it joins no group and commits nothing, but Kafka's authorizer asks for
READ on that group, so on a secured cluster the console's principal needs it).

Share groups (KIP-932) are read with odradek.client.share_groups (ShareGroupDescribe, DescribeShareGroupOffsets);
a share-partition's in-flight window (its records' states and delivery counts) has no admin API, so it is read, as
any reader of Kafka's format may, from the share-partition's latest record in `__share_group_state`, going back
from that partition's end a chunk at a time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import confluent_kafka
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ConfigResource,
                                   OffsetSpec, ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from odradek.client import Admin, ClientError, ConfigValue, GroupOffset, Message, PartitionLayout, Producer, \
    SimpleConsumer
from odradek.client.errors import LIBRDKAFKA_LOGGER
from odradek.client.options import timestamp_ms
from odradek.client.share_groups import (ShareGroupInfo, ShareOffset, alter_share_group_offsets,
                                         delete_share_group, describe_share_groups, list_share_groups,
                                         share_group_offsets)
from odradek.console import render
from odradek.coordinator.share_partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE
from odradek.coordinator.share_state import (SHARE_STATE_TOPIC, UPDATE_TYPE, merge_batches, parse_record,
                                             state_partition_for)
from odradek.security.scram import DEFAULT_ITERATIONS, MECHANISMS

TOPICS_PER_PAGE = 50
GROUPS_PER_PAGE = 50
PARTITIONS_PER_PAGE = 100
AFFECTED_SHOWN = 100
MESSAGES_PER_PAGE = 50
KEY_SCAN_CHUNK = 500
KEY_SCAN_LIMIT = 10_000  # records a key-filtered page looks through before it stops and offers to go on
SEARCH_LIMIT = 10_000  # records a search across a topic's partitions looks through by default
SEARCH_LIMIT_MAX = 1_000_000
SEARCH_FIELDS = ("key", "value", "header")
DEFAULT_READ_GROUP = "odradek-console"
# what an ACL's fields may be, as kafka-acls names them (the enums' own names, less ANY and UNKNOWN)
ACL_RESOURCE_TYPES = [t.name for t in ResourceType if t.name not in ("ANY", "UNKNOWN")]
ACL_PATTERN_TYPES = ["LITERAL", "PREFIXED"]
ACL_OPERATIONS = [o.name for o in AclOperation if o.name not in ("ANY", "UNKNOWN")]
ACL_PERMISSIONS = ["ALLOW", "DENY"]
QUOTA_ENTITY_TYPES = ["user", "client-id", "ip"]
QUOTA_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate"]  # Kafka's QuotaConfig names; the broker says which fit which entity


@dataclasses.dataclass(frozen=True)
class BrokerRow:
    node_id: int
    host: str
    port: int
    rack: str | None
    controller: bool
    up: bool


@dataclasses.dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    records: int | None = None  # in its online partitions (the topic list asks their offsets)
    size_bytes: float | None = None  # from the brokers' metrics, None without them

    @classmethod
    def of(cls, name: str, layouts: list[PartitionLayout]) -> "TopicRow":
        return cls(name, len(layouts), len(layouts[0].replicas) if layouts else 0,
                   sum(1 for p in layouts if len(p.isr) < len(p.replicas)), sum(1 for p in layouts if p.leader < 0))


@dataclasses.dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    members: int
    lag: int | None  # over its committed offsets; None: nothing committed


@dataclasses.dataclass(frozen=True)
class ShareGroupRow:
    group_id: str
    state: str
    members: int


# a record's delivery state in __share_group_state (Kafka's RecordState codes)
DELIVERY_STATES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}


@dataclasses.dataclass(frozen=True)
class InFlightRange:
    """Records first..last of a share-partition's in-flight window with the same state and delivery count, as its
    latest state record keeps them: a record acquired now is kept as available with the count of its delivery."""
    first: int
    last: int
    state: str
    deliveries: int

    @property
    def records(self) -> int:
        return self.last - self.first + 1


@dataclasses.dataclass(frozen=True)
class SharePartitionRow:
    topic: str
    partition: int
    start_offset: int | None  # None: the group has no state for it yet
    latest: int | None  # the log end; None: offline
    lag: int | None  # records from the start offset to the high watermark not done yet
    members: list[str]  # the member ids it is assigned to (several members may share a partition)
    records: Mapping[str, int] | None  # in-flight records by state (the broker's metrics); None: not known (no
    # metrics, or a share-partition the broker has not used since it started)
    window: list[InFlightRange] | None  # None: not read (no state record found, or its partition offline)


@dataclasses.dataclass(frozen=True)
class ShareGroupDetail:
    group: ShareGroupInfo
    partitions: render.Page[SharePartitionRow]
    lag: int  # over all its share-partitions
    metrics: bool  # whether the in-flight records by state were read (from the broker's metrics)
    window_refusal: str | None  # why the in-flight windows could not be read from __share_group_state


@dataclasses.dataclass(frozen=True)
class AffectedPartition:
    """A partition a down broker leaves under-replicated (ISR short of its replicas) or offline (no live leader)."""
    topic: str
    layout: PartitionLayout
    down: list[int]  # its replicas on brokers that are not live

    @property
    def offline(self) -> bool:
        return self.layout.leader < 0 or self.layout.leader in self.down


@dataclasses.dataclass(frozen=True)
class Overview:
    cluster_id: str
    controller: int
    brokers: list[BrokerRow]
    topics: int
    partitions: int
    under_replicated: int
    offline: int
    affected: list[AffectedPartition]  # the first AFFECTED_SHOWN under-replicated or offline partitions


@dataclasses.dataclass(frozen=True)
class PartitionRow:
    layout: PartitionLayout
    earliest: int | None  # None: offline (no live leader to ask)
    latest: int | None
    size_bytes: float | None  # from the brokers' metrics, None without them


@dataclasses.dataclass(frozen=True)
class TopicDetail:
    row: TopicRow
    partitions: render.Page[PartitionRow]
    configs: list[ConfigValue]


@dataclasses.dataclass(frozen=True)
class MessagePage:
    messages: list[Message]
    partitions: int  # of the topic
    earliest: int
    latest: int
    next_offset: int | None  # where the next page in the same direction starts; None at the log's end
    scanned: int  # records read to fill the page (more than shown with a key filter)


@dataclasses.dataclass(frozen=True)
class SearchResult:
    messages: list[Message]  # the matches, newest first (by timestamp), at most a page
    matches: int  # all the matches found (more than shown when over a page)
    scanned: int  # records looked through
    records: int  # records in the topic's online partitions
    partitions: int  # of the topic

    @property
    def bounded(self) -> bool:
        """The bound on records scanned stopped the search before the topic's oldest records."""
        return self.scanned < self.records


def matches(message: Message, field: str, text: str, exact: bool) -> bool:
    """Whether the record's key, value or a header (its value, or NAME=VALUE) is `text` (exact) or contains it."""
    def decoded(data: bytes | None) -> str | None:
        return None if data is None else data.decode("utf-8", "replace")

    if field == "key":
        candidates = [decoded(message.key)]
    elif field == "value":
        candidates = [decoded(message.value)]
    else:
        candidates = [form for name, value in message.headers for form in (decoded(value), f"{name}={decoded(value)}")]
    return any(candidate is not None and (candidate == text if exact else text in candidate)
               for candidate in candidates)


class ClusterView:
    def __init__(self, bootstrap_servers: str, client_config: Mapping[str, str] | None = None,
                 zookeeper: str | None = None, timeout: float = 15.0, read_group: str = DEFAULT_READ_GROUP):
        self.bootstrap_servers = bootstrap_servers
        self.client_config = dict(client_config or {})
        self.read_group = read_group
        self.zookeeper = zookeeper
        self.admin = Admin(bootstrap_servers, timeout, self.client_config)
        self._producer: Producer | None = None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(5)

    # ------------------------------------------------------------------------------------------ cluster
    def overview(self) -> Overview:
        cluster = self.admin.describe_cluster()
        layouts = self.admin.topic_layouts()
        live = {broker.node_id: broker for broker in cluster.brokers}
        assigned = {replica for partitions in layouts.values() for p in partitions for replica in p.replicas}
        brokers = [BrokerRow(node_id, live[node_id].host if node_id in live else "", live[node_id].port
                             if node_id in live else 0, live[node_id].rack if node_id in live else None,
                             node_id == cluster.controller_id, node_id in live)
                   for node_id in sorted(set(live) | assigned)]
        rows = [TopicRow.of(name, partitions) for name, partitions in layouts.items()]
        affected = [AffectedPartition(name, p, [replica for replica in p.replicas if replica not in live])
                    for name, partitions in layouts.items() for p in partitions
                    if p.leader not in live or len(p.isr) < len(p.replicas)]
        return Overview(cluster.cluster_id, cluster.controller_id, brokers, len(rows),
                        sum(row.partitions for row in rows), sum(row.under_replicated for row in rows),
                        sum(row.offline for row in rows), affected[:AFFECTED_SHOWN])

    def _online(self, partitions: list[tuple[str, PartitionLayout]]) -> list[tuple[str, int]]:
        """The partitions whose leader is a live broker: only those are asked for offsets, so a down broker costs
        no wait (its partitions' leaders are elected again or they are offline)."""
        live = {broker.node_id for broker in self.admin.describe_cluster().brokers}
        return [(topic, p.partition) for topic, p in partitions if p.leader in live]

    # ------------------------------------------------------------------------------------------- topics
    def topics(self, query: str = "", page: int = 1, log_sizes: Mapping[tuple[str, int], float] | None = None
               ) -> render.Page[TopicRow]:
        """A page of topics matching `query`, with the records in each (offsets asked for that page's topics only,
        all together) and, with metrics, their size."""
        layouts = {name: partitions for name, partitions in self.admin.topic_layouts().items()
                   if query.lower() in name.lower()}
        shown = render.page_of(sorted(layouts), page, TOPICS_PER_PAGE)
        online = self._online([(name, p) for name in shown.items for p in layouts[name]])
        earliest = self.admin.offsets(online, OffsetSpec.earliest())
        latest = self.admin.offsets(online, OffsetSpec.latest())
        records: dict[str, int] = dict.fromkeys(shown.items, 0)
        for name, index in online:
            records[name] += latest[(name, index)] - earliest[(name, index)]
        sizes: dict[str, float] = {}
        for (name, _), size in (log_sizes or {}).items():
            if name in records:
                sizes[name] = sizes.get(name, 0.0) + size
        rows = [dataclasses.replace(TopicRow.of(name, layouts[name]), records=records[name],
                                    size_bytes=sizes.get(name) if log_sizes is not None else None)
                for name in shown.items]
        return dataclasses.replace(shown, items=rows)

    def topic(self, name: str, page: int = 1, log_sizes: Mapping[tuple[str, int], float] | None = None
              ) -> TopicDetail:
        layouts = self.admin.topic_layouts(include_internal=True).get(name)
        if layouts is None:
            raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {name!r} does not exist", "UNKNOWN_TOPIC_OR_PART")
        shown = render.page_of(layouts, page, PARTITIONS_PER_PAGE)
        online = self._online([(name, p) for p in shown.items])
        earliest = self.admin.offsets(online, OffsetSpec.earliest())
        latest = self.admin.offsets(online, OffsetSpec.latest())
        sizes = log_sizes or {}
        rows = [PartitionRow(p, earliest.get((name, p.partition)), latest.get((name, p.partition)),
                             sizes.get((name, p.partition))) for p in shown.items]
        return TopicDetail(TopicRow.of(name, layouts), dataclasses.replace(shown, items=rows),
                           self.admin.topic_config_values(name))

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]) -> None:
        self.admin.create_topic(name, partitions, replication_factor, configs)

    def set_topic_config(self, name: str, key: str, value: str) -> None:
        """Set one of the topic's settings; an empty value removes the override (back to the default)."""
        if value.strip():
            self.admin.alter_topic_configs(name, {key: value.strip()})
        else:
            self.admin.alter_topic_configs(name, {}, [key])

    def add_partitions(self, name: str, total: int) -> None:
        self.admin.add_partitions(name, total)

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topic(name)

    # ----------------------------------------------------------------------------------------- messages
    def messages(self, topic: str, partition: int, offset: int | None = None, timestamp_ms: int | None = None,
                 newest_first: bool = True, key_filter: str = "", size: int = MESSAGES_PER_PAGE) -> MessagePage:
        """One page of a partition's records from `offset` (or from `timestamp_ms`: oldest first the first record at
        or after it, newest first the last one before it; or from the end the order starts at), in that order; with
        `key_filter`, only records whose key contains it, looking through at most KEY_SCAN_LIMIT records."""
        layouts = self.admin.topic_layouts(include_internal=True).get(topic)
        if layouts is None:
            raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {topic!r} does not exist", "UNKNOWN_TOPIC_OR_PART")
        count = len(layouts)
        if not 0 <= partition < count:
            raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {topic!r} has partitions 0 to {count - 1}, not "
                              f"{partition}", "UNKNOWN_TOPIC_OR_PART")
        if not self._online([(topic, layouts[partition])]):  # asking would wait out the timeout
            raise ClientError(f"LEADER_NOT_AVAILABLE: {topic}-{partition} is offline: no live broker leads it "
                              f"(replicas {', '.join(map(str, layouts[partition].replicas))})", "LEADER_NOT_AVAILABLE")
        with SimpleConsumer(self.bootstrap_servers, topic, partition, config=self._reader_config()) as consumer:
            earliest, latest = consumer.earliest_offset(), consumer.latest_offset()
            if timestamp_ms is not None:
                offset = consumer.offset_for_time(timestamp_ms)
                if newest_first:  # going back in time from it: the last record before it first
                    offset -= 1
            chunk_size = KEY_SCAN_CHUNK if key_filter else size
            chunk = render.first_chunk(earliest, latest, offset, newest_first, chunk_size)
            found: list[Message] = []
            scanned = 0
            while chunk[0] < chunk[1] and len(found) < size and scanned < KEY_SCAN_LIMIT:
                records = _read_range(consumer, *chunk)
                scanned += chunk[1] - chunk[0]
                if key_filter:
                    records = [m for m in records if m.key is not None and key_filter in
                               m.key.decode("utf-8", "replace")]
                found.extend(reversed(records) if newest_first else records)
                if not key_filter:
                    break
                chunk = render.next_chunk(earliest, latest, chunk, newest_first, chunk_size)
        shown = found[:size]
        if len(found) > size:  # the next page starts right after the last one shown
            next_offset = shown[-1].offset - 1 if newest_first else shown[-1].offset + 1
        else:
            next_offset = chunk[0] - 1 if newest_first else chunk[1]
        at_end = next_offset < earliest if newest_first else next_offset >= latest
        return MessagePage(shown, count, earliest, latest, None if at_end else next_offset, scanned)

    def search(self, topic: str, field: str, text: str, exact: bool = False, limit: int = SEARCH_LIMIT,
               size: int = MESSAGES_PER_PAGE) -> SearchResult:
        """The records of all the topic's online partitions whose `field` (key, value or header) is or contains
        `text`, looking through at most `limit` records: the newest of each partition (render.search_windows)."""
        if field not in SEARCH_FIELDS:
            raise ValueError(f"search in key, value or header, not {field!r}")
        layouts = self.admin.topic_layouts(include_internal=True).get(topic)
        if layouts is None:
            raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {topic!r} does not exist", "UNKNOWN_TOPIC_OR_PART")
        online = self._online([(topic, p) for p in layouts])
        earliest = self.admin.offsets(online, OffsetSpec.earliest())
        latest = self.admin.offsets(online, OffsetSpec.latest())
        ranges = {index: (earliest[(topic, index)], latest[(topic, index)]) for _, index in online}
        windows = {index: window for index, window in
                   render.search_windows(ranges, min(max(1, limit), SEARCH_LIMIT_MAX)).items() if window[0] < window[1]}
        found = [m for m in self._read_windows(topic, windows) if matches(m, field, text, exact)]
        found.sort(key=lambda m: (m.timestamp_ms or 0, m.partition, m.offset), reverse=True)
        return SearchResult(found[:size], len(found), sum(end - start for start, end in windows.values()),
                            sum(end - start for start, end in ranges.values()), len(layouts))

    def _read_windows(self, topic: str, windows: Mapping[int, tuple[int, int]]) -> list[Message]:
        """The records in [start, end) of each partition, with one consumer assigned to them all (fewer where the
        log has gaps; what arrived once the time for that many records is up)."""
        if not windows:
            return []
        consumer = confluent_kafka.Consumer({**self._reader_config(), "bootstrap.servers": self.bootstrap_servers,
                                             "enable.auto.commit": False, "enable.partition.eof": False,
                                             "logger": LIBRDKAFKA_LOGGER})
        records: list[Message] = []
        pending = {index: confluent_kafka.TopicPartition(topic, index, start)
                   for index, (start, _) in windows.items()}
        try:
            consumer.assign(list(pending.values()))
            deadline = time.monotonic() + _read_timeout(sum(end - start for start, end in windows.values()))
            while pending and time.monotonic() < deadline:
                for raw in consumer.consume(500, 0.25):  # short: the positions below say when to stop
                    if raw.error() is not None:
                        raise ClientError.of(raw.error())
                    if raw.offset() < windows[raw.partition()][1]:
                        records.append(Message.of(raw))
                # a partition is done once its position (past records and transaction markers) reaches its end
                for position in consumer.position(list(pending.values())):
                    if position.offset >= windows[position.partition][1]:
                        consumer.pause([pending.pop(position.partition)])
        finally:
            consumer.close()
        return records

    def _reader_config(self) -> dict[str, str]:
        return {**self.client_config, "group.id": self.read_group}

    def produce(self, topic: str, partition: int | None, key: str, value: str,
                headers: list[tuple[str, str]]) -> tuple[int, int]:
        """Send one record and wait for it: (partition, offset)."""
        if self._producer is None:
            self._producer = Producer(self.bootstrap_servers, linger_ms=0, config=self.client_config)
        sent = self._producer.send_sync(topic, value, key or None, partition=partition, headers=headers or None,
                                        timeout=self.admin.timeout)
        return sent.partition, sent.offset

    # ------------------------------------------------------------------------------------------- groups
    def groups(self, page: int = 1) -> render.Page[GroupRow]:
        """A page of groups (GROUPS_PER_PAGE, by name) with their state, active members and total lag."""
        shown = render.page_of(self.admin.list_groups(), page, GROUPS_PER_PAGE)
        return dataclasses.replace(shown, items=self.group_rows(shown.items))

    def group_rows(self, listed: list[tuple[str, str]]) -> list[GroupRow]:
        """Each (group id, state) with the group's active members and total lag over its online partitions
        (committed offsets asked group by group, the log ends of all their partitions together)."""
        members = self.admin.group_member_counts(group_id for group_id, _ in listed)
        committed = {group_id: self.admin.committed_offsets(group_id) for group_id, _ in listed}
        layouts = self.admin.topic_layouts(include_internal=True)
        online = set(self._online([(name, p) for name, partitions in layouts.items() for p in partitions]))
        latest = self.admin.offsets(sorted({key for offsets in committed.values() for key in offsets} & online),
                                    OffsetSpec.latest())
        return [GroupRow(group_id, state, members.get(group_id, 0),
                         sum(max(0, latest[key] - offset) for key, offset in committed[group_id].items()
                             if key in latest) if committed[group_id] else None)
                for group_id, state in listed]

    def group(self, group_id: str):
        group = self.admin.describe_group(group_id)
        if group.state == "DEAD" and not group.offsets:  # what a coordinator says of a group it does not know
            raise ClientError(f"GROUP_ID_NOT_FOUND: consumer group {group_id!r} does not exist", "GROUP_ID_NOT_FOUND")
        return group

    def reset_plan(self, group_id: str, topics: list[str], target: str, value: str = "") -> dict[tuple[str, int], int]:
        """The offsets `odradek groups reset-offsets` would set: target earliest, latest, offset or datetime."""
        if target not in ("earliest", "latest", "offset", "datetime"):
            raise ValueError(f"unknown reset target {target!r}")
        return self.admin.reset_plan(group_id, topics or None, to_earliest=target == "earliest",
                                     to_offset=int(value) if target == "offset" else None,
                                     to_datetime=timestamp_ms(value) if target == "datetime" else None)

    def reset_offsets(self, group_id: str, plan: Mapping[tuple[str, int], int]) -> None:
        self.admin.set_group_offsets(group_id, plan)

    def delete_group(self, group_id: str) -> None:
        self.admin.delete_group(group_id)

    # ------------------------------------------------------------------------------------- share groups
    def share_groups(self, page: int = 1) -> render.Page[ShareGroupRow]:
        """A page of share groups (GROUPS_PER_PAGE, by name) with their state and members (one ShareGroupDescribe
        for the page)."""
        shown = render.page_of(list_share_groups(self.admin), page, GROUPS_PER_PAGE)
        described = describe_share_groups(self.admin, [group_id for group_id, _ in shown.items])
        return dataclasses.replace(shown, items=[ShareGroupRow(g.group_id, g.state, len(g.members)) for g in described])

    def share_group(self, group_id: str, page: int = 1,
                    in_flight: Mapping[tuple[str, str, int], Mapping[str, int]] | None = None) -> ShareGroupDetail:
        """The share group's members, its total lag and, for a page (PARTITIONS_PER_PAGE) of the partitions it has
        state for or assigned, the start offset, log end, lag, its in-flight records by state (`in_flight`, the
        broker's metrics by (group, topic, partition); None: not known) and its in-flight window from
        __share_group_state (log ends and windows read for that page only)."""
        (group,) = describe_share_groups(self.admin, [group_id])
        offsets = {(o.topic, o.partition): o for o in share_group_offsets(self.admin, group_id)}
        assigned: dict[tuple[str, int], list[str]] = {}
        for member in group.members:
            for key in member.partitions:
                assigned.setdefault(key, []).append(member.member_id)
        every = sorted(set(offsets) | set(assigned))
        shown = render.page_of(every, page, PARTITIONS_PER_PAGE)
        keys = shown.items
        layouts = self.admin.topic_layouts(include_internal=True)
        online = self._online([(topic, layouts[topic][index]) for topic, index in keys
                               if topic in layouts and index < len(layouts[topic])])
        latest = self.admin.offsets(online, OffsetSpec.latest())
        try:
            stateful = [offsets[key] for key in keys if key in offsets and offsets[key].start_offset is not None]
            windows, refusal = self._share_windows(group_id, stateful, layouts), None
        except ClientError as exc:  # the principal may not read the state topic (READ on __share_group_state)
            windows, refusal = {}, str(exc)
        rows = []
        for topic, index in keys:
            offset = offsets.get((topic, index))
            rows.append(SharePartitionRow(topic, index, offset.start_offset if offset else None,
                                          latest.get((topic, index)), offset.lag if offset else None,
                                          assigned.get((topic, index), []),
                                          None if in_flight is None else in_flight.get((group_id, topic, index)),
                                          windows.get((topic, index))))
        total_lag = sum(o.lag or 0 for o in offsets.values())
        return ShareGroupDetail(group, dataclasses.replace(shown, items=rows), total_lag, in_flight is not None,
                                refusal)

    def _share_windows(self, group_id: str, offsets: list[ShareOffset],
                       layouts: Mapping[str, list[PartitionLayout]]) -> dict[tuple[str, int], list[InFlightRange]]:
        """Each share-partition's in-flight window as __share_group_state has it at its end: the share-partition's
        last snapshot with the ShareUpdate records after it (Kafka writes both; Odradek a snapshot at every change),
        in the partition of that topic Kafka's share coordinator places it in. The online partitions holding them
        are read back from their ends together, KEY_SCAN_CHUNK records of each at a time and at most KEY_SCAN_LIMIT,
        until every share-partition's snapshot is found; one whose state was deleted (a tombstone) or is not found
        within the bound is left out. A ClientError when the principal may not read that topic."""
        if not offsets:
            return {}
        state_layouts = layouts.get(SHARE_STATE_TOPIC)
        if not state_layouts:  # it holds the group's start offsets, so it is there: Metadata hides it from us
            raise ClientError(f"TOPIC_AUTHORIZATION_FAILED: Metadata does not show {SHARE_STATE_TOPIC}, which holds "
                              f"this group's state, to the console's principal: reading the in-flight records "
                              f"takes READ on that topic", "TOPIC_AUTHORIZATION_FAILED")
        shown: dict[tuple, tuple[str, int]] = {}  # share-partition key -> (topic, partition)
        holding: dict[int, set[tuple]] = {}  # state partition -> the keys it holds
        for o in offsets:
            key = (group_id, o.topic_id, o.partition)
            shown[key] = (o.topic, o.partition)
            holding.setdefault(state_partition_for(*key, len(state_layouts)), set()).add(key)
        online = self._online([(SHARE_STATE_TOPIC, state_layouts[index]) for index in sorted(holding)])
        earliest = {index: offset for (_, index), offset in self.admin.offsets(online, OffsetSpec.earliest()).items()}
        last = {index: offset for (_, index), offset in self.admin.offsets(online, OffsetSpec.latest()).items()}
        ends = dict(last)  # where each partition's next chunk back ends
        updates: dict[tuple, list] = {key: [] for _, index in online for key in holding[index]}  # newest first
        windows: dict[tuple[str, int], list[InFlightRange]] = {}
        while True:
            chunks = {index: (max(earliest[index], end - KEY_SCAN_CHUNK, last[index] - KEY_SCAN_LIMIT), end)
                      for index, end in ends.items() if not holding[index].isdisjoint(updates)}
            chunks = {index: chunk for index, chunk in chunks.items() if chunk[0] < chunk[1]}
            if not chunks:
                return windows
            read = self._read_windows(SHARE_STATE_TOPIC, chunks)
            for message in sorted(read, key=lambda m: (m.partition, m.offset), reverse=True):
                parsed = parse_record(message.key, message.value) if message.key else None
                if parsed is None or parsed.key not in updates:
                    continue
                if parsed.kind == UPDATE_TYPE and not parsed.deleted:
                    updates[parsed.key].append(parsed)
                    continue
                newer = updates.pop(parsed.key)
                if not parsed.deleted:
                    windows[shown[parsed.key]] = in_flight_window(parsed, reversed(newer))
            ends.update({index: start for index, (start, _) in chunks.items()})

    def share_reset_plan(self, group_id: str, topics: list[str], target: str,
                         value: str = "") -> dict[tuple[str, int], int]:
        """The start offsets `odradek share-groups reset-offsets` would set (no topics: every topic the group has
        state for)."""
        return self.reset_plan(group_id, topics or sorted({o.topic for o in share_group_offsets(self.admin, group_id)}),
                               target, value)

    def share_reset_offsets(self, group_id: str, plan: Mapping[tuple[str, int], int]) -> None:
        alter_share_group_offsets(self.admin, group_id, plan)

    def delete_share_group(self, group_id: str) -> None:
        delete_share_group(self.admin, group_id)

    # ----------------------------------------------------------------------------------------- security
    def acls(self) -> list[AclBinding]:
        """Every ACL the brokers hold (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster)."""
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                      AclPermissionType.ANY)
        return sorted(self.admin.describe_acls(everything), key=lambda b: (b.restype.name, b.name, b.principal,
                                                                           b.operation.name))

    def add_acl(self, fields: Mapping[str, str]) -> None:
        self.admin.create_acls([_acl(AclBinding, fields)])

    def remove_acl(self, fields: Mapping[str, str]) -> None:
        self.admin.delete_acls([_acl(AclBindingFilter, fields)])

    def scram_users(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """Each SCRAM user with its (mechanism, iterations); the passwords never leave the broker."""
        described = self.admin.describe_user_scram_credentials()
        return [(user, sorted((info.mechanism.name.replace("_", "-"), info.iterations)
                              for info in description.scram_credential_infos))
                for user, description in sorted(described.items())]

    def set_scram_user(self, user: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> None:
        """Create the user's credential for `mechanism`, or change its password."""
        if not user or not password:
            raise ValueError("a SCRAM user needs a name and a password")
        self.admin.alter_user_scram_credentials(UserScramCredentialUpsertion(
            user, ScramCredentialInfo(_mechanism(mechanism), iterations), password.encode()))

    def delete_scram_user(self, user: str, mechanism: str) -> None:
        self.admin.alter_user_scram_credentials(UserScramCredentialDeletion(user, _mechanism(mechanism)))

    def broker_configs(self, broker_id: int) -> list[ConfigValue]:
        return self.admin.config_values(ConfigResource.Type.BROKER, str(broker_id))

    def set_broker_config(self, broker_id: int, key: str, value: str) -> None:
        """Set one of the broker's dynamic settings; an empty value removes the override."""
        if value.strip():
            self.admin.alter_configs(ConfigResource.Type.BROKER, str(broker_id), {key: value.strip()})
        else:
            self.admin.alter_configs(ConfigResource.Type.BROKER, str(broker_id), {}, [key])

    def quotas(self) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        return sorted(self.admin.describe_client_quotas(), key=lambda entry: [(kind, name or "") for kind, name
                                                                                in entry[0]])

    def set_quota(self, entity_type: str, name: str, key: str, value: str) -> None:
        """Set one quota of a user, client id or IP (an empty name: the default of that type); an empty value
        removes it."""
        if entity_type not in QUOTA_ENTITY_TYPES:
            raise ValueError(f"a quota's entity is one of {', '.join(QUOTA_ENTITY_TYPES)}, not {entity_type!r}")
        self.admin.alter_client_quota([(entity_type, name.strip() or None)], key.strip(),
                                      float(value) if value.strip() else None)

    # ---------------------------------------------------------------------------------------- ZooKeeper
    def znode(self, path: str) -> tuple[list[str], bytes]:
        """A znode's children (sorted, numbers in order) and data; read-only."""
        from kazoo.exceptions import NoNodeError

        from odradek.cluster.zookeeper import in_order, zookeeper_client

        if self.zookeeper is None:
            raise ValueError("no ZooKeeper: give the console --zookeeper (cluster mode)")
        with zookeeper_client(self.zookeeper) as client:
            try:
                children = client.get_children(path)
                data = client.get(path)[0] or b""
            except NoNodeError:
                raise ValueError(f"no znode {path}") from None
        return in_order(children), data


def _acl(kind, fields: Mapping[str, str]):
    """An AclBinding (or the filter matching exactly it) from a form's fields, in kafka-acls' names."""
    def choice(name: str, allowed: list[str], default: str) -> str:
        value = (fields.get(name) or default).strip().upper()
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        return value

    principal = (fields.get("principal") or "").strip()
    if ":" not in principal:
        raise ValueError(f"a principal is TYPE:NAME, such as User:alice, not {principal!r}")
    restype = choice("resource_type", ACL_RESOURCE_TYPES, "TOPIC")
    name = (fields.get("resource_name") or "").strip() or ("kafka-cluster" if restype == "BROKER" else "")
    if not name:
        raise ValueError("an ACL names its resource (* for all of that type)")
    pattern = ResourcePatternType[choice("pattern_type", ACL_PATTERN_TYPES, "LITERAL")]
    operation = AclOperation[choice("operation", ACL_OPERATIONS, "READ")]
    permission = AclPermissionType[choice("permission", ACL_PERMISSIONS, "ALLOW")]
    return kind(ResourceType[restype], name, pattern, principal, (fields.get("host") or "*").strip(), operation,
                permission)


def _mechanism(name: str) -> ScramMechanism:
    if name not in MECHANISMS:
        raise ValueError(f"SCRAM mechanism {name!r}: one of {', '.join(MECHANISMS)}")
    return ScramMechanism[name.replace("-", "_")]


def in_flight_window(snapshot, updates) -> list[InFlightRange]:
    """A snapshot's in-flight window with the later ShareUpdate records applied (each record's state and delivery
    count replaced, the start offset moved on: the share coordinator's merge_batches), as ranges of records alike."""
    start, batches = snapshot.start_offset, snapshot.batches
    for update in updates:
        start = max(start, update.start_offset)
        batches = merge_batches(batches, update.batches, start)
    ranges: list[InFlightRange] = []
    for first, last, state, count in merge_batches(batches, [], start):
        name = DELIVERY_STATES.get(state, str(state))
        previous = ranges[-1] if ranges else None
        if previous is not None and previous.last == first - 1 and (previous.state, previous.deliveries) == (
                name, count):
            ranges[-1] = dataclasses.replace(previous, last=last)
        else:
            ranges.append(InFlightRange(first, last, name, count))
    return ranges


def group_lag(offsets: list[GroupOffset]) -> int:
    return sum(offset.lag or 0 for offset in offsets)


def _read_range(consumer: SimpleConsumer, start: int, end: int) -> list[Message]:
    """The records with offsets in [start, end), in order (fewer where the log has gaps: compaction, markers)."""
    records: list[Message] = []
    position = start
    deadline = time.monotonic() + _read_timeout(end - start)
    while position < end and time.monotonic() < deadline:
        # the records are there (below the log end): wait for them as long as the page may take, since a new
        # consumer's first fetch can take over a second on a loaded machine
        fetched = consumer.fetch(position, max_messages=end - position,
                                 timeout=max(0.1, deadline - time.monotonic()))
        if not fetched:
            break
        records.extend(m for m in fetched if m.offset < end)
        position = fetched[-1].offset + 1
    return records


def _read_timeout(records: int) -> float:
    """How long reading this many records may take before the page shows what it has."""
    return 5.0 + records / 1000
