"""The broker: owns the cluster metadata, the partitions and their logs, and the server that answers clients.

Which brokers are live and which one is the controller is asked of `self.membership` (odradek.cluster.membership:
this broker alone, or ZooKeeper when zookeeper.connect is set); nothing else here knows which. The topic catalogue
(`self.metadata`) is the file of a single node, or with ZooKeeper the cluster's topics as its watches see them
(odradek.cluster.zk_catalogue) with a controller (odradek.cluster.controller) that elects leaders. A single node
opens a topic's partitions when the topic is created; a broker of a ZooKeeper cluster instead follows its catalogue
(`_follow_catalogue`, run on the event loop after every watched change): it opens the partitions it holds a replica
of, takes their leader and epoch, drops the logs of deleted topics and tells the coordinators which of their
partitions it now leads. Requests for a partition it does not lead get NOT_LEADER_OR_FOLLOWER.

Request handlers (odradek.broker.handlers) read and change broker state through this object only; it is the single
place that knows how a topic in the metadata becomes Partition objects over logs on disk. Periodic storage work
(retention, flush.ms, recovery-point checkpoints, removal of deleted segment files) runs as event-loop tasks here,
calling into the plain storage code, so storage keeps no timers of its own. The one exception is the log cleaner:
compaction is long, CPU-bound work, so it runs on its own threads (log.cleaner.threads), started and stopped here,
and meets the event loop only through the logs' copy-on-write segment lists.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from odradek.clock import now_ms
from odradek.cluster.membership import BrokerEndpoint, LocalMembership
from odradek.cluster.metadata import ClusterMetadata, TopicMetadata
from odradek.cluster.partition import Partition
from odradek.config import (Listener, LogConfig, layered_broker_props, parse_advertised_listeners, parse_listeners,
                            resolve_broker_config, warn_about_unknown_broker_keys)
from odradek.coordinator.offsets_topic import OFFSETS_TOPIC
from odradek.errors import ErrorCode, KafkaError
from odradek.periodic import every
from odradek.security.acl import UNRESTRICTED, RequestAuthorizer, make_authorizer, principal_of
from odradek.security.inter_broker import inter_broker_security
from odradek.security.quotas import ClientQuotas
from odradek.storage.cleaner import LogCleaner
from odradek.storage.log_manager import LogManager, lock_log_dir, unlock_log_dir

log = logging.getLogger("odradek.broker")
CONTROLLED_SHUTDOWN_POLL_S = 0.02  # how often a stopping broker checks whether leadership has moved
SHUTDOWN_DRAIN_S = 2.0  # the longest a stopping broker spends answering the requests it read before closing


class Broker:
    def __init__(self, props: Mapping[str, Any], *, host: str = "127.0.0.1", port: int = 9092):
        """Take every log directory's lock, bind every listener, then open the logs: a directory in use or a port in
        use fails here with nothing in the directories read or changed (the clean-shutdown marker stays). The logs
        live in the first of log.dirs; the others are locked as Kafka locks all of them."""
        from odradek.broker.network import ConnectionQuotas, listen

        self.static_props = {k: str(v) for k, v in props.items()}
        warn_about_unknown_broker_keys(self.static_props)
        static_config = resolve_broker_config(self.static_props)
        self._connection_quotas = ConnectionQuotas.from_config(static_config)
        self.node_id: int = static_config["node.id"]
        # every entry of `listeners`; the first one's address is the host and port given here (--host, --port)
        configured = parse_listeners(static_config["listeners"], static_config["listener.security.protocol.map"])
        self.listeners: list[Listener] = [dataclasses.replace(configured[0], host=host, port=port), *configured[1:]]
        self.log_dir = Path(static_config["log.dirs"][0]).resolve()
        self.membership = self._membership(static_config)  # connects only below, after the lock and the bind
        self.controller = None  # odradek.cluster.controller.Controller in a ZooKeeper cluster
        self.replica_fetchers = None  # odradek.broker.replica_fetcher.ReplicaFetchers in a ZooKeeper cluster
        self._dir_locks: list[int] = []
        self._sockets: list[socket.socket] = []  # one listening socket per listener, until the server takes them
        try:
            for directory in static_config["log.dirs"]:
                self._dir_locks.append(lock_log_dir(Path(directory).resolve()))
            for index, listener in enumerate(self.listeners):
                self._sockets.append(listen(listener.host, listener.port))
                bound_host, bound_port = self._sockets[-1].getsockname()[:2]
                self.listeners[index] = dataclasses.replace(listener, host=bound_host, port=bound_port)
            self.host, self.port = self.listeners[0].host, self.listeners[0].port
            self.metadata = self._catalogue(static_config)
            self.props = self._layered_props()  # the settings in force: static under the dynamic ones
            self.config = resolve_broker_config(self.props)
            self.inter_broker = None  # how this broker reaches the others in a cluster: checked at start
            if self.controller is not None:
                self.inter_broker = inter_broker_security(self.listeners, self.props)
                self.controller.unclean_default = LogConfig.resolve(None, self.props).unclean_leader_election_enable
            self.logs = LogManager(self.log_dir, self.props, is_known=self._in_catalogue)
            self.cleaner = LogCleaner(self.logs, self.config)
            self.authorizer = make_authorizer(self.config, lambda: self.metadata.acls)
            self.quotas = ClientQuotas(self.metadata, self.config["quota.window.num"],
                                       self.config["quota.window.size.seconds"] * 1000)
            self.partitions: dict[tuple[str, int], Partition] = {}
            for topic in self.metadata.topics.values():
                self._open_partitions(topic)
        except BaseException:
            self.membership.close()
            self._release()
            raise
        self._follow_scheduled = False
        self._catalogue_waiters: list[asyncio.Future] = []  # woken each time the broker has followed a change
        self._internal_topics_created: dict[str, asyncio.Task] = {}  # in a cluster: creations under way
        self._applied_topic_configs = {name: topic.configs for name, topic in self.metadata.topics.items()}
        self._applied_broker_configs = {name: dict(configs) for name, configs in self.metadata.broker_configs.items()}
        self.server = None
        self.stopping = False  # set by stop(): from then on a Fetch answers with what there is, without waiting
        self.metrics = None  # odradek.metrics.BrokerMetrics while serving, when metrics.port is set
        self._tasks: list[asyncio.Task] = []
        self.started_at_ms = now_ms()

    def advertised_address(self, listener: Listener) -> tuple[str, int]:
        """Where clients of a listener are told to connect (Metadata, DescribeCluster, FindCoordinator, the
        registration in ZooKeeper): its advertised.listeners entry if it has one, else the address it is bound to
        (0.0.0.0 is no address to hand out)."""
        advertised = parse_advertised_listeners(self.config["advertised.listeners"])
        if listener.name in advertised:
            return advertised[listener.name]
        return ("127.0.0.1" if listener.host in ("0.0.0.0", "::", "") else listener.host), listener.port

    def live_brokers_at(self, listener: Listener) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of every live broker for a client that came in on `listener`: this broker's
        advertised address for it, each other broker's endpoint registered under that listener name (one without
        such a listener is left out, as Kafka's Metadata leaves it out)."""
        brokers = []
        for endpoint in self.membership.live_brokers():
            address = self.advertised_address(listener) if endpoint.node_id == self.node_id \
                else endpoint.address(listener.name)
            if address is not None:
                brokers.append((endpoint.node_id, *address, endpoint.rack))
        return brokers

    def _membership(self, config: Mapping[str, Any]):
        """Who is in the cluster: ZooKeeper when zookeeper.connect is set (kazoo is imported only then), else this
        broker alone. Built from the static settings: none of these keys can change dynamically."""
        if not config["zookeeper.connect"]:
            return LocalMembership(self.node_id)
        from odradek.cluster.zk_security import ZooKeeperSecurity
        from odradek.cluster.zookeeper import ZooKeeperMembership

        return ZooKeeperMembership(config["zookeeper.connect"], self.node_id,
                                   session_timeout_ms=config["zookeeper.session.timeout.ms"],
                                   connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
                                   security=ZooKeeperSecurity.from_config(config))

    def _catalogue(self, config: Mapping[str, Any]) -> ClusterMetadata:
        """The catalogue file of a single node, or the cluster's topics in ZooKeeper, read in full before the logs
        are opened (so no partition of a topic the cluster has is taken for a stray)."""
        cluster_id = self.membership.connect()
        if not config["zookeeper.connect"]:
            return ClusterMetadata.load(self.log_dir, self.node_id, cluster_id)
        from odradek.cluster.controller import Controller
        from odradek.cluster.zk_catalogue import ZooKeeperCatalogue

        catalogue = ZooKeeperCatalogue.load(self.log_dir, self.node_id, cluster_id)
        catalogue.follow(self.membership)
        self.controller = Controller(self.membership, catalogue,
                                     auto_rebalance=config["auto.leader.rebalance.enable"],
                                     imbalance_check_interval_s=config["leader.imbalance.check.interval.seconds"],
                                     imbalance_percentage=config["leader.imbalance.per.broker.percentage"])
        return catalogue

    # ----------------------------------------------------------------------------------------------- topics
    def log_config(self, topic: TopicMetadata) -> LogConfig:
        return LogConfig.resolve(topic.configs, self.props)

    def _in_catalogue(self, partition: tuple[str, int]) -> bool:
        """Whether this broker holds a replica of the partition (on a single node: whether the topic has it)."""
        topic = self.metadata.topics.get(partition[0])
        return (topic is not None and partition[1] < len(topic.partitions)
                and self.node_id in topic.partitions[partition[1]].replicas)

    def _open_partitions(self, topic: TopicMetadata, indexes=None) -> None:
        config = self.log_config(topic)
        for index in (range(len(topic.partitions)) if indexes is None else indexes):
            if self.node_id not in topic.partitions[index].replicas:
                continue
            partition_log = self.logs.create(topic.name, index, config)
            self.partitions[(topic.name, index)] = Partition(
                topic.name, index, topic.topic_id, partition_log, topic.partitions[index], self.node_id,
                self.logs.checkpointed_high_watermarks.get((topic.name, index), 0))

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *, replicas: list[list[int]] | None = None,
                     validate_only: bool = False) -> TopicMetadata:
        """A new topic; `replicas`, if given, the brokers of each partition (checked by check_manual_assignment)."""
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        topic = self.metadata.create_topic(name, num_partitions, replication_factor, dict(configs or {}),
                                           replicas=replicas, validate_only=validate_only)
        if not validate_only and self.controller is None:
            self._open_partitions(topic)
            log.info("created topic %s with %d partition(s), id %s", name, num_partitions, topic.topic_id)
        return topic

    async def catalogue_write(self, change, *args, **kwargs):
        """Run `change` (a write of the catalogue, or a broker method that makes one) for a request. In a ZooKeeper
        cluster it runs on a worker thread: its kazoo calls are ZooKeeper round trips, and on the event loop every
        other connection would wait them out (a slow ZooKeeper would stall Produce and Fetch); such a change only
        writes znodes, the watches bring it back to the loop. On a single node it runs here: it changes the
        in-memory catalogue and opens or drops partitions, which belong to the loop."""
        if self.controller is None:
            return change(*args, **kwargs)
        return await asyncio.to_thread(change, *args, **kwargs)

    def ensure_internal_topic(self, name: str, num_partitions: int, configs: Mapping[str, str],
                              replication_factor_key: str) -> None:
        """Create a coordinator's topic on first use; in a cluster another broker may have just made it. In a
        ZooKeeper cluster it is replicated by `replication_factor_key` (offsets.topic.replication.factor...), and
        as Kafka, refused with COORDINATOR_NOT_AVAILABLE while fewer brokers are live; a single node has one and
        creates it here. In a cluster the creation is a catalogue write started here once, off the event loop
        (a ZooKeeper link that is slow or cut must not hold every connection), and the request that needed the
        topic is answered COORDINATOR_NOT_AVAILABLE, retriable, as Kafka's FindCoordinator answers while the topic
        is being made; the topic is there once the catalogue brings it back."""
        if name in self.metadata.topics:
            return
        if self.controller is None:
            self._create_internal_topic(name, num_partitions, 1, configs, replication_factor_key)
            return
        if name not in self._internal_topics_created:
            creation = asyncio.get_running_loop().create_task(self.catalogue_write(
                self._create_internal_topic, name, num_partitions, self.config[replication_factor_key], configs,
                replication_factor_key))
            self._internal_topics_created[name] = creation
            creation.add_done_callback(lambda done: self._internal_topic_created(name, done))
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"The internal topic {name} is being created.")

    def _create_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                               configs: Mapping[str, str], replication_factor_key: str) -> None:
        try:
            self.create_topic(name, num_partitions, replication_factor, configs)
        except KafkaError as exc:
            if exc.code == ErrorCode.INVALID_REPLICATION_FACTOR:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 f"{exc.message} The replication factor of {name} is {replication_factor_key}; "
                                 f"the topic is created once enough brokers are live.") from exc
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    def _internal_topic_created(self, name: str, creation: asyncio.Task) -> None:
        """The next request that needs the topic tries again if this creation failed."""
        del self._internal_topics_created[name]
        failure = None if creation.cancelled() else creation.exception()
        if isinstance(failure, KafkaError) and failure.code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
            log.info("%s not created yet: %s", name, failure.message)  # too few brokers live
        elif failure is not None:
            log.warning("creating %s failed: %r", name, failure)

    def delete_topic(self, name: str) -> TopicMetadata:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        topic = self.metadata.delete_topic(name)
        if self.controller is not None:
            return topic  # the controller deletes it; _follow_catalogue drops the logs
        for index in range(len(topic.partitions)):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake()
            self.logs.delete_partition(name, index)
        log.info("deleted topic %s", name)
        return topic

    def add_partitions(self, name: str, total_count: int, *, replicas: list[list[int]] | None = None,
                       validate_only: bool = False) -> None:
        added = self.metadata.add_partitions(name, total_count, replicas=replicas, validate_only=validate_only)
        if not validate_only and self.controller is None:
            self._open_partitions(self.metadata.topics[name], added)

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.metadata.set_topic_configs(name, dict(configs))
        if self.controller is None:
            self._reconfigure_logs(self.metadata.topics[name])

    def _reconfigure_logs(self, topic: TopicMetadata) -> None:
        config = self.log_config(topic)
        self._applied_topic_configs[topic.name] = topic.configs
        for index in range(len(topic.partitions)):
            partition = self.partitions.get((topic.name, index))
            if partition is not None:
                partition.log.update_config(config)

    def _catalogue_changed(self, loop: asyncio.AbstractEventLoop) -> None:
        """A watch saw a change (on kazoo's thread): follow it on the event loop, once for a burst of changes."""
        if not self._follow_scheduled:
            self._follow_scheduled = True
            loop.call_soon_threadsafe(self._follow_catalogue)

    def _follow_catalogue(self) -> None:
        """Make this broker's partitions what the cluster's catalogue says (see the module docstring)."""
        self._follow_scheduled = False
        topics = self.metadata.topics
        for key, partition in list(self.partitions.items()):
            topic = topics.get(key[0])
            if topic is None or topic.topic_id != partition.topic_id or not self._in_catalogue(key):
                del self.partitions[key]
                partition.wake()
                self.logs.delete_partition(*key)
                log.info("dropped %s-%d: its topic was deleted or moved away", *key)
        if self.metadata.broker_configs != self._applied_broker_configs:
            self._apply_dynamic_configs()
            log.info("dynamic broker configs changed in the cluster: now %s", self._applied_broker_configs)
        for name in set(self._applied_topic_configs) - set(topics):
            del self._applied_topic_configs[name]
        for topic in topics.values():
            opened = [index for index in range(len(topic.partitions)) if (topic.name, index) not in self.partitions]
            self._open_partitions(topic, opened)
            for index, assignment in enumerate(topic.partitions):
                partition = self.partitions.get((topic.name, index))
                if partition is not None:
                    partition.update_assignment(assignment, now_ms())
            if self._applied_topic_configs.get(topic.name) != topic.configs:
                self._reconfigure_logs(topic)
        self.replica_fetchers.follow()
        self.group_coordinator.follow_leadership()
        self.transaction_coordinator.follow_leadership()
        waiters, self._catalogue_waiters = self._catalogue_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def catalogue_settled(self, done: Callable[[], bool], timeout_ms: int) -> None:
        """Return once `done()` holds, checked each time this broker has followed a change of the cluster's
        catalogue, or after timeout_ms (for requests that answer when their change is in force: what is still
        pending then, the caller answers REQUEST_TIMED_OUT, as Kafka does)."""
        try:
            async with asyncio.timeout(max(timeout_ms, 0) / 1000):
                while not done():
                    waiter = asyncio.get_running_loop().create_future()
                    self._catalogue_waiters.append(waiter)
                    await waiter
        except TimeoutError:
            pass

    # ------------------------------------------------------------------------------------ dynamic broker configs
    def dynamic_configs(self, resource_name: str) -> dict[str, str]:
        """The dynamic configs of the cluster default ("") or of this broker (its id as text)."""
        return self.metadata.broker_configs.get(resource_name, {})

    def _layered_props(self, resource_name: str | None = None, configs: Mapping[str, str] | None = None
                       ) -> dict[str, str]:
        """The settings in force, or those that would be if `resource_name` had `configs` as its dynamic ones."""
        layers = {"": self.dynamic_configs(""), str(self.node_id): self.dynamic_configs(str(self.node_id))}
        if resource_name is not None:
            layers[resource_name] = dict(configs)
        return layered_broker_props(self.static_props, layers[""], layers[str(self.node_id)])

    def check_dynamic_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Kafka's reconfiguration checks of what these dynamic configs would put in force: KafkaError
        (INVALID_REQUEST, as Kafka answers a ConfigException here) if they cannot apply."""
        would_be = resolve_broker_config(self._layered_props(resource_name, configs))
        refusal = self.cleaner.reconfiguration_refusal(would_be)
        if refusal is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, refusal)

    async def alter_dynamic_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Store a BROKER resource's new dynamic configs (validated by the caller) and apply them at once."""
        await self.catalogue_write(self.metadata.set_broker_configs, resource_name, dict(configs))
        self._apply_dynamic_configs()
        log.info("dynamic broker configs of %s are now %s", repr(resource_name), dict(configs))

    def _apply_dynamic_configs(self) -> None:
        """Put the catalogue's dynamic broker configs in force (after a change here, or in a ZooKeeper cluster one
        made through another broker): every topic's log config is resolved again (a new log.retention.ms reaches
        the topics without an override) and the cleaner restarts under its new settings if they changed."""
        self._applied_broker_configs = {name: dict(configs) for name, configs in self.metadata.broker_configs.items()}
        self.props = self._layered_props()
        self.config = resolve_broker_config(self.props)
        self.logs.default_config = LogConfig.resolve(None, self.props)
        for topic in self.metadata.topics.values():
            self._reconfigure_logs(topic)
        self.cleaner.reconfigure(self.config)

    def partition(self, topic: str, index: int) -> Partition:
        """The partition this broker leads; NOT_LEADER_OR_FOLLOWER when the cluster has it elsewhere."""
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            if self.has_partition(topic, index):
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 "For requests intended only for the leader, this error indicates that the broker "
                                 "is not the current leader.")
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return partition

    def leadership_coming(self, topic: str, index: int) -> Partition | None:
        """This broker's replica of a partition that may be about to lead it: the leader in this broker's view is
        gone (not registered, or none) or stopping cleanly, and this broker is in the ISR, registered and staying,
        so the controller is electing a leader from the ISR and may pick it. A client that sends here meanwhile most
        likely heard of that election from a broker whose view moved first. None otherwise."""
        partition = self.partitions.get((topic, index))
        if partition is None or partition.is_leader or self.stopping or not self.membership.in_session:
            return None
        assignment = partition.assignment
        live = {endpoint.node_id for endpoint in self.membership.live_brokers()}
        shutting_down = self.membership.shutting_down()
        if self.node_id not in assignment.isr or self.node_id not in live or self.node_id in shutting_down:
            return None
        leader = assignment.leader
        return partition if leader not in live or leader in shutting_down else None

    def access(self, connection) -> RequestAuthorizer:
        """What this connection's principal may do, asked per request (everything with no authorizer)."""
        if self.authorizer is None:
            return UNRESTRICTED
        return RequestAuthorizer(self.authorizer, principal_of(connection), connection.ip)

    def write_transaction_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int, commit: bool,
                                 coordinator_epoch: int) -> None:
        """A transaction's COMMIT or ABORT marker on a partition this broker leads, from its own transaction
        coordinator or another broker's (WriteTxnMarkers); on __consumer_offsets it also settles the offsets the
        transaction committed."""
        self.partition(topic, index).write_transaction_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        if topic == OFFSETS_TOPIC:
            self.group_coordinator.complete_transaction(index, producer_id, commit)

    def check_coordinator_partition(self, topic: str, index: int) -> None:
        """For a coordinator's topic: NOT_COORDINATOR unless this broker leads the partition, and
        COORDINATOR_LOAD_IN_PROGRESS while the catalogue names it leader but it has not taken the partition up yet
        (a client sent here by another broker's fresher view retries rather than looks elsewhere). Out of its
        ZooKeeper session a broker cannot know whether it still leads (the controller moves its partitions once the
        session expires, without telling it): COORDINATOR_NOT_AVAILABLE, so that the client looks the coordinator
        up again rather than be answered from state another broker may own by now."""
        if not self.leads(topic, index):
            known = self.metadata.topics.get(topic)
            named = known is not None and index < len(known.partitions) and \
                known.partitions[index].leader == self.node_id
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if named else ErrorCode.NOT_COORDINATOR)
        if not self.membership.in_session:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             f"Cut off from ZooKeeper: another broker may lead {topic}-{index} by now.")

    def has_partition(self, topic: str, index: int) -> bool:
        """Whether the cluster has this partition, wherever it is led."""
        known = self.metadata.topics.get(topic)
        return known is not None and 0 <= index < len(known.partitions)

    def leads(self, topic: str, index: int) -> bool:
        partition = self.partitions.get((topic, index))
        return partition is not None and partition.is_leader

    def auto_create_allowed(self) -> bool:
        return self.config["auto.create.topics.enable"]

    # ------------------------------------------------------------------------------------------- lifecycle
    async def start(self) -> tuple[str, int]:
        """Serve; a start that fails part way (the metrics port is taken) stops what it started, so the logs are
        closed and the log directory's lock is given back (an embedded broker may be started again)."""
        try:
            return await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> tuple[str, int]:
        from odradek.broker.handlers import build_handlers
        from odradek.broker.network import NetworkServer
        from odradek.coordinator.coordinator import GroupCoordinator
        from odradek.coordinator.share_coordinator import ShareCoordinator
        from odradek.coordinator.transaction_coordinator import TransactionCoordinator

        self.group_coordinator = GroupCoordinator(self)
        self.group_coordinator.start()  # loads __consumer_offsets in the background
        self.transaction_coordinator = TransactionCoordinator(self)
        self.transaction_coordinator.start()  # loads __transaction_state in the background
        self.share_coordinator = ShareCoordinator(self)
        handlers, unsupported_version_answer = build_handlers(self)
        self.server = NetworkServer(
            handlers,
            max_request_bytes=self.config["socket.request.max.bytes"],
            max_unauthenticated_bytes=self.config["sasl.server.max.receive.size"],
            idle_ms=self.config["connections.max.idle.ms"],
            unsupported_version_answer=unsupported_version_answer,
            quotas=self._connection_quotas,
            deferred_writes=self.logs.deferred_writes,
        )
        for listener, server_socket in zip(self.listeners, self._sockets):
            self.server.accept_on(server_socket, listener, *self._listener_security(listener))
            log.info("listening on %s://%s:%d (%s)", listener.name, listener.host, listener.port,
                     listener.security_protocol)
        self._sockets = []  # the server owns them now
        advertised = tuple(dataclasses.replace(listener, host=host, port=port) for listener in self.listeners
                           for host, port in [self.advertised_address(listener)])
        await asyncio.to_thread(self.membership.register,
                                BrokerEndpoint.of(self.node_id, self.config["broker.rack"] or None, advertised))
        if self.controller is not None:
            from odradek.broker.replica_fetcher import ReplicaFetchers

            self.replica_fetchers = ReplicaFetchers(self)
            loop = asyncio.get_running_loop()
            self.metadata.listeners.append(lambda: self._catalogue_changed(loop))
            self._follow_catalogue()
            self.controller.start()
        if self.config["metrics.port"]:
            from odradek.metrics import BrokerMetrics

            self.metrics = BrokerMetrics(self, self.config["metrics.port"])
            self.server.observe_request = self.metrics.observe_request
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.server.serve()),
            loop.create_task(every(self.config["log.retention.check.interval.ms"], self._retention, "retention")),
            loop.create_task(every(min(self.config["log.flush.scheduler.interval.ms"], 3_600_000),
                                   self.logs.flush_due, "flush.ms check")),
            loop.create_task(every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                   lambda now: self.logs.checkpoint(), "recovery point checkpoint")),
            loop.create_task(every(self.config["replica.high.watermark.checkpoint.interval.ms"],
                                   lambda now: self.checkpoint_high_watermarks(), "high watermark checkpoint")),
            loop.create_task(every(self.config["log.retention.check.interval.ms"], self._expire_producers,
                                   "producer id expiration")),
        ]
        if self.controller is not None:
            from odradek.broker.replica_fetcher import ISR_CHECK_INTERVAL_MS

            self._tasks.append(loop.create_task(every(ISR_CHECK_INTERVAL_MS, self.replica_fetchers.check_isr,
                                                      "ISR check")))
        self.cleaner.start()
        return self.host, self.port

    def _listener_security(self, listener: Listener) -> tuple:
        """(TLS context or None, SASL session factory or None) of one listener, from its settings."""
        from odradek.security.sasl import SaslSession, enabled_mechanisms, plain_users
        from odradek.security.tls import server_context

        tls_context = server_context(listener, self.props) if listener.uses_tls else None
        if not listener.uses_sasl:
            return tls_context, None
        mechanisms, users = enabled_mechanisms(listener, self.props), plain_users(listener, self.props)
        lifetime_ms = int(listener.setting(self.props, "connections.max.reauth.ms", 0))
        return tls_context, lambda: SaslSession(mechanisms, users, self.metadata.scram_credential, lifetime_ms)

    def checkpoint_high_watermarks(self) -> None:
        """replication-offset-checkpoint: every partition's high watermark (Kafka's checkpointHighWatermarks)."""
        self.logs.checkpoint_high_watermarks({key: partition.high_watermark
                                              for key, partition in list(self.partitions.items())})

    def _retention(self, now: int) -> None:
        removed = self.logs.run_retention(now)
        if removed:
            log.info("retention removed %d segment(s)", removed)

    def _expire_producers(self, now: int) -> None:
        """producer.id.expiration.ms: partitions forget idle producers that have no open transaction."""
        expiration_ms = self.config["producer.id.expiration.ms"]
        for partition in list(self.partitions.values()):
            partition.log.producer_state.remove_expired(now, expiration_ms)

    async def _controlled_shutdown(self) -> None:
        """controlled.shutdown.enable in a cluster: ask the controller to move leadership away
        (odradek/cluster/controller.py) and wait, up to controlled.shutdown.max.retries x retry.backoff.ms, until
        this broker leads no partition that another live in-sync replica could lead."""
        from odradek.cluster.controller import request_controlled_shutdown

        started = time.monotonic()
        await asyncio.to_thread(request_controlled_shutdown, self.membership.client, self.node_id)
        deadline = started + self.config["controlled.shutdown.max.retries"] * \
            self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        while True:
            live = {broker.node_id for broker in self.membership.live_brokers()} - {self.node_id}
            remaining = [key for key, partition in self.partitions.items()
                         if partition.is_leader and live.intersection(partition.assignment.isr)]
            if not remaining or time.monotonic() >= deadline:
                break
            await asyncio.sleep(CONTROLLED_SHUTDOWN_POLL_S)
        log.info("controlled shutdown: leadership moved in %.0f ms%s", (time.monotonic() - started) * 1000,
                 f"; still leading {remaining}" if remaining else "")

    async def stop(self) -> None:
        """Clean shutdown: move leadership away (controlled shutdown); close the ZooKeeper session (its ephemeral
        znodes go: another broker takes over as controller at once, and no leader takes this broker back into an
        ISR, where only registered brokers may join); stop accepting and reading requests and answer those already
        read, for up to SHUTDOWN_DRAIN_S (a fetch parked in a long poll at once, with what there is:
        NOT_LEADER_OR_FOLLOWER for the partitions led elsewhere now), then close the connections, as Kafka's
        request handlers drain what is queued before its sockets close; then stop the coordinators and the replica
        fetchers; then flush and checkpoint every log and leave the clean-shutdown marker."""
        if self.controller is not None and self.server is not None and self.config["controlled.shutdown.enable"]:
            try:
                await self._controlled_shutdown()
            except Exception as exc:  # ZooKeeper unreachable: stop anyway, as Kafka does after its retries
                log.warning("controlled shutdown failed (%r); stopping anyway", exc)
        if self.controller is not None:
            self.controller.close()
        self.membership.close()  # first, so that another broker takes over as controller at once
        if self.server is not None:
            self._answer_long_polls()
            await self.server.close(drain_seconds=SHUTDOWN_DRAIN_S)
            await self.group_coordinator.stop()
            await self.transaction_coordinator.stop()
            self.share_coordinator.stop()
        if self.replica_fetchers is not None:
            await self.replica_fetchers.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.cleaner.stop()
        if self.metrics is not None:
            self.metrics.close()
        self.checkpoint_high_watermarks()
        self.logs.close()
        self._release()
        log.info("broker %d stopped cleanly", self.node_id)

    def _answer_long_polls(self) -> None:
        """A stopping broker waits for no more appends: every fetch parked in a long poll is woken to answer now
        (see handlers/fetch.py), as are those that arrive later, so neither a consumer's nor a follower's poll (up
        to replica.fetch.wait.max.ms) holds the stop up or ends in a dropped connection at the drain's bound."""
        self.stopping = True
        for partition in list(self.partitions.values()):
            partition.wake()

    def _release(self) -> None:
        """Close the listening sockets no server took over and give the log directories' locks back."""
        while self._sockets:
            self._sockets.pop().close()
        while self._dir_locks:
            unlock_log_dir(self._dir_locks.pop())
