"""Admin: topic and consumer-group administration over confluent-kafka's AdminClient, returning plain data.

The CLI's `topics` and `groups` commands, the mirror and tests all go through this one place, so each
administrative question (a topic's partitions, a group's lag, offsets at a time) is answered one way.
Every call waits for its answer (`timeout` seconds) and raises ClientError with the broker's reason, at once when
the broker refuses the login or no bootstrap server takes a connection (ConnectionFailures).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping

import confluent_kafka
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewPartitions, NewTopic, OffsetSpec)

from odradek.client.connection import Connection, Unreachable, UnsupportedApi, server_address
from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError, ConnectionFailures
from odradek.cluster.membership import BrokerEndpoint, ClusterInfo
from odradek.errors import ErrorCode, error_name
from odradek.protocol import api
from odradek.security.client import client_security

TIMEOUT_S = 15.0
POLL_S = 0.05  # how often a waiting call serves the client's error callback
METADATA_STEP_S = 1.0  # a Metadata request is given this long before the failures are looked at again
COORDINATOR_RETRIABLE = frozenset({"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"})
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms


@dataclasses.dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    earliest_offset: int | None  # None: offline (no live leader to ask)
    latest_offset: int | None


@dataclasses.dataclass(frozen=True)
class PartitionLayout:
    """Where a partition lives, from Metadata alone (no offsets): cheap for every partition of a large cluster."""
    partition: int
    leader: int  # -1: offline
    replicas: list[int]
    isr: list[int]


@dataclasses.dataclass(frozen=True)
class ConfigValue:
    """One topic or broker setting as DescribeConfigs gives it: its value and where that value comes from."""
    name: str
    value: str | None
    source: str  # DYNAMIC_TOPIC_CONFIG for the topic's own override, DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ...
    read_only: bool
    sensitive: bool
    synonyms: tuple[tuple[str, str | None, str], ...] = ()  # (name, value, source), most specific first: given
    # for the cluster-wide broker defaults only (confluent-kafka keeps one synonym per name, so not its answers)


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]  # the topic's own overrides


@dataclasses.dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    committed: int | None  # None: nothing committed
    latest_offset: int | None  # None: offline (no live leader to ask)
    member: str  # the member it is assigned to, "" if none

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.latest_offset is None:
            return None
        return max(0, self.latest_offset - self.committed)


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    assignor: str
    members: list[tuple[str, str, str]]  # (member id, client id, host)
    offsets: list[GroupOffset]
    coordinator: int = -1  # the coordinator broker's id (-1: not known)


class Admin:
    def __init__(self, bootstrap_servers: str, timeout: float = TIMEOUT_S, config: dict[str, str] | None = None):
        """config: further librdkafka client properties (security.protocol, sasl.*, ssl.* for a secured listener)."""
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        self.config = dict(config or {})
        self.failures = ConnectionFailures(bootstrap_servers)
        self._client = AdminClient({**(config or {}), "bootstrap.servers": bootstrap_servers,
                                    "logger": LIBRDKAFKA_LOGGER, "error_cb": self.failures})

    def _fresh_failures(self) -> None:
        """Serve the callbacks queued since the last call and forget their refusals, which may predate the broker."""
        self._client.poll(0)
        self.failures.forget_refusals()

    def _wait(self, future, timeout: float | None = None):
        """The future's result, serving the error callback meanwhile: a refused login or connection ends it."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        self._fresh_failures()
        while not future.done():
            self._client.poll(POLL_S)
            self.failures.check()
            if time.monotonic() >= deadline:
                raise ClientError(f"no answer from the cluster within {timeout:g}s")
        try:
            result = future.result()
        except confluent_kafka.KafkaException as exc:
            raise ClientError.of(exc) from None
        self.failures.reached()
        return result

    def _coordinated(self, make_future):
        """A group call, asked again on the coordinator's retriable errors as Kafka's Admin retries them (every
        retry.backoff.ms until the timeout): the group's coordinator moved, is loading its offsets, or is not
        there yet."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._wait(make_future(), max(0.01, deadline - time.monotonic()))
            except ClientError as exc:
                if exc.name not in COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
                    raise
            time.sleep(RETRY_BACKOFF_S)

    def describe_cluster(self) -> ClusterInfo:
        """The live brokers (with their racks) and the controller, by DescribeCluster."""
        answer = self._wait(self._client.describe_cluster(request_timeout=self.timeout))
        brokers = sorted((BrokerEndpoint(node.id, node.host, node.port, node.rack) for node in answer.nodes),
                         key=lambda broker: broker.node_id)
        controller = answer.controller.id if answer.controller is not None else -1
        return ClusterInfo(answer.cluster_id, controller, brokers)

    # ------------------------------------------------------------------------------------------- topics
    def _metadata(self, topic: str | None = None):
        """Metadata, asked in steps so that a refused login or connection ends the wait at once."""
        deadline = time.monotonic() + self.timeout
        self._fresh_failures()
        while True:
            step = min(METADATA_STEP_S, max(0.01, deadline - time.monotonic()))
            try:
                metadata = self._client.list_topics(topic, timeout=step)
                self.failures.reached()
                return metadata
            except confluent_kafka.KafkaException as exc:
                self._client.poll(0)
                self.failures.check()
                if time.monotonic() >= deadline or ClientError.of(exc).name not in ("_TRANSPORT", "_TIMED_OUT"):
                    raise ClientError.of(exc) from None

    def list_topics(self, include_internal: bool = False) -> list[str]:
        return sorted(name for name in self._metadata().topics if include_internal or not name.startswith("__"))

    def partition_count(self, topic: str) -> int | None:
        """Partitions of an existing topic, None if there is no such topic (never auto-creates)."""
        entry = self._metadata().topics.get(topic)
        return len(entry.partitions) if entry is not None and entry.error is None else None

    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None) -> None:
        topic = NewTopic(name, partitions, replication_factor, config=dict(configs or {}))
        self._wait(self._client.create_topics([topic], request_timeout=self.timeout)[name])

    def delete_topic(self, name: str) -> None:
        self._wait(self._client.delete_topics([name], request_timeout=self.timeout)[name])

    def add_partitions(self, name: str, total: int) -> None:
        self._wait(self._client.create_partitions([NewPartitions(name, total)], request_timeout=self.timeout)[name])

    def alter_topic_configs(self, name: str, set_configs: Mapping[str, str], delete_configs: Iterable[str] = ()) -> None:
        self.alter_configs(ConfigResource.Type.TOPIC, name, set_configs, delete_configs)

    def alter_configs(self, kind: ConfigResource.Type, name: str, set_configs: Mapping[str, str],
                      delete_configs: Iterable[str] = (), validate_only: bool = False) -> None:
        """IncrementalAlterConfigs of one resource (a topic by name, a broker by its id, "" for every broker: the
        cluster-wide defaults, which confluent-kafka refuses to name, go over Admin.call); validate_only: the
        broker checks the changes and makes none."""
        if kind == ConfigResource.Type.BROKER and name == "":
            request = api("IncrementalAlterConfigs").request
            changes = [request.AlterableConfig(name=key, config_operation=AlterConfigOpType.SET.value, value=value)
                       for key, value in set_configs.items()]
            changes += [request.AlterableConfig(name=key, config_operation=AlterConfigOpType.DELETE.value, value=None)
                        for key in delete_configs]
            answer = self.call("IncrementalAlterConfigs", (0, 1), validate_only=validate_only, resources=[
                request.AlterConfigsResource(resource_type=kind.value, resource_name="", configs=changes)])
            for result in answer.responses:
                raise_for_error(result.error_code, result.error_message)
            return
        entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                   for key, value in set_configs.items()]
        entries += [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in delete_configs]
        resource = ConfigResource(kind, name, incremental_configs=entries)
        self._wait(self._client.incremental_alter_configs([resource], validate_only=validate_only)[resource])

    def topic_config_values(self, name: str) -> list[ConfigValue]:
        """Every setting of the topic, its own overrides and the defaults it inherits, sorted by name."""
        return self.config_values(ConfigResource.Type.TOPIC, name)

    def config_values(self, kind: ConfigResource.Type, name: str) -> list[ConfigValue]:
        """Every setting of one resource (a topic, or a broker by its id) with its source, sorted by name; for "",
        the cluster-wide broker defaults set (dynamic ones only, as Kafka answers them), with their synonyms."""
        if kind == ConfigResource.Type.BROKER and name == "":
            answer = self.call("DescribeConfigs", (1, 4), include_synonyms=True, include_documentation=False,
                               resources=[api("DescribeConfigs").request.DescribeConfigsResource(
                                   resource_type=kind.value, resource_name="", configuration_keys=None)])
            result = answer.results[0]
            raise_for_error(result.error_code, result.error_message)
            source = confluent_kafka.admin.ConfigSource
            return sorted((ConfigValue(entry.name, entry.value, source(entry.config_source).name, entry.read_only,
                                       entry.is_sensitive, tuple((synonym.name, synonym.value,
                                                                  source(synonym.source).name)
                                                                 for synonym in entry.synonyms))
                           for entry in result.configs), key=lambda value: value.name)
        resource = ConfigResource(kind, name)
        entries = self._wait(self._client.describe_configs([resource])[resource])
        return [ConfigValue(key, entry.value, confluent_kafka.admin.ConfigSource(entry.source).name,
                            entry.is_read_only, entry.is_sensitive) for key, entry in sorted(entries.items())]

    def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's own overrides (not broker or built-in defaults)."""
        return {entry.name: entry.value for entry in self.topic_config_values(name)
                if entry.source == "DYNAMIC_TOPIC_CONFIG"}

    def topic_layouts(self, include_internal: bool = False) -> dict[str, list[PartitionLayout]]:
        """Every topic's partitions with their leader, replicas and ISR, from one Metadata request."""
        return {name: [PartitionLayout(index, entry.partitions[index].leader, list(entry.partitions[index].replicas),
                                       list(entry.partitions[index].isrs)) for index in sorted(entry.partitions)]
                for name, entry in sorted(self._metadata().topics.items())
                if entry.error is None and (include_internal or not name.startswith("__"))}

    def describe_topics(self, names: Iterable[str]) -> list[TopicInfo]:
        """The topics' partitions with their offsets; a partition whose leader is not a live broker (offline) has
        None for offsets, and costs no wait: its ListOffsets is not asked."""
        metadata = self._metadata()
        infos = []
        for name in names:
            entry = metadata.topics.get(name)
            if entry is None or entry.error is not None:
                raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {name!r} does not exist",
                                  "UNKNOWN_TOPIC_OR_PART")
            indexes = sorted(entry.partitions)
            led = [index for index in indexes if entry.partitions[index].leader in metadata.brokers]
            earliest = dict.fromkeys(indexes) | self.list_offsets(name, led, OffsetSpec.earliest())
            latest = dict.fromkeys(indexes) | self.list_offsets(name, led, OffsetSpec.latest())
            partitions = [PartitionInfo(index, entry.partitions[index].leader, list(entry.partitions[index].replicas),
                                        list(entry.partitions[index].isrs), earliest[index], latest[index])
                          for index in indexes]
            infos.append(TopicInfo(name, partitions, self.topic_configs(name)))
        return infos

    # ------------------------------------------------------------------------------------------ offsets
    def list_offsets(self, topic: str, partitions: Iterable[int], spec: OffsetSpec) -> dict[int, int]:
        """ListOffsets for each partition: OffsetSpec.earliest(), .latest() or .for_timestamp(ms) (-1 if no record
        is that recent)."""
        return {index: offset for (_, index), offset in self.offsets([(topic, p) for p in partitions], spec).items()}

    def offsets(self, partitions: Iterable[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        """list_offsets for partitions of any number of topics, asked together (one request per leader)."""
        asked = {confluent_kafka.TopicPartition(topic, index): spec for topic, index in partitions}
        if not asked:
            return {}
        futures = self._client.list_offsets(asked, request_timeout=self.timeout)
        return {(tp.topic, tp.partition): self._wait(future).offset for tp, future in futures.items()}

    def offsets_for_time(self, topic: str, partitions: Iterable[int], timestamp_ms: int) -> dict[int, int]:
        """The first offset at or after the time in each partition (the latest offset where none is)."""
        partitions = list(partitions)
        found = self.list_offsets(topic, partitions, OffsetSpec.for_timestamp(timestamp_ms))
        latest = self.list_offsets(topic, [p for p, offset in found.items() if offset < 0], OffsetSpec.latest())
        return {p: (offset if offset >= 0 else latest[p]) for p, offset in found.items()}

    # ------------------------------------------------------------------------------------------- groups
    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every group."""
        result = self._wait(self._client.list_consumer_groups(request_timeout=self.timeout))
        return sorted((listing.group_id, listing.state.name if listing.state else "UNKNOWN")
                      for listing in result.valid)

    def describe_group(self, group_id: str) -> GroupInfo:
        described = self._coordinated(lambda: self._client.describe_consumer_groups(
            [group_id], request_timeout=self.timeout)[group_id])
        owner: dict[tuple[str, int], str] = {}
        for member in described.members:
            for tp in (member.assignment.topic_partitions if member.assignment else ()):
                owner[(tp.topic, tp.partition)] = member.member_id
        committed = self.committed_offsets(group_id)
        keys = sorted(set(committed) | set(owner))
        metadata = self._metadata()
        # a partition whose leader is not a live broker (offline) has no log end, and costs no wait
        led = [(topic, index) for topic, index in keys if topic in metadata.topics
               and index in metadata.topics[topic].partitions
               and metadata.topics[topic].partitions[index].leader in metadata.brokers]
        latest = self.offsets(led, OffsetSpec.latest())
        offsets = [GroupOffset(topic, index, committed.get((topic, index)), latest.get((topic, index)),
                               owner.get((topic, index), "")) for topic, index in keys]
        members = [(m.member_id, m.client_id, m.host) for m in described.members]
        state = described.state.name if described.state else "UNKNOWN"
        coordinator = described.coordinator.id if described.coordinator is not None else -1
        return GroupInfo(group_id, state, described.partition_assignor or "", members, offsets, coordinator)

    def group_member_counts(self, group_ids: Iterable[str]) -> dict[str, int]:
        """How many active members each group has, from one DescribeGroups per coordinator."""
        group_ids = list(group_ids)
        if not group_ids:
            return {}
        futures = self._client.describe_consumer_groups(group_ids, request_timeout=self.timeout)
        return {group_id: len(self._wait(future).members) for group_id, future in futures.items()}

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        request = confluent_kafka.ConsumerGroupTopicPartitions(group_id)
        result = self._coordinated(lambda: self._client.list_consumer_group_offsets(
            [request], request_timeout=self.timeout)[group_id])
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def reset_plan(self, group_id: str, topics: Iterable[str] | None = None, *, to_earliest: bool = False,
                   to_offset: int | None = None, to_datetime: int | None = None) -> dict[tuple[str, int], int]:
        """The offsets a reset of the group's committed offsets would set (what `odradek groups reset-offsets` and
        the console show before applying them with set_group_offsets), in `topics` (None: every topic the group has
        offsets for): `to_offset` in every partition, the first offset at or after `to_datetime` (epoch ms), the
        earliest offsets with `to_earliest`, else the latest."""
        committed = self.committed_offsets(group_id)
        topics = sorted({topic for topic, _ in committed}) if topics is None else topics
        plan: dict[tuple[str, int], int] = {}
        for topic in topics:
            count = self.partition_count(topic)
            if count is None:
                raise ValueError(f"topic {topic!r} does not exist")
            partitions = range(count)
            if to_offset is not None:
                # as Kafka's tool does: an offset outside a partition's log is moved to its nearer end
                earliest = self.list_offsets(topic, partitions, OffsetSpec.earliest())
                latest = self.list_offsets(topic, partitions, OffsetSpec.latest())
                found = {p: min(max(to_offset, earliest[p]), latest[p]) for p in partitions}
            elif to_datetime is not None:
                found = self.offsets_for_time(topic, partitions, to_datetime)
            else:
                found = self.list_offsets(topic, partitions,
                                          OffsetSpec.earliest() if to_earliest else OffsetSpec.latest())
            plan.update({(topic, p): offset for p, offset in found.items()})
        return plan

    def set_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit these offsets for the group (it must have no active members)."""
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            group_id, [confluent_kafka.TopicPartition(topic, index, offset)
                       for (topic, index), offset in sorted(offsets.items())])
        result = self._coordinated(lambda: self._client.alter_consumer_group_offsets(
            [request], request_timeout=self.timeout)[group_id])
        for tp in result.topic_partitions:
            if tp.error is not None:
                raise ClientError.of(tp.error)

    def delete_group(self, group_id: str) -> None:
        self._coordinated(lambda: self._client.delete_consumer_groups(
            [group_id], request_timeout=self.timeout)[group_id])

    # ---------------------------------------------------------------------------------------------- ACLs
    def alter_user_scram_credentials(self, alteration) -> None:
        """One UserScramCredentialUpsertion or UserScramCredentialDeletion."""
        future = self._client.alter_user_scram_credentials([alteration], request_timeout=self.timeout)[alteration.user]
        self._wait(future)

    def describe_user_scram_credentials(self, users: list[str] | None = None) -> dict:
        """Each user's UserScramCredentialsDescription: the users named, or all of them. Asking for all of them
        without DESCRIBE on the cluster is refused here (CLUSTER_AUTHORIZATION_FAILED): librdkafka crashes the
        process on the broker's top-level error to that request."""
        if users:
            futures = self._client.describe_user_scram_credentials(users, request_timeout=self.timeout)
            return {user: self._wait(future) for user, future in futures.items()}
        self._require_cluster_describe()
        return self._wait(self._client.describe_user_scram_credentials(request_timeout=self.timeout))

    def create_acls(self, bindings: list[AclBinding]) -> None:
        for future in self._client.create_acls(bindings, request_timeout=self.timeout).values():
            self._wait(future)

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs matching the filter; CLUSTER_AUTHORIZATION_FAILED when this principal may not describe them.
        librdkafka drops DescribeAcls' top-level error and answers an empty list instead, so an empty answer is
        checked against the principal's operations on the cluster (DescribeCluster's authorized operations)."""
        bindings = self._wait(self._client.describe_acls(acl_filter, request_timeout=self.timeout))
        if not bindings:
            self._require_cluster_describe()
        return bindings

    def _require_cluster_describe(self) -> None:
        """CLUSTER_AUTHORIZATION_FAILED unless this principal may DESCRIBE the cluster (DescribeCluster's
        authorized operations)."""
        cluster = self._wait(self._client.describe_cluster(include_authorized_operations=True,
                                                           request_timeout=self.timeout))
        if confluent_kafka.admin.AclOperation.DESCRIBE not in (cluster.authorized_operations or ()):
            raise ClientError("CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed.",
                              "CLUSTER_AUTHORIZATION_FAILED")

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        """The bindings the filters matched, now removed."""
        deleted = []
        for future in self._client.delete_acls(filters, request_timeout=self.timeout).values():
            deleted.extend(self._wait(future))
        return deleted

    # ------------------------------------------------------------------------------------------- quotas
    def describe_client_quotas(self) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """Every client quota: (entity, {key: value}), an entity being ((type, name or None for the default), ...)
        as kafka-configs --describe --entity-type users|clients|ips shows them. confluent-kafka has no such
        call, so it goes over odradek.client.connection to the first bootstrap server (Admin.call)."""
        answer = self.call("DescribeClientQuotas", components=[], strict=False)
        raise_for_error(answer.error_code, answer.error_message)
        return [(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                 {value.key: value.value for value in entry.values}) for entry in answer.entries or ()]

    def alter_client_quota(self, entity: Iterable[tuple[str, str | None]], key: str, value: float | None) -> None:
        """Set one quota of an entity (value None removes it), as kafka-configs --alter --add-config and
        --delete-config; over Admin.call, as describe_client_quotas."""
        request = api("AlterClientQuotas").request
        answer = self.call("AlterClientQuotas", validate_only=False, entries=[request.EntryData(
            entity=[request.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
            ops=[request.OpData(key=key, value=value or 0.0, remove=value is None)])])
        for entry in answer.entries:
            raise_for_error(entry.error_code, entry.error_message)

    # ------------------------------------------------------------------------------ leaders and reassignments
    def elect_leaders(self, preferred: bool, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int],
                                                                                              ClientError | None]:
        """ElectLeaders (preferred, else unclean) for the partitions, or all of them (None); each partition's
        outcome (those with ELECTION_NOT_NEEDED are left out when all were asked for, as Kafka answers)."""
        election = confluent_kafka.ElectionType.PREFERRED if preferred else confluent_kafka.ElectionType.UNCLEAN
        asked = None if partitions is None else [confluent_kafka.TopicPartition(t, p) for t, p in partitions]
        results = self._wait(self._client.elect_leaders(election, asked))  # no timeout option: it crashes
        return {(tp.topic, tp.partition): None if error is None else ClientError.of(error)
                for tp, error in results.items()}

    def alter_partition_reassignments(self, targets: Mapping[tuple[str, int], list[int] | None]
                                      ) -> dict[tuple[str, int], ClientError | None]:
        """AlterPartitionReassignments: each partition's target replicas (None cancels), and its outcome.
        confluent-kafka has no such call, so it goes over odradek.client.connection to the first bootstrap
        server (Admin.call)."""
        request = api("AlterPartitionReassignments").request
        by_topic: dict[str, list] = {}
        for (topic, index), replicas in targets.items():
            by_topic.setdefault(topic, []).append(request.ReassignablePartition(partition_index=index,
                                                                                replicas=replicas))
        answer = self.call("AlterPartitionReassignments", timeout_ms=int(self.timeout * 1000), topics=[
            request.ReassignableTopic(name=topic, partitions=partitions) for topic, partitions in by_topic.items()])
        raise_for_error(answer.error_code, answer.error_message)
        return {(topic.name, partition.partition_index): _error_of(partition.error_code, partition.error_message)
                for topic in answer.responses for partition in topic.partitions}

    def list_partition_reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """The reassignments under way: (replicas, adding replicas, removing replicas) by partition."""
        answer = self.call("ListPartitionReassignments", timeout_ms=int(self.timeout * 1000), topics=None)
        raise_for_error(answer.error_code, answer.error_message)
        return {(topic.name, partition.partition_index): (list(partition.replicas), list(partition.adding_replicas),
                                                          list(partition.removing_replicas))
                for topic in answer.topics for partition in topic.partitions}

    def call(self, name: str, versions: tuple[int, int] = (0, 0), **fields):
        """One request of an API confluent-kafka has no call for, at a version in `versions`, over
        odradek.client.connection to the first bootstrap server, logged in with this client's security settings."""
        try:
            connection = Connection(server_address(self.bootstrap_servers.split(",")[0]), self.timeout,
                                    "odradek-admin", {name: versions}, client_security(self.config))
        except (Unreachable, UnsupportedApi) as exc:
            raise ClientError(str(exc), "_TRANSPORT") from None
        try:
            return connection.call(name, **fields)
        except Unreachable as exc:
            raise ClientError(str(exc), "_TRANSPORT") from None
        finally:
            connection.close()


def _error_of(code: int, message: str | None) -> ClientError | None:
    if code == ErrorCode.NONE:
        return None
    return ClientError(f"{error_name(code)}: {message or error_name(code)}", error_name(code))


def raise_for_error(code: int, message: str | None) -> None:
    """A ClientError named after the Kafka error code, unless it is NONE."""
    error = _error_of(code, message)
    if error is not None:
        raise error
