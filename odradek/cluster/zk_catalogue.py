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

Kafka's controller pushes LeaderAndIsr/UpdateMetadata requests to brokers, batched; here every broker watches the
znodes instead, batched too: a watch that fires only marks its znode, and one reader thread reads every marked znode
with kazoo's async calls, all in flight at once (a new 2000-partition topic's states are one round trip, not 2000),
each read leaving its watch again (an exists watch for a znode not there yet, such as a state the controller has not
written). Handlers read `topics` / `topics_by_id`, which the reader replaces whole after each batch, never mutates,
so the event loop reads them without locks. Listeners are told after every batch that changed something (the broker
opens or drops partitions, the controller re-checks leadership). When the session ends kazoo drops every watch: the
reader reads everything again once connected.

A state znode names this broker leader only if it was written since this broker registered (its mzxid above this
broker's epoch, odradek.cluster.zookeeper): one written before, by a controller that did not know this broker
restarted, is published without a leader (Kafka's broker ignores a LeaderAndIsr of an older broker epoch), so a
restarted broker whose log lost its tail never leads on it; the controller's next write, which knows the new epoch,
decides (odradek/cluster/controller.py).

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
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import KeeperState, WatchedEvent

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
READ_RETRY_PAUSE_S = 0.5  # after a failed batch of reads (connection lost): the session's reconnection comes first


def topic_path(name: str) -> str:
    return f"{TOPICS}/{name}"


def state_path(name: str, index: int) -> str:
    return f"{TOPICS}/{name}/partitions/{index}/state"


def config_path(name: str) -> str:
    return f"{TOPIC_CONFIGS}/{name}"


def parse_catalogue_path(path: str) -> tuple[str | None, str | None, int | None]:
    """(kind, topic, partition) of a topic's znode: ("assignment", topic, None) for /brokers/topics/[topic],
    ("state", topic, n) for its partition n's state, ("config", topic, None) for /config/topics/[topic]; (None,
    None, None) for any other path."""
    if path.startswith(TOPIC_CONFIGS + "/") and "/" not in path[len(TOPIC_CONFIGS) + 1:]:
        return "config", path[len(TOPIC_CONFIGS) + 1:], None
    if path.startswith(TOPICS + "/"):
        parts = path[len(TOPICS) + 1:].split("/")
        if len(parts) == 1:
            return "assignment", parts[0], None
        if len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state" and parts[2].isdigit():
            return "state", parts[0], int(parts[2])
    return None, None, None


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
    """What the reads of one topic's znodes have found so far."""

    def __init__(self, name: str):
        self.name = name
        self.topic_id: uuid.UUID | None = None
        self.replicas: list[list[int]] | None = None
        self.adding: dict[int, list[int]] = {}  # partitions being reassigned (elections.py)
        self.removing: dict[int, list[int]] = {}
        self.configs: dict[str, str] = {}
        self.states: dict[int, tuple[PartitionState, int]] = {}  # index -> (state, znode version)
        self.state_watched: set[int] = set()  # partitions whose state znode is read and watched
        self.state_zxids: dict[int, int] = {}  # index -> the zxid of the state znode's last write (its mzxid)


class ZooKeeperCatalogue(ClusterMetadata):
    """The topic catalogue of a ZooKeeper cluster (see the module docstring)."""

    keeps_catalogue_files = False  # ZooKeeper keeps the topics and the security state

    def __init__(self, log_dir: Path, node_id: int):
        super().__init__(log_dir, node_id)
        self.membership = None
        self._client = None
        self._lock = threading.RLock()
        self._watches: dict[str, _TopicWatch] = {}
        self._pending: set[str] = set()  # znodes to read (again): their watch fired, or they are new
        self._pending_lock = threading.Lock()
        self._reread_all = False  # the session ended: every followed znode is to be read (and watched) again
        self._wake = threading.Event()
        self.listeners: list[Callable[[], None]] = []
        self._acl_store: ZooKeeperAcls | None = None
        self._published_epoch = -1  # the broker epoch the view's leaders were fenced with

    def follow(self, membership) -> None:
        """Read every topic and ACL now and follow them from then on (the topics on a reader thread of their own)."""
        self.membership = membership
        self._client = membership.client
        self.topics, self.topics_by_id = {}, {}  # ZooKeeper's, whatever the local file had
        self._client.add_listener(self._on_session_state)
        membership.listeners.append(self._on_membership)
        self._mark([TOPICS])
        self._read_pending()
        threading.Thread(target=self._read_changes, name="odradek-zk-catalogue", daemon=True).start()
        self._acl_store = ZooKeeperAcls(self._client, self._take_acls)
        self._acl_store.follow()
        self._config_store = ZooKeeperConfigs(self._client, self._take_configs)
        self._config_store.follow()

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

    def state_zxid(self, name: str, index: int) -> int | None:
        """The zxid of the partition's state znode's last write, as last read (to compare with broker epochs)."""
        watch = self._watches.get(name)
        return watch.state_zxids.get(index) if watch is not None else None

    def _on_membership(self) -> None:
        """This broker registered (again): the leaders it was fenced from are published anew."""
        if self.membership.broker_epoch != self._published_epoch:
            with self._lock:
                self._publish(set(self._watches))

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

    # ------------------------------------------------------------------------------------------ the reads
    def _on_watch(self, event: WatchedEvent) -> None:
        """A watch fired (on kazoo's thread): note its znode for the reader. An event without a path is kazoo's
        word that the session ended and every watch with it: every znode is read again once connected."""
        if event.path is None:  # one such event per watch: the reader lists the znodes once
            self._reread_all = True
            self._wake.set()
        else:
            self._mark([event.path])

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._wake.set()  # reads that failed while disconnected go again now

    def _mark(self, paths) -> None:
        with self._pending_lock:
            self._pending.update(paths)
        self._wake.set()

    def _followed_paths(self) -> list[str]:
        with self._lock:
            watches = list(self._watches.values())
        return [path for watch in watches for path in (
            topic_path(watch.name), config_path(watch.name),
            *(state_path(watch.name, index) for index in sorted(watch.state_watched)))]

    def _read_changes(self) -> None:
        """The reader thread: whatever the watches marked, read in batches, until the session is closed."""
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._client.client_state == KeeperState.CLOSED:
                return
            try:
                self._read_pending()
            except KazooException as exc:
                log.info("reading the catalogue's changes again after %s", exc)
                time.sleep(READ_RETRY_PAUSE_S)
            except Exception:  # a bug must not end the thread that keeps the view current
                log.exception("reading the catalogue's changes failed; trying again")
                time.sleep(READ_RETRY_PAUSE_S)

    def _read_pending(self) -> None:
        """Read every marked znode with all the requests in flight at once (kazoo's async calls, one round trip
        for the batch instead of one per znode), each leaving a watch, and publish the topics they changed, once
        per batch; again while there is more to read (a new topic's assignment brings its state znodes). A znode
        that does not exist yet (a state the controller has not written) gets an exists watch, so its creation is
        seen. On a lost connection the batch is marked again and KazooException raised: the caller retries."""
        while True:
            if self._reread_all:
                self._reread_all = False
                self._mark([TOPICS, *self._followed_paths()])
            with self._pending_lock:
                paths, self._pending = self._pending, set()
            with self._lock:
                paths = [path for path in paths if self._followed(path)]
            if not paths:
                return
            reads = [(path, self._client.get_children_async(path, watch=self._on_watch) if path == TOPICS
                      else self._client.get_async(path, watch=self._on_watch)) for path in paths]
            results: dict[str, object] = {}
            failure: KazooException | None = None
            for path, read in reads:
                try:
                    results[path] = read.get()
                except NoNodeError:
                    results[path] = None
                except KazooException as exc:
                    failure = exc
            missing = [(path, self._client.exists_async(path, watch=self._on_watch))
                       for path, result in results.items() if result is None]
            for path, check in missing:
                try:
                    if check.get() is not None:  # created since the read: read again in the next batch
                        del results[path]
                except KazooException as exc:
                    failure = exc
                    del results[path]
            self._mark(set(paths) - set(results))
            with self._lock:
                changed = set()
                for path, result in results.items():
                    changed.update(self._take(path, result))
                self._publish(changed)
            if failure is not None:
                raise failure

    def _followed(self, path: str) -> bool:
        """Whether the znode is one of a topic still listed (a deleted topic's late watches are not read)."""
        if path == TOPICS:
            return True
        kind, name, _ = parse_catalogue_path(path)
        return kind is not None and name in self._watches

    def _take(self, path: str, result) -> set[str]:
        """Apply one read znode (None: it does not exist) to the topics' watches; the topic names it changed. New
        topics and partitions mark their znodes for the next batch."""
        if path == TOPICS:
            return self._take_topics(result or [])
        kind, name, index = parse_catalogue_path(path)
        watch = self._watches.get(name)
        if watch is None:  # gone in this same batch
            return set()
        data, stat = result if result is not None else (None, None)
        try:
            if kind == "assignment":
                self._take_assignment(watch, data)
            elif kind == "config":
                watch.configs = decode_topic_config(data)
            elif data is None:
                watch.states.pop(index, None)
                watch.state_zxids.pop(index, None)
            else:
                watch.states[index] = (PartitionState.decode(data), stat.version)
                watch.state_zxids[index] = stat.mzxid
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
        return {name}

    def _take_topics(self, children: list[str]) -> set[str]:
        gone = set(self._watches) - set(children)
        for name in gone:
            del self._watches[name]
        born = set(children) - set(self._watches)
        for name in born:
            self._watches[name] = _TopicWatch(name)
        self._mark([path for name in born for path in (config_path(name), topic_path(name))])
        return gone

    def _take_assignment(self, watch: _TopicWatch, data: bytes | None) -> None:
        if data is None:  # being deleted
            watch.replicas = None
            return
        watch.topic_id, watch.replicas = decode_assignment(data)
        watch.adding, watch.removing = decode_reassignments(data)
        if watch.topic_id is None:
            watch.topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{watch.name}")
        new = [index for index in range(len(watch.replicas)) if index not in watch.state_watched]
        watch.state_watched.update(new)
        self._mark([state_path(watch.name, index) for index in new])

    def _publish(self, names: set[str]) -> None:
        """Replace the view's entries for `names` (a topic gone or half-read is not visible), then tell the
        listeners once."""
        if not names:
            return
        topics, by_id = dict(self.topics), dict(self.topics_by_id)
        epoch = self._published_epoch = self.membership.broker_epoch
        for name in names:
            old = topics.pop(name, None)
            if old is not None:
                by_id.pop(old.topic_id, None)
            watch = self._watches.get(name)
            if watch is None or watch.replicas is None or watch.topic_id is None:
                continue
            partitions = []
            for index, replicas in enumerate(watch.replicas):
                state = watch.states.get(index)
                leader, leader_epoch, isr = (state[0].leader, state[0].leader_epoch, state[0].isr) if state else (
                    NO_LEADER, 0, [])
                if leader == self.node_id and (epoch < 0 or watch.state_zxids[index] < epoch):
                    leader = NO_LEADER  # a state from before this broker registered (see the module docstring)
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
        path = config_path(name)
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
