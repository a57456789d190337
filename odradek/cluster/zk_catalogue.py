"""The topic catalogue of a ZooKeeper cluster: ClusterMetadata's shape over Kafka's topic znodes.

What this owns: the broker's in-memory view of every topic (/brokers/topics/[topic]: id and replica assignment;
.../partitions/[n]/state: leader, leader epoch, ISR; /config/topics/[topic]: overrides), kept current by kazoo
watches, and the writes any broker makes for a client: a new topic's assignment (computed here, spread over the
live brokers by odradek.cluster.placement, as Kafka's AdminZkClient.createTopicWithAssignment does on whichever
broker took the request), more partitions, config overrides (with a /config/changes notification), a deletion
request (/admin/delete_topics/[topic]), reassignment targets (adding/removing replicas in the topic znode), election
requests for the controller (/admin/elect_leaders/*) and producer-id blocks (/latest_producer_id_block).
Leadership itself (the state znodes) is written by the controller (odradek.cluster.controller), and their ISR also
by each partition's leader (`write_isr`).

Kafka's controller pushes LeaderAndIsr/UpdateMetadata requests to brokers; here every broker watches the znodes
instead, so handlers never call kazoo: they read `topics` / `topics_by_id`, which watch callbacks (on kazoo's
threads) replace whole, never mutate, so the event loop reads them without locks. Listeners are told after every
change (the broker opens or drops partitions, the controller re-checks leadership).

The security state is the cluster's too, in Kafka's znodes: ACLs (odradek.cluster.zk_acls), SCRAM credentials,
client quotas and dynamic broker configs (odradek.cluster.zk_configs); the catalogue hands their writes on and takes
their views (`acls`, `scram_credentials`, `client_quotas`, `broker_configs`), replaced whole. The file beside the logs
keeps only what is this broker's own: meta.properties.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import threading
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from odradek.cluster.elections import PREFERRED_ELECTION, reassigned
from odradek.cluster.metadata import ClusterMetadata, PartitionAssignment, TopicMetadata
from odradek.cluster.zk_acls import ZooKeeperAcls
from odradek.cluster.zk_changes import change_path
from odradek.cluster.zk_configs import (CHANGE_PREFIX, CONFIG_CHANGES, ZooKeeperConfigs, broker_entity_path,
                                        encode_quota, quota_entity_path, user_entity_path)
from odradek.cluster.placement import assign_replicas, check_replication_factor
from odradek.config import accepted_topic_configs, validate_topic_configs
from odradek.security.quotas import QUOTA_KEYS
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger("odradek.zookeeper")

TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
ELECT_LEADERS = "/admin/elect_leaders"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
NO_LEADER = -1


def topic_path(name: str) -> str:
    return f"{TOPICS}/{name}"


def state_path(name: str, index: int) -> str:
    return f"{TOPICS}/{name}/partitions/{index}/state"


def _json(body: object) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def encode_assignment(topic_id: uuid.UUID, replicas: list[list[int]], adding: dict[int, list[int]] | None = None,
                      removing: dict[int, list[int]] | None = None) -> bytes:
    """/brokers/topics/[topic] as Kafka 3.x writes it (TopicZNode version 3); `adding` and `removing` list the
    replicas of partitions being reassigned (odradek/cluster/elections.py)."""
    return _json({"version": 3, "partitions": {str(i): r for i, r in enumerate(replicas)},
                  "adding_replicas": {str(i): r for i, r in sorted((adding or {}).items()) if r},
                  "removing_replicas": {str(i): r for i, r in sorted((removing or {}).items()) if r},
                  "topic_id": encode_topic_id(topic_id)})


def decode_assignment(data: bytes) -> tuple[uuid.UUID | None, list[list[int]]]:
    """(topic id, replicas per partition); a topic written by an old Kafka has no id."""
    body = json.loads(data)
    partitions = {int(index): list(replicas) for index, replicas in body["partitions"].items()}
    topic_id = body.get("topic_id")
    return (decode_topic_id(topic_id) if topic_id else None), [partitions[i] for i in range(len(partitions))]


def decode_reassignments(data: bytes) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """(adding replicas, removing replicas) by partition of /brokers/topics/[topic] (empty from a Kafka before 2.4)."""
    body = json.loads(data)
    return tuple({int(index): list(replicas) for index, replicas in (body.get(key) or {}).items()}
                 for key in ("adding_replicas", "removing_replicas"))


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """.../partitions/[n]/state (Kafka's TopicPartitionStateZNode, version 1)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int

    def encode(self) -> bytes:
        return _json({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                       "leader_epoch": self.leader_epoch, "isr": self.isr})

    @classmethod
    def decode(cls, data: bytes) -> "PartitionState":
        body = json.loads(data)
        return cls(int(body["leader"]), int(body["leader_epoch"]), list(body["isr"]), int(body["controller_epoch"]))


def encode_election(election_type: int, partitions: list[tuple[str, int]]) -> bytes:
    """An ElectLeaders request for the controller: /admin/preferred_replica_election's format (Kafka 2.x) with the
    election type beside it."""
    return _json({"version": 1, "election_type": election_type,
                  "partitions": [{"topic": topic, "partition": index} for topic, index in partitions]})


def decode_election(data: bytes) -> tuple[int, list[tuple[str, int]]]:
    """(election type, partitions) of an /admin/elect_leaders entry or of /admin/preferred_replica_election."""
    body = json.loads(data)
    return (int(body.get("election_type", PREFERRED_ELECTION)),
            [(str(entry["topic"]), int(entry["partition"])) for entry in body["partitions"]])


def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _json({"version": 1, "config": configs})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    return dict(json.loads(data)["config"]) if data else {}


class _TopicWatch:
    """What the watches of one topic have read so far; `alive` turns False when the topic goes (its watches end)."""

    def __init__(self, name: str):
        self.name = name
        self.alive = True
        self.topic_id: uuid.UUID | None = None
        self.replicas: list[list[int]] | None = None
        self.adding: dict[int, list[int]] = {}  # partitions being reassigned (elections.py)
        self.removing: dict[int, list[int]] = {}
        self.configs: dict[str, str] = {}
        self.states: dict[int, tuple[PartitionState, int]] = {}  # index -> (state, znode version)
        self.state_watched: set[int] = set()


class ZooKeeperCatalogue(ClusterMetadata):
    """The topic catalogue of a ZooKeeper cluster (see the module docstring)."""

    def __init__(self, log_dir: Path, node_id: int):
        super().__init__(log_dir, node_id)
        self.membership = None
        self._client = None
        self._lock = threading.RLock()
        self._watches: dict[str, _TopicWatch] = {}
        self.listeners: list[Callable[[], None]] = []
        self._acl_store: ZooKeeperAcls | None = None

    def follow(self, membership) -> None:
        """Read every topic and ACL now (the watches' first reads are synchronous) and follow them from then on."""
        self.membership = membership
        self._client = membership.client
        self.topics, self.topics_by_id = {}, {}  # ZooKeeper's, whatever the local file had
        ChildrenWatch(self._client, TOPICS, self._on_topics)
        self._acl_store = ZooKeeperAcls(self._client, self._take_acls)
        self._acl_store.follow()
        self._config_store = ZooKeeperConfigs(self._client, self._take_configs)
        self._config_store.follow()

    def _persisted_topics(self):
        return ()  # ZooKeeper keeps them

    def _persisted_security(self):
        return {}  # ZooKeeper keeps them

    # ------------------------------------------------------------------ ACLs, SCRAM, quotas, broker configs
    def _take_acls(self, acls: list) -> None:
        self.acls = acls  # replaced whole: the authorizer reads it on the event loop

    def check_acl(self, acl) -> None:
        """A resource name is a znode name here, so it may not hold '/' (Kafka's AclAuthorizer refuses it too)."""
        if "/" in acl.resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Failed to create ACL: ACL binding contains invalid resource "
                             f"name: {acl.resource_name}")

    def add_acls(self, acls) -> None:
        self._acl_store.add(acls)

    def remove_acls(self, filters):
        return self._acl_store.remove(filters)

    def _take_configs(self, scram_credentials: dict, client_quotas: dict, broker_configs: dict) -> None:
        """The entity configs' new views, each replaced whole; the listeners are told so the broker applies a
        change of its dynamic configs."""
        self.scram_credentials, self.client_quotas = scram_credentials, client_quotas
        changed = broker_configs != self.broker_configs
        self.broker_configs = broker_configs
        if changed:
            for listener in self.listeners:
                listener()

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        self._config_store.update(broker_entity_path(resource_name), lambda _: dict(configs))

    def set_client_quotas(self, entity, values: dict[str, float]) -> None:
        self._config_store.update(quota_entity_path(entity), lambda stored: {
            **{key: value for key, value in stored.items() if key not in QUOTA_KEYS},
            **{key: encode_quota(key, value) for key, value in values.items()}})

    def set_scram_credentials(self, changes) -> None:
        """Each user's credentials in its /config/users/<user> znode, beside its quotas."""
        by_user: dict[str, list] = {}
        for user, mechanism, credential in changes:
            by_user.setdefault(user, []).append((mechanism, credential))

        def changed(stored: dict[str, str], user_changes) -> dict[str, str]:
            for mechanism, credential in user_changes:
                if credential is None:
                    stored.pop(mechanism, None)
                else:
                    stored[mechanism] = credential.to_text()
            return stored

        for user, user_changes in by_user.items():
            self._config_store.update(user_entity_path(user), lambda stored, c=user_changes: changed(stored, c))

    # ------------------------------------------------------------------------------------------ the view
    def state_version(self, name: str, index: int) -> tuple[PartitionState, int] | None:
        """The partition's state znode as last read, with its version (for the controller's conditional write)."""
        watch = self._watches.get(name)
        return watch.states.get(index) if watch is not None else None

    def write_isr(self, name: str, index: int, leader_epoch: int, isr: list[int]) -> bool:
        """A leader's ISR change, on Kafka 2.x's path: the leader rewrites the state znode itself, conditionally on
        the version it last read and only while that state names it leader at `leader_epoch`. False when the write
        lost to the controller's (the next check sees the newer state). Kafka's leader also leaves an
        /isr_change_notification entry for its controller to push UpdateMetadata; every broker here watches the
        state znodes, so none is needed."""
        known = self.state_version(name, index)
        if known is None:
            return False
        state, version = known
        if state.leader != self.node_id or state.leader_epoch != leader_epoch:
            return False
        try:
            self._client.set(state_path(name, index), dataclasses.replace(state, isr=isr).encode(), version=version)
        except (BadVersionError, NoNodeError):
            return False
        log.info("%s-%d: isr %s -> %s", name, index, state.isr, isr)
        return True

    def _on_topics(self, children: list[str]) -> None:
        with self._lock:
            for name in set(self._watches) - set(children):
                self._watches.pop(name).alive = False
                self._publish(name, None)
            for name in set(children) - set(self._watches):
                watch = self._watches[name] = _TopicWatch(name)
                DataWatch(self._client, f"{TOPIC_CONFIGS}/{name}", partial(self._on_config, watch))
                DataWatch(self._client, topic_path(name), partial(self._on_assignment, watch))

    def _on_assignment(self, watch: _TopicWatch, data: bytes | None, stat) -> bool | None:
        with self._lock:
            if not watch.alive:
                return False
            if data is None:  # being deleted
                watch.replicas = None
                self._publish(watch.name, watch)
                return None
            try:
                watch.topic_id, watch.replicas = decode_assignment(data)
                watch.adding, watch.removing = decode_reassignments(data)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable %s: %s", topic_path(watch.name), exc)
                return None
            if watch.topic_id is None:
                watch.topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{watch.name}")
            for index in range(len(watch.replicas)):
                if index not in watch.state_watched:
                    watch.state_watched.add(index)
                    DataWatch(self._client, state_path(watch.name, index), partial(self._on_state, watch, index))
            self._publish(watch.name, watch)
        return None

    def _on_state(self, watch: _TopicWatch, index: int, data: bytes | None, stat) -> bool | None:
        with self._lock:
            if not watch.alive:
                return False
            if data is None:
                watch.states.pop(index, None)
            else:
                try:
                    watch.states[index] = (PartitionState.decode(data), stat.version)
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("ignoring unreadable %s: %s", state_path(watch.name, index), exc)
            self._publish(watch.name, watch)
        return None

    def _on_config(self, watch: _TopicWatch, data: bytes | None, stat) -> bool | None:
        with self._lock:
            if not watch.alive:
                return False
            try:
                watch.configs = decode_topic_config(data)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable %s/%s: %s", TOPIC_CONFIGS, watch.name, exc)
            self._publish(watch.name, watch)
        return None

    def _publish(self, name: str, watch: _TopicWatch | None) -> None:
        """Replace the view's entry for `name` (None or half-read: not visible) and tell the listeners."""
        topics, by_id = dict(self.topics), dict(self.topics_by_id)
        old = topics.pop(name, None)
        if old is not None:
            by_id.pop(old.topic_id, None)
        if watch is not None and watch.replicas is not None and watch.topic_id is not None:
            partitions = []
            for index, replicas in enumerate(watch.replicas):
                state = watch.states.get(index)
                leader, leader_epoch, isr = (state[0].leader, state[0].leader_epoch, state[0].isr) if state else (
                    NO_LEADER, 0, [])
                partitions.append(PartitionAssignment(leader, leader_epoch, replicas, isr,
                                                      watch.adding.get(index, []), watch.removing.get(index, [])))
            topic = TopicMetadata(name, watch.topic_id, partitions, dict(watch.configs))
            topics[name] = topic
            by_id[topic.topic_id] = topic
        self.topics, self.topics_by_id = topics, by_id
        for listener in self.listeners:
            listener()

    def settled(self, name: str, *, deleted: bool = False) -> bool:
        """Whether a change made through this broker is in force: the topic gone, or every partition led."""
        topic = self.topics.get(name)
        if deleted:
            return topic is None
        return topic is not None and all(p.leader != NO_LEADER for p in topic.partitions)

    # ------------------------------------------------------------------------------------------ the writes
    def _live_racks(self) -> dict[int, str | None]:
        return {broker.node_id: broker.rack for broker in self.membership.live_brokers()}

    def registered_brokers(self) -> set[int]:
        return set(self._live_racks())

    def _check_replication_factor(self, replication_factor: int) -> None:
        check_replication_factor(replication_factor, list(self._live_racks()))

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], *, replicas: list[list[int]] | None = None,
                     validate_only: bool = False) -> TopicMetadata:
        """Write the topic's config and assignment (Kafka's order); the controller elects its leaders. The replicas
        are placed as Kafka's AdminUtils places them unless given (a manual assignment, already checked)."""
        self._check_new_topic(name, num_partitions, replication_factor, configs)
        if self._client.exists(topic_path(name)):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        replicas = replicas or assign_replicas(self._live_racks(), num_partitions, replication_factor)
        topic = TopicMetadata(name, uuid.uuid4(), [PartitionAssignment(NO_LEADER, 0, r, []) for r in replicas],
                              accepted_topic_configs(name, configs))
        if not validate_only:
            self._write_config(name, topic.configs, notify=False)
            try:
                self._client.create(topic_path(name), encode_assignment(topic.topic_id, replicas))
            except NodeExistsError:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
            log.info("created topic %s: partitions on brokers %s", name, replicas)
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        """Ask the controller to delete the topic (/admin/delete_topics/[topic]); brokers drop its logs when its
        znodes go."""
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        try:
            self._client.create(f"{DELETE_TOPICS}/{name}")
        except NodeExistsError:
            pass  # already asked
        return topic

    def add_partitions(self, name: str, total_count: int, *, replicas: list[list[int]] | None = None,
                       validate_only: bool = False) -> list[int]:
        """More partitions, placed as Kafka's AdminZkClient.addPartitions: the walk goes on from the broker of
        partition 0's first replica; or where `replicas` (a manual assignment, already checked) says, with as many
        replicas as the partitions the topic has."""
        topic, added = self._check_growth(name, total_count)
        data, stat = self._client.get(topic_path(name))
        topic_id, current = decode_assignment(data)
        adding, removing = decode_reassignments(data)
        if replicas is not None:
            if len(replicas[0]) != len(current[0]):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Inconsistent replication factor between partitions, partition 0 has "
                                 f"{len(current[0])} while partitions {added} have replication factors "
                                 f"{[len(r) for r in replicas]}, respectively.")
            new = replicas
        else:
            live = self._live_racks()
            arranged = sorted(live)
            first = current[0][0]
            new = assign_replicas(live, len(added), len(current[0]), start_partition=len(current),
                                  start_index=arranged.index(first) if first in arranged else None)
        if not validate_only:
            try:
                self._client.set(topic_path(name), encode_assignment(topic_id or topic.topic_id, current + new,
                                                                     adding, removing), version=stat.version)
            except BadVersionError:
                raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                 f"The topic {name} changed while partitions were added; try again.") from None
        return added

    def request_elections(self, election_type: int, partitions: list[tuple[str, int]]) -> None:
        """/admin/elect_leaders/election_[seq] for the controller (odradek's own; the 2.x tools' single
        /admin/preferred_replica_election allows one request at a time and only preferred elections)."""
        self._client.create(f"{ELECT_LEADERS}/election_", encode_election(election_type, partitions), sequence=True,
                            makepath=True)

    def _write_reassignments(self, name: str, targets: dict[int, list[int] | None]) -> dict[int, KafkaError | None]:
        """The targets written into /brokers/topics/[topic] as replicas plus adding/removing (Kafka 2.4+'s layout,
        written conditionally on the version read, again if the controller wrote meanwhile); the controller moves
        the partitions from there."""
        while True:
            try:
                data, stat = self._client.get(topic_path(name))
            except NoNodeError:
                error = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
                return dict.fromkeys(targets, error)
            topic_id, replicas = decode_assignment(data)
            adding, removing = decode_reassignments(data)
            outcomes: dict[int, KafkaError | None] = {}
            for index, target in targets.items():
                try:
                    replicas[index], adding[index], removing[index] = reassigned(
                        replicas[index], adding.get(index, []), removing.get(index, []), target)
                    outcomes[index] = None
                except KafkaError as exc:
                    outcomes[index] = exc
            try:
                self._client.set(topic_path(name), encode_assignment(topic_id or self.topics[name].topic_id,
                                                                     replicas, adding, removing),
                                 version=stat.version)
            except BadVersionError:
                continue
            log.info("%s: reassigning %s", name, {index: target for index, target in targets.items()
                                                  if outcomes[index] is None})
            return outcomes

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        validate_topic_configs(configs)
        self._write_config(name, accepted_topic_configs(name, configs), notify=True)

    def _write_config(self, name: str, configs: dict[str, str], *, notify: bool) -> None:
        """/config/topics/[topic] (overrides only), and for a change a /config/changes notification, as Kafka."""
        path = f"{TOPIC_CONFIGS}/{name}"
        try:
            self._client.create(path, encode_topic_config(configs), makepath=True)
        except NodeExistsError:
            self._client.set(path, encode_topic_config(configs))
        if notify:
            self._client.create(change_path(CONFIG_CHANGES, CHANGE_PREFIX),
                                _json({"version": 2, "entity_path": f"topics/{name}"}), sequence=True)

    def allocate_producer_id_block(self, size: int) -> int:
        """The next block after /latest_producer_id_block, claimed by a conditional write (Kafka's
        ZkProducerIdManager), so no two brokers hand out the same producer id."""
        while True:
            try:
                data, stat = self._client.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = b"", None
            start = int(json.loads(data)["block_end"]) + 1 if data else 0
            body = _json({"version": 1, "broker": self.node_id, "block_start": str(start),
                          "block_end": str(start + size - 1)})
            try:
                if stat is None:
                    self._client.create(PRODUCER_ID_BLOCK, body, makepath=True)
                else:
                    self._client.set(PRODUCER_ID_BLOCK, body, version=stat.version)
                return start
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed one first
