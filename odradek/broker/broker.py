"""The broker: owns the cluster metadata, the partitions and their logs, and the server that answers clients.

Request handlers (odradek.broker.handlers) read and change broker state through this object only; it is the single
place that knows how a topic in the metadata becomes Partition objects over logs on disk. Periodic storage work
(retention, flush.ms, recovery-point checkpoints, removal of deleted segment files) runs as event-loop tasks here,
calling into the plain storage code, so storage keeps no timers of its own. The one exception is the log cleaner:
compaction is long, CPU-bound work, so it runs on its own threads (log.cleaner.threads), started and stopped here,
and meets the event loop only through the logs' copy-on-write segment lists.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from odradek.broker.periodic import every
from odradek.clock import now_ms
from odradek.cluster.metadata import ClusterMetadata, TopicMetadata
from odradek.cluster.partition import Partition
from odradek.config import (LogConfig, layered_broker_props, parse_listener, resolve_broker_config,
                            warn_about_unknown_broker_keys)
from odradek.errors import ErrorCode, KafkaError
from odradek.security.acl import RequestAuthorizer, make_authorizer
from odradek.security.quotas import ClientQuotas
from odradek.storage.cleaner import LogCleaner
from odradek.storage.log_manager import LogManager

log = logging.getLogger("odradek.broker")


class Broker:
    def __init__(self, props: Mapping[str, Any], *, host: str = "127.0.0.1", port: int = 9092):
        self.static_props = {k: str(v) for k, v in props.items()}
        warn_about_unknown_broker_keys(self.static_props)
        static_config = resolve_broker_config(self.static_props)
        self.node_id: int = static_config["node.id"]
        self.host = host
        self.port = port
        self.log_dir = Path(static_config["log.dirs"][0]).resolve()
        self.metadata = ClusterMetadata.load(self.log_dir, self.node_id)
        self.props = self._layered_props()  # the settings in force: static under the dynamic ones
        self.config = resolve_broker_config(self.props)
        self.logs = LogManager(self.log_dir, self.props, is_known=self._in_catalogue)
        self.cleaner = LogCleaner(self.logs, self.config)
        self.authorizer = make_authorizer(self.config, self.metadata.acls)
        self.quotas = ClientQuotas(self.metadata.client_quotas, self.config["quota.window.num"],
                                   self.config["quota.window.size.seconds"] * 1000)
        self.partitions: dict[tuple[str, int], Partition] = {}
        for topic in self.metadata.topics.values():
            self._open_partitions(topic)
        self.server = None
        self.metrics = None  # odradek.metrics.BrokerMetrics while serving, when metrics.port is set
        self._tasks: list[asyncio.Task] = []
        self.started_at_ms = now_ms()

    @property
    def advertised_host(self) -> str:
        return self._advertised()[0]

    @property
    def advertised_port(self) -> int:
        return self._advertised()[1]

    def _advertised(self) -> tuple[str, int]:
        """advertised.listeners if set, else the address we are bound to (0.0.0.0 is no address to hand out)."""
        advertised = self.config["advertised.listeners"]
        if advertised:
            return parse_listener(advertised)
        return ("127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host), self.port

    # ----------------------------------------------------------------------------------------------- topics
    def log_config(self, topic: TopicMetadata) -> LogConfig:
        return LogConfig.resolve(topic.configs, self.props)

    def _in_catalogue(self, partition: tuple[str, int]) -> bool:
        topic = self.metadata.topics.get(partition[0])
        return topic is not None and partition[1] < len(topic.partitions)

    def _open_partitions(self, topic: TopicMetadata, indexes=None) -> None:
        config = self.log_config(topic)
        for index in (range(len(topic.partitions)) if indexes is None else indexes):
            partition_log = self.logs.create(topic.name, index, config)
            self.partitions[(topic.name, index)] = Partition(
                topic.name, index, topic.topic_id, partition_log, topic.partitions[index], self.node_id)

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None, *, validate_only: bool = False) -> TopicMetadata:
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        topic = self.metadata.create_topic(name, num_partitions, replication_factor, dict(configs or {}),
                                           validate_only=validate_only)
        if not validate_only:
            self._open_partitions(topic)
            log.info("created topic %s with %d partition(s), id %s", name, num_partitions, topic.topic_id)
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        topic = self.metadata.delete_topic(name)
        for index in range(len(topic.partitions)):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake()
            self.logs.delete_partition(name, index)
        log.info("deleted topic %s", name)
        return topic

    def add_partitions(self, name: str, total_count: int, *, validate_only: bool = False) -> None:
        added = self.metadata.add_partitions(name, total_count, validate_only=validate_only)
        if not validate_only:
            self._open_partitions(self.metadata.topics[name], added)

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.metadata.set_topic_configs(name, dict(configs))
        self._reconfigure_logs(self.metadata.topics[name])

    def _reconfigure_logs(self, topic: TopicMetadata) -> None:
        config = self.log_config(topic)
        for index in range(len(topic.partitions)):
            self.partitions[(topic.name, index)].log.update_config(config)

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

    def alter_dynamic_configs(self, resource_name: str, configs: Mapping[str, str]) -> None:
        """Store a BROKER resource's new dynamic configs (validated by the caller) and apply them at once: every
        topic's log config is resolved again (a new log.retention.ms reaches the topics without an override) and
        the cleaner restarts under its new settings if they changed."""
        self.metadata.set_broker_configs(resource_name, dict(configs))
        self.props = self._layered_props()
        self.config = resolve_broker_config(self.props)
        self.logs.default_config = LogConfig.resolve(None, self.props)
        for topic in self.metadata.topics.values():
            self._reconfigure_logs(topic)
        self.cleaner.reconfigure(self.config)
        log.info("dynamic broker configs of %s are now %s", repr(resource_name), dict(configs))

    def partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return partition

    def access(self, connection) -> RequestAuthorizer:
        """What this connection's principal may do, asked per request (everything with no authorizer)."""
        return RequestAuthorizer(self.authorizer, connection)

    def auto_create_allowed(self) -> bool:
        return self.config["auto.create.topics.enable"]

    # ------------------------------------------------------------------------------------------- lifecycle
    async def start(self) -> tuple[str, int]:
        from odradek.broker.handlers import build_handlers
        from odradek.broker.network import NetworkServer
        from odradek.coordinator.coordinator import GroupCoordinator
        from odradek.coordinator.transaction_coordinator import TransactionCoordinator

        self.group_coordinator = GroupCoordinator(self)
        self.group_coordinator.start()  # loads __consumer_offsets in the background
        self.transaction_coordinator = TransactionCoordinator(self)
        self.transaction_coordinator.start()  # loads __transaction_state in the background
        handlers, unsupported_version_answer = build_handlers(self)
        self.server = NetworkServer(
            handlers,
            max_request_bytes=self.config["socket.request.max.bytes"],
            idle_ms=self.config["connections.max.idle.ms"],
            unsupported_version_answer=unsupported_version_answer,
        )
        self.host, self.port = self.server.bind(self.host, self.port)
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
            loop.create_task(every(self.config["log.retention.check.interval.ms"], self._expire_producers,
                                   "producer id expiration")),
        ]
        self.cleaner.start()
        return self.host, self.port

    def _retention(self, now: int) -> None:
        removed = self.logs.run_retention(now)
        if removed:
            log.info("retention removed %d segment(s)", removed)

    def _expire_producers(self, now: int) -> None:
        """producer.id.expiration.ms: partitions forget idle producers that have no open transaction."""
        expiration_ms = self.config["producer.id.expiration.ms"]
        for partition in list(self.partitions.values()):
            partition.log.producer_state.remove_expired(now, expiration_ms)

    async def stop(self) -> None:
        """Clean shutdown: stop serving, then flush and checkpoint every log and leave the clean-shutdown marker."""
        if self.server is not None:
            await self.server.close()
            await self.group_coordinator.stop()
            await self.transaction_coordinator.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.cleaner.stop()
        if self.metrics is not None:
            self.metrics.close()
        self.logs.close()
        log.info("broker %d stopped cleanly", self.node_id)
