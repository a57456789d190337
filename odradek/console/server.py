"""Serving the console as every HTTP service is served (odradek.http_server: 127.0.0.1 by default; port 0 picks a
free one, known before serving), either in the foreground (`odradek console`) or in a daemon thread beside a broker
(`odradek serve --set console.port=...`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from collections.abc import Mapping

from odradek.console.app import create_app
from odradek.console.cluster import DEFAULT_READ_GROUP, ClusterView
from odradek.console.rates import LAG_GROUPS, LagHistory, LagSampler, MetricsSampler
from odradek.console.schemas import SchemaView
from odradek.http_server import DEFAULT_HOST, HttpService

log = logging.getLogger("odradek.console")


@dataclasses.dataclass
class ConsoleSettings:
    bootstrap_servers: str
    host: str = DEFAULT_HOST
    port: int = 8080
    client_config: Mapping[str, str] = dataclasses.field(default_factory=dict)  # security.protocol, sasl.*, ssl.*
    zookeeper: str | None = None  # cluster mode: the ZooKeeper page reads it
    metrics_urls: list[str] = dataclasses.field(default_factory=list)  # the brokers' /metrics, for rates
    metrics_interval: float = 5.0
    lag_interval: float = 5.0  # how often the groups' lag is read for their charts
    timeout: float = 15.0
    read_group: str = DEFAULT_READ_GROUP  # the group.id records are read with (assign only; READ on it with ACLs)
    schema_registry_url: str | None = None  # the Schemas pages' registry (Confluent's REST API)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class Console(HttpService):
    """The console's server (odradek.http_server), its samplers of the brokers' metrics and the groups' lag started
    before it serves and stopped, with its clients, once it has served."""

    def __init__(self, settings: ConsoleSettings):
        self.settings = settings
        self.view = ClusterView(settings.bootstrap_servers, settings.client_config, settings.zookeeper,
                                settings.timeout, settings.read_group)
        self.sampler = MetricsSampler(settings.metrics_urls, settings.metrics_interval)
        self.lag_sampler = LagSampler(lambda: [(row.group_id, row.lag) for row in
                                               self.view.group_rows(self.view.admin.list_groups()[:LAG_GROUPS])],
                                      LagHistory(), settings.lag_interval)
        schemas = SchemaView(settings.schema_registry_url) if settings.schema_registry_url else None
        app = create_app(self.view, self.sampler, loopback_only=_loopback(settings.host),
                         lag_history=self.lag_sampler.history, schemas=schemas)
        super().__init__(app, settings.host, settings.port, "console", log)

    def _starting(self) -> None:
        self.sampler.start()
        self.lag_sampler.start()

    def _closed(self) -> None:
        self.sampler.stop()
        self.lag_sampler.stop()
        self.view.close()
