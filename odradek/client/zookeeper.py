"""The client's ZooKeeper side (the design's seeds 002 and 004): consumers of a group coordinating through ZooKeeper.

What this owns: the consumer znodes (`/consumers/[group]/ids/[consumer_id]`, `.../owners/[topic]/[partition]`,
`.../offsets/[topic]/[partition]`), the seed's rebalancing algorithm as a plain function (`range_assignment`),
`ZooKeeperClusterView`, the brokers and topics a producer or a SimpleConsumer follows by watches (seed 002's
zk.connect), and `ZooKeeperGroupMember`, which registers one consumer, watches the group's consumers, the brokers,
the topics and the partitions of those it subscribes to, and on every change runs the algorithm, releases the
partitions it gives up and claims its new ones. It reads brokers and topics with the broker side's own decoders
(odradek.cluster.zookeeper, odradek.cluster.zk_catalogue), never copies.

Fetching stays with librdkafka (the connector assigns it the owned partitions), so this module only decides who
reads what and where the offsets live. kazoo calls watches on its own threads; they only wake the member's rebalance
thread, so rebalances run one at a time, in order, and a burst of changes costs one rebalance. A new session (the
old one expired, taking the registration and owner nodes with it) registers again before its first rebalance.
Imported only when a client is given zk.connect / zookeeper.connect.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from odradek.cluster.membership import BrokerEndpoint
from odradek.cluster.zk_catalogue import TOPICS, PartitionState, decode_assignment, state_path, topic_path
from odradek.cluster.zk_security import ZooKeeperSecurity
from odradek.cluster.zookeeper import BROKER_IDS, connect_client, decode_broker
from odradek.config import host_port

log = logging.getLogger("odradek.client.zookeeper")

CONSUMERS = "/consumers"
SESSION_TIMEOUT_MS = 6000  # zookeeper.session.timeout.ms of Kafka's old consumer
CONNECTION_TIMEOUT_MS = 6000
CLAIM_RETRY_S = 0.1
PATTERNS = ("static", "white_list", "black_list")  # the registration's "pattern", as Kafka's TopicCount writes it

Partition = tuple[str, int]


def new_consumer_id() -> str:
    """The seed's consumer id: hostname:uuid."""
    return f"{socket.gethostname()}:{uuid.uuid4()}"


def ids_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def owner_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def encode_registration(subscription: dict[str, int], pattern: str, timestamp_ms: int) -> bytes:
    """/consumers/[group]/ids/[consumer_id]: {topic or regex: streams}, and how to read it (static, white_list,
    black_list), as Kafka's ZookeeperConsumerConnector writes it (version 1)."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, not {pattern!r}")
    return json.dumps({"version": 1, "subscription": subscription, "pattern": pattern,
                       "timestamp": str(timestamp_ms)}, separators=(",", ":")).encode()


@dataclasses.dataclass(frozen=True)
class Registration:
    subscription: dict[str, int]
    pattern: str

    @classmethod
    def decode(cls, data: bytes) -> "Registration":
        body = json.loads(data)
        return cls({str(key): int(count) for key, count in body["subscription"].items()}, body["pattern"])

    def wants(self, topic: str) -> bool:
        """Whether this consumer subscribes to `topic` (filters never take internal `__` topics)."""
        if self.pattern == "static":
            return topic in self.subscription
        if topic.startswith("__"):
            return False
        matched = any(re.fullmatch(regex, topic) for regex in self.subscription)
        return matched if self.pattern == "white_list" else not matched


def range_assignment(partitions: Iterable[int], consumers: Iterable[str], consumer: str) -> list[int]:
    """The seed's algorithm for one topic: sort the partitions and the consumers; consumer i of C takes the range
    i*N .. (i+1)*N-1 with N = P // C, the first P % C consumers one more each (so every partition has one owner)."""
    ordered_partitions, ordered_consumers = sorted(partitions), sorted(consumers)
    if consumer not in ordered_consumers:
        return []
    index = ordered_consumers.index(consumer)
    per_consumer, extra = divmod(len(ordered_partitions), len(ordered_consumers))
    start = index * per_consumer + min(index, extra)
    return ordered_partitions[start:start + per_consumer + (1 if index < extra else 0)]


def read_offset(client: KazooClient, group: str, topic: str, partition: int) -> int | None:
    try:
        return int(client.get(offset_path(group, topic, partition))[0])
    except NoNodeError:
        return None


def write_offset(client: KazooClient, group: str, topic: str, partition: int, offset: int) -> None:
    """The persistent offset node, a decimal as Kafka writes it."""
    path, data = offset_path(group, topic, partition), str(offset).encode()
    try:
        client.set(path, data)
    except NoNodeError:
        try:
            client.create(path, data, makepath=True)
        except NodeExistsError:
            client.set(path, data)


def partition_counts(client: KazooClient, topics: Iterable[str]) -> dict[str, int]:
    """Partitions per topic from /brokers/topics/[topic]; a topic being deleted meanwhile is left out."""
    counts = {}
    for topic in topics:
        try:
            counts[topic] = len(decode_assignment(client.get(topic_path(topic))[0])[1])
        except NoNodeError:
            continue
    return counts


def registered_brokers(client: KazooClient, ids: Iterable[str] | None = None) -> dict[int, BrokerEndpoint]:
    """The brokers registered at /brokers/ids (those of `ids` when the children were just read by a watch)."""
    brokers = {}
    for child in (client.get_children(BROKER_IDS) if ids is None else ids):
        try:
            brokers[int(child)] = decode_broker(int(child), client.get(f"{BROKER_IDS}/{child}")[0])
        except NoNodeError:
            continue
    return brokers


def bootstrap_servers(client: KazooClient) -> str:
    """host:port of every registered broker, for librdkafka's bootstrap list."""
    return ",".join(host_port(b.host, b.port) for _, b in sorted(registered_brokers(client).items()))


class ZooKeeperClusterView:
    """Seed 002's broker discovery: the live brokers (a watch on /brokers/ids) and the partition count of each
    topic asked about (a watch on /brokers/topics/[topic], so added partitions are seen). `on_brokers_changed`
    callbacks run on kazoo's thread after each change of the live brokers."""

    def __init__(self, client: KazooClient):
        self.client = client
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.on_brokers_changed: list[Callable[[dict[int, BrokerEndpoint]], None]] = []
        self._partition_counts: dict[str, int | None] = {}
        self._lock = threading.Lock()
        ChildrenWatch(client, BROKER_IDS, self._on_broker_ids)

    def _on_broker_ids(self, children: list[str]) -> None:
        self.brokers = registered_brokers(self.client, children)
        for callback in self.on_brokers_changed:
            callback(self.brokers)

    def partition_count(self, topic: str) -> int | None:
        """Partitions of `topic` as ZooKeeper has them now; None if it has no such topic (yet)."""
        with self._lock:
            if topic not in self._partition_counts:
                self._partition_counts[topic] = None
                DataWatch(self.client, topic_path(topic), lambda data, stat: self._on_topic(topic, data))
        return self._partition_counts[topic]

    def _on_topic(self, topic: str, data: bytes | None) -> None:
        self._partition_counts[topic] = len(decode_assignment(data)[1]) if data else None

    def leader(self, topic: str, partition: int) -> BrokerEndpoint | None:
        """The partition's leader by its state znode (None while it has none or is not registered)."""
        try:
            leader = PartitionState.decode(self.client.get(state_path(topic, partition))[0]).leader
        except NoNodeError:
            return None
        return self.brokers.get(leader)


class ZooKeeperGroupMember:
    """One consumer of a group (see the module docstring). `release(partitions)` is called before their owner
    nodes are deleted (commit there what was consumed) and `acquire(partitions)` after the new ones are claimed;
    both run on the member's rebalance thread. A failed acquire is called again by the next rebalance; a failed
    release is not (the partitions' next owner reads them again from their last commit)."""

    def __init__(self, client: KazooClient, group: str, registration: Registration, *,
                 release: Callable[[set[Partition]], None], acquire: Callable[[set[Partition]], None],
                 consumer_id: str | None = None, settled: threading.Event | None = None):
        self.client = client
        self.group = group
        self.registration = registration
        self.consumer_id = consumer_id or new_consumer_id()
        self._release = release
        self._acquire = acquire
        self.owned: frozenset[Partition] = frozenset()  # those whose owner nodes this consumer holds
        self._acquired: frozenset[Partition] = frozenset()  # of those, the ones `acquire` took
        self.rebalances = 0  # completed, for callers waiting on the group to settle
        self.settled = settled or threading.Event()  # set after each completed rebalance
        self._changed = threading.Event()
        self._stopping = threading.Event()
        self._registered_in: tuple[int, bytes] | None = None  # the session (kazoo's client_id) of the registration
        self._watched_topics: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="odradek-zk-rebalance", daemon=True)

    def start(self) -> None:
        """The seed's registration: register the id, watch consumers, brokers and (for filters) topics, rebalance."""
        self._register()
        for path in (ids_path(self.group), BROKER_IDS, TOPICS):
            ChildrenWatch(self.client, path, self._on_change)
        self.client.add_listener(self._on_session_state)
        self._thread.start()

    def _register(self) -> None:
        session = self.client.client_id  # read first: a session renewed meanwhile registers once more
        self.client.ensure_path(ids_path(self.group))
        try:
            self.client.create(f"{ids_path(self.group)}/{self.consumer_id}",
                               encode_registration(self.registration.subscription, self.registration.pattern,
                                                   int(time.time() * 1000)), ephemeral=True)
        except NodeExistsError:  # ours: a create retried after a lost answer
            pass
        self._registered_in = session

    def _on_session_state(self, state: str) -> None:
        """On kazoo's connection thread (must not block): a connection is up again, maybe in a new session, so
        wake the rebalance thread (it waits while disconnected, and registers again first in a new session)."""
        if state == KazooState.CONNECTED:
            self._changed.set()

    def _on_change(self, children) -> bool:
        self._changed.set()
        return not self._stopping.is_set()  # False ends the watch

    def _run(self) -> None:
        while not self._stopping.is_set():
            if not self._changed.wait(0.2):
                continue
            self._changed.clear()
            session = self.client.client_id
            if session is None:  # disconnected: _on_session_state wakes us when connected again
                continue
            try:
                if session != self._registered_in:
                    self._rejoin()
                if self._rebalance():
                    self.rebalances += 1
                    self.settled.set()
            except Exception as exc:  # a lost connection, a node gone mid-read: try again shortly
                if isinstance(exc, KazooException):  # ZooKeeper's doing, expected: one line, no traceback
                    log.warning("rebalance of group %s failed (%s: %s); retrying", self.group,
                                type(exc).__name__, exc)
                else:
                    log.exception("rebalance of group %s failed; retrying", self.group)
                self._stopping.wait(CLAIM_RETRY_S)
                self._changed.set()

    def _rejoin(self) -> None:
        """In a new session: give up what the old one owned (others may own it now), register again."""
        log.warning("consumer %s of group %s: ZooKeeper session expired; registering again", self.consumer_id,
                    self.group)
        self._give_up(set(self.owned))
        self._register()

    def wanted(self) -> set[Partition]:
        """This consumer's share by the seed's algorithm, from the group's registrations and the topics now."""
        registrations: dict[str, Registration] = {}
        for child in self.client.get_children(ids_path(self.group)):
            try:
                registrations[child] = Registration.decode(self.client.get(f"{ids_path(self.group)}/{child}")[0])
            except NoNodeError:
                continue
        topics = sorted(topic for topic in self.client.get_children(TOPICS) if self.registration.wants(topic))
        for topic in set(topics) - self._watched_topics:  # partitions added to a subscribed topic rebalance too
            self._watched_topics.add(topic)
            DataWatch(self.client, topic_path(topic), lambda data, stat: self._on_change(data))
        share: set[Partition] = set()
        for topic, count in partition_counts(self.client, topics).items():
            consumers = [cid for cid, registration in registrations.items() if registration.wants(topic)]
            share.update((topic, index) for index in range_assignment(range(count), consumers, self.consumer_id))
        return share

    def _rebalance(self) -> bool:
        """Release what leaves this consumer, then claim what comes, retrying while a previous owner still holds
        a partition. A newer change interrupts the claiming (False): the next run starts from the new view."""
        wanted = self.wanted()
        self._give_up(set(self.owned) - wanted)
        claiming = wanted - set(self.owned)
        claimed: set[Partition] = set()
        while claiming - claimed:
            for topic, index in sorted(claiming - claimed):
                if self._claim(topic, index):
                    claimed.add((topic, index))
            if claiming - claimed:
                if self._changed.is_set() or self._stopping.wait(CLAIM_RETRY_S):
                    break
        self.owned = frozenset(self.owned | claimed)
        acquiring = set(self.owned - self._acquired)  # claimed now, or by an earlier run whose acquire failed
        if acquiring:
            self._acquire(acquiring)
            self._acquired = self._acquired | acquiring
        log.info("consumer %s of group %s owns %d partition(s)", self.consumer_id, self.group, len(self.owned))
        return not (claiming - claimed)

    def _give_up(self, partitions: set[Partition]) -> None:
        """Release what `acquire` took of them (once, even if the release fails), then delete their owner nodes
        that are still this consumer's (after an expired session others may have claimed them)."""
        releasing = partitions & self._acquired
        self._acquired = self._acquired - partitions
        if releasing:
            self._release(releasing)
        for topic, index in sorted(partitions):
            path = owner_path(self.group, topic, index)
            try:
                if self.client.get(path)[0].decode() == self.consumer_id:
                    self.client.delete(path)
            except NoNodeError:
                pass
        self.owned = self.owned - partitions

    def _claim(self, topic: str, index: int) -> bool:
        path = owner_path(self.group, topic, index)
        try:
            self.client.create(path, self.consumer_id.encode(), ephemeral=True, makepath=True)
            return True
        except NodeExistsError:
            try:
                return self.client.get(path)[0].decode() == self.consumer_id
            except NoNodeError:
                return False

    def stop(self) -> None:
        """Stop rebalancing (the caller commits, then closes the session: ZooKeeper drops ids and owners)."""
        self._stopping.set()
        self._changed.set()
        if self._thread.is_alive():
            self._thread.join()


def connect(connect_string: str, settings: Mapping[str, Any] | None = None) -> KazooClient:
    """A session inside zookeeper.connect's chroot (a client never creates the chroot: brokers do), logged in as
    a broker would be: `settings` are the brokers' ZooKeeper security settings (zookeeper.set.acl,
    zookeeper.ssl.*, java.security.auth.login.config); without them the JAAS file is the one
    -Djava.security.auth.login.config in $KAFKA_OPTS names, as Kafka's own ZooKeeper clients find it."""
    return connect_client(connect_string, SESSION_TIMEOUT_MS, CONNECTION_TIMEOUT_MS, make_chroot=False,
                          security=ZooKeeperSecurity.from_config(settings or {}))


def owners(client: KazooClient, group: str, topics: Sequence[str]) -> dict[Partition, str]:
    """Who owns each partition of these topics in the group (for tools and tests)."""
    found = {}
    for topic in topics:
        try:
            children = client.get_children(f"{CONSUMERS}/{group}/owners/{topic}")
        except NoNodeError:
            continue
        for child in children:
            try:
                found[(topic, int(child))] = client.get(owner_path(group, topic, int(child)))[0].decode()
            except NoNodeError:
                continue
    return found
