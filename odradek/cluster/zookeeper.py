"""Cluster membership in ZooKeeper, in Kafka's own znode layout (docs/zookeeper-layout.md).

What this owns: the broker's ZooKeeper session, its ephemeral registration at /brokers/ids/[id], the cluster id at
/cluster/id, the controller election at /controller and /controller_epoch, the list of live brokers kept by a watch
on /brokers/ids, and the brokers in controlled shutdown (a watch on /admin/controlled_shutdown, which
odradek/cluster/controller.py documents). It is `odradek.cluster.membership`'s shape (connect, register,
live_brokers, shutting_down, in_session, controller_id, close), so handlers never see kazoo; the module is imported
only when zookeeper.connect is set.

The znode formats are plain functions (encode_*/decode_*) writing exactly what Kafka 3.x writes in ZooKeeper mode
(ZkData.scala: BrokerIdZNode version 5, ControllerZNode version 2, ControllerEpochZNode as a decimal, ClusterIdZNode
version 1), so Kafka's tools and ZooKeeper shells read our registry as a Kafka cluster's. kazoo calls its callbacks
on its own threads: the state they feed (live brokers, controller id) is replaced whole, never mutated, so the event
loop reads it without locks. kazoo reconnects by itself, to the same session while ZooKeeper still holds it (also
across a ZooKeeper restart); a session that expired (the broker paused, or cut off from a running ZooKeeper, for
longer than the timeout) is followed by a new one, and the broker registers again and takes part in the next
election. Tools that look inside (the CLI's `zk` and `brokers list --zookeeper`, the console's znode browser) open
`zookeeper_client`, a session that creates nothing, and read the registry with `read_cluster` and `in_order`.

The broker epoch is Kafka's: the czxid of a broker's /brokers/ids/[id] (`broker_epochs()`, and `broker_epoch` for
this broker's own), new at every registration. A broker killed and restarted within its old session's timeout
replaces its predecessor's node (one advertising the listeners the new process has bound: that process is dead) by
its own in one transaction, and deletes a /controller the predecessor held so that a live broker is elected at once,
and the predecessor's controlled shutdown request, which is not the new process's; its epoch changes while the list
of live brokers does not, and the controller takes it for a broker that failed and started again
(odradek/cluster/controller.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import AuthFailedError, BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from odradek.cluster.membership import BrokerEndpoint, ClusterInfo, ClusterMembershipError
from odradek.cluster.metadata import new_cluster_id
from odradek.cluster.zk_security import SecuredKazooClient, ZooKeeperSecurity
from odradek.config import Listener, host_port

log = logging.getLogger("odradek.zookeeper")

BROKER_IDS = "/brokers/ids"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
# Kafka's controller writes the finalized features here (FeatureZNode, version 2, status 1 = enabled); Odradek
# finalizes none, as its ApiVersions says
FEATURE = "/feature"
FEATURE_ZNODE = b'{"features":{},"version":2,"status":1}'
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"  # ephemeral [id] children: brokers stopping cleanly
# The persistent paths Kafka's brokers create at start (KafkaZkClient.createTopLevelPaths); the next steps (topics,
# partition state, config changes, deletion) write under them.
PERSISTENT_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes",
                    "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
                    "/admin/delete_topics", "/isr_change_notification", "/latest_producer_id_block",
                    "/log_dir_event_notification")
INITIAL_CONTROLLER_EPOCH = 0
BROKER_ZNODE_VERSION = 5


def split_connect_string(connect: str) -> tuple[str, str]:
    """zookeeper.connect -> (hosts, chroot): `h1:2181,h2:2181/kafka` -> ('h1:2181,h2:2181', '/kafka')."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no ZooKeeper server (expected HOST:PORT[/chroot])")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def encode_broker(endpoint: BrokerEndpoint, timestamp_ms: int, jmx_port: int = -1) -> bytes:
    """/brokers/ids/[id], as Kafka's BrokerIdZNode.encode writes version 5: every listener in endpoints
    (`NAME://host:port`) with its security protocol in listener_security_protocol_map; the legacy host and port
    are the PLAINTEXT listener's, or null and -1 without one (old clients cannot connect then)."""
    listeners = endpoint.listeners
    plaintext = next((entry for entry in listeners if entry.security_protocol == "PLAINTEXT"), None)
    body: dict[str, object] = {
        "features": {},
        "listener_security_protocol_map": {entry.name: entry.security_protocol for entry in listeners},
        "endpoints": [f"{entry.name}://{host_port(entry.host, entry.port)}" for entry in listeners],
        "jmx_port": jmx_port, "port": plaintext.port if plaintext else -1,
        "host": plaintext.host if plaintext else None,
        "version": BROKER_ZNODE_VERSION, "timestamp": str(timestamp_ms),
    }
    if endpoint.rack is not None:
        body["rack"] = endpoint.rack
    return json.dumps(body, separators=(",", ":")).encode()


def decode_broker(node_id: int, data: bytes) -> BrokerEndpoint:
    """A registration by any Kafka version: every endpoint (`NAME://host:port`, its protocol from
    listener_security_protocol_map, or the name itself before that map existed), else the legacy host and port as
    one PLAINTEXT listener."""
    body = json.loads(data)
    protocols = body.get("listener_security_protocol_map") or {}
    listeners = []
    for text in body.get("endpoints") or []:
        name, _, address = text.rpartition("://")
        host, _, port = address.rpartition(":")
        listeners.append(Listener(name, protocols.get(name, name), host.strip("[]"), int(port)))
    if not listeners:
        listeners.append(Listener("PLAINTEXT", "PLAINTEXT", body["host"], int(body["port"])))
    return BrokerEndpoint.of(node_id, body.get("rack"), tuple(listeners))


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """/controller as Kafka 3.x writes it in ZooKeeper mode (version 2; kraftControllerEpoch -1: no KRaft)."""
    return json.dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                       "kraftControllerEpoch": -1}, separators=(",", ":")).encode()


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_cluster_id(cluster_id: str) -> bytes:
    return json.dumps({"version": "1", "id": cluster_id}, separators=(",", ":")).encode()


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


def connect_client(connect: str, session_timeout_ms: int, connection_timeout_ms: int, *,
                   make_chroot: bool = True, security: ZooKeeperSecurity | None = None) -> KazooClient:
    """A started kazoo client inside zookeeper.connect's chroot, which a broker creates if absent (as Kafka does),
    authenticated and creating znodes with the ACLs `security` gives (odradek/cluster/zk_security.py)."""
    hosts, chroot = split_connect_string(connect)
    client = SecuredKazooClient(security or ZooKeeperSecurity(), hosts=hosts, timeout=session_timeout_ms / 1000,
                                connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1.0})
    try:
        client.start(timeout=connection_timeout_ms / 1000)
    except KazooTimeoutError:
        client.close()
        raise ClusterMembershipError(f"could not connect to ZooKeeper at {hosts} within "
                                     f"{connection_timeout_ms / 1000:g}s (zookeeper.connect={connect})") from None
    try:
        client.exists("/")  # kazoo reports a refused SASL login on the first request, not at start
    except AuthFailedError:
        client.stop()
        client.close()
        raise ClusterMembershipError(f"ZooKeeper at {hosts} refused SASL user {client.security.sasl_username!r} "
                                     "(the JAAS file's username and password)") from None
    if chroot:
        if make_chroot:
            client.ensure_path(chroot)
        client.chroot = chroot
    return client


@contextlib.contextmanager
def zookeeper_client(connect: str, timeout_s: float = 10.0, settings: dict[str, object] | None = None):
    """A kazoo client inside the chroot, logged in as `settings` and $KAFKA_OPTS say, closed at exit; the chroot
    is never created here."""
    client = connect_client(connect, 10_000, int(timeout_s * 1000), make_chroot=False,
                            security=ZooKeeperSecurity.from_config(settings or {}))
    try:
        yield client
    finally:
        client.stop()
        client.close()


def in_order(children: list[str]) -> list[str]:
    """Znode names sorted, numeric ones (broker ids, sequence numbers) by value and first."""
    return sorted(children, key=lambda name: (not name.isdigit(), int(name) if name.isdigit() else name))


def read_cluster(client: KazooClient) -> ClusterInfo:
    """The registry as Kafka's tools read it: cluster id, controller and registered brokers (for the CLI)."""
    def data_or_none(path: str) -> bytes | None:
        try:
            return client.get(path)[0]
        except NoNodeError:
            return None

    cluster_id, controller = data_or_none(CLUSTER_ID), data_or_none(CONTROLLER)
    brokers = []
    for child in sorted(client.get_children(BROKER_IDS) if client.exists(BROKER_IDS) else [], key=int):
        data = data_or_none(f"{BROKER_IDS}/{child}")
        if data is not None:
            brokers.append(decode_broker(int(child), data))
    return ClusterInfo(decode_cluster_id(cluster_id) if cluster_id else None,
                       decode_controller(controller) if controller else -1, brokers)


class ZooKeeperMembership:
    """One broker's membership of a ZooKeeper-coordinated cluster (see the module docstring)."""

    def __init__(self, connect: str, node_id: int, *, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, security: ZooKeeperSecurity | None = None):
        self.connect_string = connect
        self.security = security or ZooKeeperSecurity()
        self.node_id = node_id
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.controller_id: int = -1
        self.controller_epoch: int = -1
        self._brokers: tuple[BrokerEndpoint, ...] = ()
        self._epochs: dict[int, int] = {}
        self.broker_epoch: int = -1  # the czxid of this broker's registration
        self._shutting_down: frozenset[int] = frozenset()
        self._endpoint: BrokerEndpoint | None = None
        self._client: KazooClient | None = None
        self._session_lost = False
        self._closing = False
        self.listeners: list = []  # told (on kazoo's threads) after the live brokers or the controller changed

    @property
    def in_session(self) -> bool:
        """Connected to ZooKeeper in a live session: only then does this broker's view of who leads what follow the
        cluster (cut off past the session timeout, the controller moves its partitions without it knowing)."""
        return self._client is not None and self._client.state == KazooState.CONNECTED and not self._session_lost

    @property
    def client(self) -> KazooClient:
        """The session, for the ZooKeeper topic catalogue and the controller of this broker."""
        return self._client

    @property
    def is_controller(self) -> bool:
        return self.controller_id == self.node_id

    def live_brokers(self) -> tuple[BrokerEndpoint, ...]:
        return self._brokers

    def broker_epochs(self) -> dict[int, int]:
        """Each live broker's epoch: the czxid of its registration (see the module docstring)."""
        return self._epochs

    def shutting_down(self) -> frozenset[int]:
        """Live brokers in controlled shutdown: out of every ISR until they stop (the controller takes them out;
        a leader must not take them back, as Kafka's controller refuses them, KIP-841)."""
        return self._shutting_down

    # ------------------------------------------------------------------------------------------ joining
    def connect(self) -> str:
        """Open the session, create the top-level paths and return the cluster id (made here if first)."""
        self._client = connect_client(self.connect_string, self.session_timeout_ms, self.connection_timeout_ms,
                                      security=self.security)
        for path in PERSISTENT_PATHS:
            self._client.ensure_path(path)
        with contextlib.suppress(NodeExistsError):
            self._client.create(FEATURE, FEATURE_ZNODE)
        cluster_id = self._cluster_id()
        self._client.add_listener(self._on_session_state)
        return cluster_id

    def _cluster_id(self) -> str:
        try:
            return decode_cluster_id(self._client.get(CLUSTER_ID)[0])
        except NoNodeError:
            pass
        try:
            cluster_id = new_cluster_id()
            self._client.create(CLUSTER_ID, encode_cluster_id(cluster_id), makepath=True)
            log.info("created cluster id %s at %s", cluster_id, CLUSTER_ID)
            return cluster_id
        except NodeExistsError:  # another broker made it first
            return decode_cluster_id(self._client.get(CLUSTER_ID)[0])

    def register(self, endpoint: BrokerEndpoint) -> None:
        """Create /brokers/ids/[id], then follow the live brokers and the controller (electing one if none)."""
        self._endpoint = endpoint
        self._create_registration()
        ChildrenWatch(self._client, BROKER_IDS, self._on_broker_ids)
        DataWatch(self._client, CONTROLLER, self._on_controller)
        self._client.ensure_path(CONTROLLED_SHUTDOWN)
        self._drop_predecessor_shutdown()
        ChildrenWatch(self._client, CONTROLLED_SHUTDOWN, self._on_controlled_shutdown)

    def _drop_predecessor_shutdown(self) -> None:
        """A controlled shutdown asked by a killed predecessor (its node lives until that session times out) is
        deleted: it would keep this process out of every ISR meanwhile."""
        path = f"{CONTROLLED_SHUTDOWN}/{self.node_id}"
        try:
            stat = self._client.exists(path)
            if stat is not None and stat.ephemeralOwner != self._client.client_id[0]:
                self._client.delete(path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def _create_registration(self) -> None:
        """The ephemeral registration. A node that advertises the listeners this process has bound is its killed
        predecessor's, replaced at once; another broker's (or one whose listeners changed) disappears when that
        session times out, so an occupied id is waited on for one session timeout before it is refused."""
        path = f"{BROKER_IDS}/{self.node_id}"
        data = encode_broker(self._endpoint, int(time.time() * 1000))
        deadline = time.monotonic() + self.session_timeout_ms / 1000 + 2
        while True:
            try:
                self.broker_epoch = self._client.create(path, data, ephemeral=True, include_data=True)[1].czxid
                log.info("registered at %s as %s:%d", path, self._endpoint.host, self._endpoint.port)
                return
            except NodeExistsError:
                pass
            gone = threading.Event()
            try:
                holder, stat = self._client.get(path, watch=lambda event: gone.set())
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self._client.client_id[0]:
                self.broker_epoch = stat.czxid
                return  # ours: a create retried after a lost answer
            if decode_broker(self.node_id, holder).listeners == self._endpoint.listeners:
                if self._replace_registration(path, data, stat.version):
                    return
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                other = decode_broker(self.node_id, holder)
                raise ClusterMembershipError(
                    f"broker.id {self.node_id} is already registered in ZooKeeper at {path} by a live broker "
                    f"({other.host}:{other.port}, session 0x{stat.ephemeralOwner:x}); every broker needs its own "
                    "broker.id")

    def _replace_registration(self, path: str, data: bytes, version: int) -> bool:
        """The dead predecessor's registration replaced by ours in one transaction (Kafka's restarted broker does
        not wait for the old session either): the other brokers see the id stay registered, under a new broker
        epoch. False when the node changed meanwhile."""
        transaction = self._client.transaction()
        transaction.delete(path, version=version)
        transaction.create(path, data, ephemeral=True)
        if any(isinstance(result, Exception) for result in transaction.commit()):
            return False
        self.broker_epoch = self._client.get(path)[1].czxid
        log.info("registered at %s as %s:%d in place of this broker's previous process", path, self._endpoint.host,
                 self._endpoint.port)
        return True

    # ---------------------------------------------------------------------------------- following the cluster
    def _on_broker_ids(self, children: list[str]) -> None:
        brokers, epochs = [], {}
        for child in children:
            try:
                data, stat = self._client.retry(self._client.get, f"{BROKER_IDS}/{child}")
                brokers.append(decode_broker(int(child), data))
                epochs[int(child)] = stat.czxid
            except NoNodeError:
                continue  # gone since the list was read; the next watch event brings the new list
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable registration %s/%s: %s", BROKER_IDS, child, exc)
        before = {b.node_id for b in self._brokers}
        self._brokers, self._epochs = tuple(sorted(brokers, key=lambda b: b.node_id)), epochs
        after = {b.node_id for b in self._brokers}
        if self.is_controller and before != after:
            log.info("controller (epoch %d): live brokers now %s (joined %s, left %s)", self.controller_epoch,
                     sorted(after), sorted(after - before), sorted(before - after))
        self._tell_listeners()

    def _on_controlled_shutdown(self, children: list[str]) -> None:
        self._shutting_down = frozenset(int(child) for child in children if child.isdigit())

    def _tell_listeners(self) -> None:
        for listener in self.listeners:
            listener()

    def _on_controller(self, data: bytes | None, stat) -> None:
        """/controller changed: elect one if there is none (or it is this broker's dead predecessor's, deleted
        then), else learn who it is and its epoch. Interrupted by a lost connection, this runs again when kazoo
        reconnects (DataWatch reads the node again then)."""
        if self._closing:
            return
        try:
            if data is None:
                self._elect()
            elif decode_controller(data) == self.node_id and stat.ephemeralOwner != self._client.client_id[0]:
                self._client.delete(CONTROLLER, version=stat.version)  # a dead predecessor's: elect a live one
            else:
                self.controller_id = decode_controller(data)
                self.controller_epoch = int(self._client.get(CONTROLLER_EPOCH)[0])
                self._tell_listeners()
        except (NoNodeError, BadVersionError):
            pass  # /controller changed meanwhile: the watch brings the new one
        except KazooException as exc:
            log.warning("following the controller was interrupted (%r); resumed when reconnected", exc)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("unreadable %s (%s); waiting for it to change", CONTROLLER, exc)

    def _elect(self) -> None:
        """Kafka's election: create the ephemeral /controller and bump /controller_epoch in one transaction,
        conditional on the epoch's version, so exactly one broker wins each epoch."""
        try:
            epoch_data, epoch_stat = self._client.get(CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                self._client.create(CONTROLLER_EPOCH, str(INITIAL_CONTROLLER_EPOCH).encode())
            except NodeExistsError:
                pass
            epoch_data, epoch_stat = self._client.get(CONTROLLER_EPOCH)
        epoch = int(epoch_data) + 1
        transaction = self._client.transaction()
        transaction.create(CONTROLLER, encode_controller(self.node_id, int(time.time() * 1000)), ephemeral=True)
        transaction.set_data(CONTROLLER_EPOCH, str(epoch).encode(), version=epoch_stat.version)
        results = transaction.commit()
        if not any(isinstance(result, Exception) for result in results):
            log.info("elected controller, epoch %d; live brokers %s", epoch, [b.node_id for b in self._brokers])
        # won or lost, the watch on /controller brings the controller's id and epoch

    # ---------------------------------------------------------------------------------------- the session
    def _on_session_state(self, state: str) -> None:
        """Called on kazoo's connection thread, which must not block: re-registration runs on a thread of its own."""
        if self._closing:
            return  # our own close ends the session
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost; will register again on a new session")
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended; reconnecting")
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            threading.Thread(target=self._register_again, name="odradek-zk-rejoin", daemon=True).start()

    def _register_again(self) -> None:
        if self._endpoint is None:
            return  # not registered yet: register() will
        try:
            self._create_registration()
        except (ClusterMembershipError, KazooException) as exc:
            log.error("could not register again after the ZooKeeper session was lost: %s", exc)

    def close(self) -> None:
        """Close the session: ZooKeeper deletes the registration and (if ours) /controller at once."""
        self._closing = True
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None
        self._brokers, self._epochs = (), {}
