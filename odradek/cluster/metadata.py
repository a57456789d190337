"""The cluster's metadata: which topics exist, their ids, partitions, replica assignment and config overrides.

This is the state a Kafka controller owns (in ZooKeeper or KRaft). A single-node broker keeps it in the log
directory: a JSON snapshot, replaced atomically (write a temporary file, fsync, rename), and a journal of the
changes since (odradek.cluster.catalogue_journal), one fsync'd line per change, folded into a new snapshot once it
outgrows the snapshot (and at every start), so a change costs its own size, not the catalogue's. The replication
fields (leader, leader epoch, replicas, in-sync replicas) are part of the model from the start so that the
ZooKeeper-backed controller replaces only the persistence, not the shape. Plain code: no sockets, no event loop.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import uuid
from pathlib import Path
from typing import Any

from odradek.cluster.catalogue_journal import CatalogueJournal, read_journal
from odradek.cluster.elections import reassigned
from odradek.cluster.membership import ClusterMembershipError
from odradek.config import accepted_topic_configs, validate_topic_configs
from odradek.errors import ErrorCode, KafkaError
from odradek.security.acl import AclBinding, AclFilter
from odradek.security.quotas import Entity, entity_of
from odradek.security.scram import ScramCredential
from odradek.storage.segment import write_atomically

METADATA_FILE = "odradek-metadata.json"
METADATA_JOURNAL = "odradek-metadata.journal"
MIN_JOURNAL_BYTES_TO_COMPACT = 1 << 20  # below this the journal is not folded in, however small the snapshot
META_PROPERTIES = "meta.properties"

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty, '.' or '..'")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name {name!r} is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


@dataclasses.dataclass
class PartitionAssignment:
    """Who holds one partition. leader_epoch grows by one at every leader change. While a reassignment moves it
    (odradek/cluster/elections.py), `replicas` are the target and the original replicas together and
    adding_replicas / removing_replicas say which of them come and go."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    adding_replicas: list[int] = dataclasses.field(default_factory=list)
    removing_replicas: list[int] = dataclasses.field(default_factory=list)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclasses.dataclass
class TopicMetadata:
    """One topic in the catalogue. Its partitions are not changed in place except by `add_partitions` (a
    catalogue that follows ZooKeeper builds a new TopicMetadata at every change instead), which is what lets
    `metadata_entries` hold encoded Metadata answers for exactly this state: (version, authorized operations) ->
    the topic's entry as that version encodes it (odradek.broker.handlers.metadata). Encoding 1000 partitions
    costs milliseconds; a copy of the bytes, microseconds."""

    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionAssignment]
    configs: dict[str, str]
    metadata_entries: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": [{"leader": p.leader, "leader_epoch": p.leader_epoch, "replicas": p.replicas, "isr": p.isr}
                           for p in self.partitions],  # a single node never reassigns
            "configs": self.configs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TopicMetadata":
        return cls(
            name=data["name"],
            topic_id=uuid.UUID(data["topic_id"]),
            partitions=[PartitionAssignment(**p) for p in data["partitions"]],
            configs=dict(data["configs"]),
        )


class DamagedFileError(ValueError):
    """A metadata file that does not parse. They are written atomically, or appended to with a torn last line
    dropped, so only an outside change does this; the broker refuses to start rather than guess (an empty catalogue
    would set every partition aside as stray)."""

    def __init__(self, path: Path, reason: object):
        super().__init__(f"{path} is damaged ({reason}); it is only ever replaced whole, so something else changed "
                         "it: restore it from a copy (the partition directories beside it are untouched)")


def new_cluster_id() -> str:
    """22 URL-safe base64 characters of a random UUID, as kafka-storage random-uuid prints."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ClusterMetadata:
    """The catalogue of topics of one log directory, persisted on every change."""

    keeps_catalogue_files = True  # the snapshot and journal; False where the catalogue lives elsewhere (ZooKeeper)

    def __init__(self, log_dir: Path, node_id: int):
        self.log_dir = log_dir
        self.node_id = node_id
        self.topics: dict[str, TopicMetadata] = {}
        self.topics_by_id: dict[uuid.UUID, TopicMetadata] = {}
        self.cluster_id = ""
        self.next_producer_id_block = 0
        # dynamic broker configs by resource name: "" the cluster default, "<node id>" one broker (Kafka's
        # ConfigRecords for a BROKER resource)
        self.broker_configs: dict[str, dict[str, str]] = {}
        # a group's configs by group id (Kafka's ConfigRecords for a GROUP resource)
        self.group_configs: dict[str, dict[str, str]] = {}
        self.acls: list[AclBinding] = []  # the authorizer's bindings, in creation order; replaced whole on a change
        self.client_quotas: dict[Entity, dict[str, float]] = {}  # quota entity -> {quota key: value}
        # SCRAM credentials: user -> mechanism -> Kafka's credential text (odradek.security.scram), as Kafka keeps
        # them under /config/users/<user>
        self.scram_credentials: dict[str, dict[str, str]] = {}
        self._journal: CatalogueJournal | None = None  # open once loaded (a single node's catalogue)
        self._snapshot_size = 0

    @classmethod
    def load(cls, log_dir: Path, node_id: int, cluster_id: str | None = None) -> "ClusterMetadata":
        """cluster_id: the id the cluster already has (from ZooKeeper); None on a single node, which makes one."""
        log_dir.mkdir(parents=True, exist_ok=True)
        metadata = cls(log_dir, node_id)
        metadata.cluster_id = metadata._load_or_make_cluster_id(cluster_id)
        path = log_dir / METADATA_FILE
        if path.exists():
            try:
                data = path.read_bytes()
                metadata._snapshot_size = len(data)
                stored = json.loads(data)
                metadata._take_settings(stored)
                for data in stored["topics"]:
                    metadata._take_topic(TopicMetadata.from_json(data))
            except (ValueError, KeyError, TypeError) as exc:
                raise DamagedFileError(path, exc) from None
        if not cls.keeps_catalogue_files:
            return metadata
        journal_path = log_dir / METADATA_JOURNAL
        try:
            entries, length = read_journal(journal_path)
            for entry in entries:
                metadata._replay(entry)
        except (ValueError, KeyError, TypeError) as exc:
            raise DamagedFileError(journal_path, exc) from None
        metadata._journal = CatalogueJournal(journal_path, length)
        if entries or not path.exists():
            metadata.save()
        return metadata

    def _take_settings(self, stored: dict[str, Any]) -> None:
        """The snapshot's or a journal entry's producer id block, dynamic broker configs, group configs, ACLs,
        quotas, SCRAM."""
        self.next_producer_id_block = stored.get("next_producer_id_block", 0)
        self.broker_configs = {name: dict(configs) for name, configs in stored.get("broker_configs", {}).items()}
        self.group_configs = {name: dict(configs) for name, configs in stored.get("group_configs", {}).items()}
        self.acls = [AclBinding.from_json(acl) for acl in stored.get("acls", [])]
        self.client_quotas = {entity_of(entry["entity"].items()): dict(entry["values"])
                              for entry in stored.get("client_quotas", [])}
        self.scram_credentials = {user: dict(by_mechanism) for user, by_mechanism
                                  in stored.get("scram_credentials", {}).items()}

    def _take_topic(self, topic: TopicMetadata) -> None:
        old = self.topics.get(topic.name)
        if old is not None:
            del self.topics_by_id[old.topic_id]
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def _replay(self, entry: dict[str, Any]) -> None:
        """One journal entry (see `_record_topic` and the others for their shapes)."""
        if "topic" in entry:
            self._take_topic(TopicMetadata.from_json(entry["topic"]))
        elif "deleted_topic" in entry:
            topic = self.topics.pop(entry["deleted_topic"], None)
            if topic is not None:
                del self.topics_by_id[topic.topic_id]
        else:
            self._take_settings(entry["settings"])

    def _load_or_make_cluster_id(self, cluster_id: str | None) -> str:
        """meta.properties (Kafka's own file name and keys) keeps the cluster id across restarts; data written for
        one cluster never joins another."""
        path = self.log_dir / META_PROPERTIES
        if path.exists():
            try:
                props = dict(line.split("=", 1) for line in path.read_text().splitlines()
                             if "=" in line and not line.startswith("#"))
            except ValueError as exc:
                raise DamagedFileError(path, exc) from None
            if not props.get("cluster.id"):
                raise DamagedFileError(path, "no cluster.id")
            stored = props["cluster.id"].strip()
            if cluster_id is not None and stored != cluster_id:
                raise ClusterMembershipError(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored} in {path}. The broker is "
                    "trying to join the wrong cluster. Configured zookeeper.connect may be wrong.")
            return stored
        cluster_id = cluster_id or new_cluster_id()
        write_atomically(path, f"version=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n".encode())
        return cluster_id

    def save(self) -> None:
        """A new snapshot of the whole catalogue, then an empty journal (a crash between the two replays entries
        the snapshot already holds, which changes nothing)."""
        body = {"version": 1, **self._persisted_settings(), "topics": [t.to_json() for t in self.topics.values()]}
        # compact: json's indenting encoder is the pure-Python one, 9x slower than the C one
        data = json.dumps(body, separators=(",", ":")).encode()
        write_atomically(self.log_dir / METADATA_FILE, data)
        self._snapshot_size = len(data)
        self._journal.clear()

    def _record(self, entry: dict[str, Any]) -> None:
        """Make one change durable: appended to the journal, or folded into a new snapshot once the journal
        outgrew the snapshot (so every byte of the catalogue is rewritten a bounded number of times)."""
        self._journal.append(entry)
        if self._journal.size > max(self._snapshot_size, MIN_JOURNAL_BYTES_TO_COMPACT):
            self.save()

    def _record_topic(self, topic: TopicMetadata) -> None:
        self._record({"topic": topic.to_json()})

    def _record_settings(self) -> None:
        self._record({"settings": self._persisted_settings()})

    def _persisted_settings(self) -> dict[str, Any]:
        """The snapshot's fields besides the topics: the producer id block, dynamic broker configs, group configs,
        ACLs, client quotas and SCRAM credentials."""
        return {"next_producer_id_block": self.next_producer_id_block, "broker_configs": self.broker_configs,
                "group_configs": self.group_configs,
                "acls": [acl.to_json() for acl in self.acls],
                "client_quotas": [{"entity": dict(entity), "values": values}
                                  for entity, values in self.client_quotas.items()],
                "scram_credentials": self.scram_credentials}

    def settled(self, name: str, *, deleted: bool = False) -> bool:
        """Whether a change to the topic is in force everywhere: at once here (a ZooKeeper catalogue waits for the
        controller)."""
        return True

    def registered_brokers(self) -> set[int]:
        return {self.node_id}

    def _check_replication_factor(self, replication_factor: int) -> None:
        if replication_factor > 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): "
                             f"The target replication factor of {replication_factor} cannot be reached "
                             "because only 1 broker(s) are registered.")

    def _check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                         configs: dict[str, str]) -> None:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        self._check_replication_factor(replication_factor)
        validate_topic_configs(configs)

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], *, replicas: list[list[int]] | None = None,
                     validate_only: bool = False) -> TopicMetadata:
        """`replicas`, a manual assignment, can only name this broker here (check_manual_assignment), which is where
        every partition goes anyway."""
        self._check_new_topic(name, num_partitions, replication_factor, configs)
        topic = TopicMetadata(name, uuid.uuid4(), [self._new_assignment() for _ in range(num_partitions)],
                              accepted_topic_configs(name, configs))
        if not validate_only:
            self._take_topic(topic)
            self._record_topic(topic)
        return topic

    def check_manual_assignment(self, replica_lists: list[list[int]]) -> int:
        """Kafka's checks of a manual replica assignment (one broker-id list per partition, in partition order);
        returns its replication factor. Only registered brokers may appear, which on one node means this one."""
        registered = self.registered_brokers()
        factor = None
        for replicas in replica_lists:
            if not replicas:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes an empty replica list.")
            for broker_id in replicas:
                if replicas.count(broker_id) > 1:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                                     f"includes the broker {broker_id} more than once.")
                if broker_id not in registered:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment "
                                     f"includes broker {broker_id}, but no such broker is registered.")
            if factor is not None and len(replicas) != factor:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes "
                                 f"a partition with {len(replicas)} replica(s), but this is not consistent with "
                                 f"previous partitions, which have {factor} replica(s).")
            factor = len(replicas)
        return factor or 0

    # ------------------------------------------------------------------------- elections and reassignments
    def assignment_of(self, name: str, index: int) -> PartitionAssignment:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"No such topic as {name}" if topic is None else f"No such partition as {name}-{index}")
        return topic.partitions[index]

    def request_elections(self, election_type: int, partitions: list[tuple[str, int]]) -> None:
        """Have the controller hold these ElectLeaders elections (each found needed and possible by
        odradek.cluster.elections.elected on this view). A single node's partitions are always led by their only
        replica, so none is ever needed here."""

    def reassign_partitions(self, name: str, targets: dict[int, list[int] | None]) -> dict[int, KafkaError | None]:
        """AlterPartitionReassignments for one topic: per partition, None (accepted) or the refusal. A target is
        checked as a manual assignment (registered brokers, no duplicates); None cancels."""
        outcomes: dict[int, KafkaError | None] = {}
        for index, target in targets.items():
            try:
                self.assignment_of(name, index)
                if target is not None:
                    self.check_manual_assignment([target])
                outcomes[index] = None
            except KafkaError as exc:
                outcomes[index] = exc
        accepted = {index: targets[index] for index, outcome in outcomes.items() if outcome is None}
        if accepted:
            outcomes.update(self._write_reassignments(name, accepted))
        return outcomes

    def _write_reassignments(self, name: str, targets: dict[int, list[int] | None]) -> dict[int, KafkaError | None]:
        """Record the checked targets (odradek.cluster.elections.reassigned); the outcome per partition. On one
        node the only target the checks let through is the replica list the partition has: nothing moves."""
        outcomes: dict[int, KafkaError | None] = {}
        for index, target in targets.items():
            assignment = self.topics[name].partitions[index]
            try:
                reassigned(assignment.replicas, assignment.adding_replicas, assignment.removing_replicas, target)
                outcomes[index] = None
            except KafkaError as exc:
                outcomes[index] = exc
        return outcomes

    def _new_assignment(self) -> PartitionAssignment:
        return PartitionAssignment(leader=self.node_id, leader_epoch=0, replicas=[self.node_id], isr=[self.node_id])

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        del self.topics_by_id[topic.topic_id]
        self._record({"deleted_topic": name})
        return topic

    def add_partitions(self, name: str, total_count: int, *, replicas: list[list[int]] | None = None,
                       validate_only: bool = False) -> list[int]:
        """Grow a topic to total_count partitions; returns the new partition indexes. `replicas` as for
        create_topic."""
        topic, added = self._check_growth(name, total_count)
        if not validate_only:
            topic.partitions.extend(self._new_assignment() for _ in added)
            topic.metadata_entries.clear()
            self._record_topic(topic)
        return added

    def _check_growth(self, name: str, total_count: int) -> tuple[TopicMetadata, list[int]]:
        """(the topic, the partition indexes growing it to total_count would add), or Kafka's refusal."""
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if total_count <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than or equal to "
                             f"the requested {total_count}.")
        return topic, list(range(current, total_count))

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve [start, start + size) of producer ids, persisted before use so no id is handed out twice."""
        start = self.next_producer_id_block
        self.next_producer_id_block = start + size
        self._record_settings()
        return start

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of the cluster default ("") or of one broker ("<id>"); the caller validated
        them."""
        if configs:
            self.broker_configs[resource_name] = dict(configs)
        else:
            self.broker_configs.pop(resource_name, None)
        self._record_settings()

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's configs (validated by the caller); none left forgets the group's entry."""
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        self._record_settings()

    def check_acl(self, acl: AclBinding) -> None:
        """KafkaError unless this catalogue can store the binding (any valid one here)."""

    def add_acls(self, acls: list[AclBinding]) -> None:
        """Store new bindings; one already stored is not stored twice (Kafka's ACLs are a set)."""
        self.acls = self.acls + [acl for acl in dict.fromkeys(acls) if acl not in self.acls]
        self._record_settings()

    def remove_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove every binding some filter matches; per filter, the bindings it matched."""
        matched = [[acl for acl in self.acls if acl_filter.matches(acl)] for acl_filter in filters]
        gone = {acl for acls in matched for acl in acls}
        if gone:
            self.acls = [acl for acl in self.acls if acl not in gone]
            self._record_settings()
        return matched

    def set_client_quotas(self, entity: Entity, values: dict[str, float]) -> None:
        """Replace one entity's quotas (validated by the caller); none left removes the entity."""
        if values:
            self.client_quotas[entity] = dict(values)
        else:
            self.client_quotas.pop(entity, None)
        self._record_settings()

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self.scram_credentials.get(user, {}).get(mechanism)
        return ScramCredential.from_text(text) if text is not None else None

    def set_scram_credentials(self, changes: list[tuple[str, str, ScramCredential | None]]) -> None:
        """Upsert (a credential) or delete (None) each (user, mechanism), then persist once."""
        for user, mechanism, credential in changes:
            by_mechanism = self.scram_credentials.setdefault(user, {})
            if credential is None:
                by_mechanism.pop(mechanism, None)
            else:
                by_mechanism[mechanism] = credential.to_text()
            if not by_mechanism:
                del self.scram_credentials[user]
        self._record_settings()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        validate_topic_configs(configs)
        self.topics[name].configs = accepted_topic_configs(name, configs)
        self._record_topic(self.topics[name])

