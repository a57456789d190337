"""Serving the schema registry as every HTTP service is served (odradek.http_server: 127.0.0.1 by default; port 0
picks a free one, known before serving), in the foreground (`odradek schema-registry`) or in a daemon thread beside
a broker (`odradek serve --set schema.registry.port=...`). `start()` also starts the store: `_schemas` is created
if missing and read to its end before the URL is given; `start_thread()` gives the URL at once and catches up in
its thread before it serves.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from odradek.http_server import DEFAULT_HOST, HttpService
from odradek.registry.app import create_app
from odradek.registry.auth import Access
from odradek.registry.service import Registry
from odradek.registry.store import DEFAULT_GROUP, DEFAULT_TOPIC, KafkaStore

log = logging.getLogger("odradek.registry")
DEFAULT_PORT = 8081  # Confluent Schema Registry's


@dataclasses.dataclass
class SchemaRegistrySettings:
    bootstrap_servers: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    client_config: Mapping[str, str] = dataclasses.field(default_factory=dict)  # security.protocol, sasl.*, ssl.*
    topic: str = DEFAULT_TOPIC
    group_id: str = DEFAULT_GROUP  # the registries of one cluster that share `topic` and its writes
    timeout: float = 30.0


class SchemaRegistry(HttpService):
    """The registry's server (odradek.http_server), its URL without a trailing slash; the store reads its topic to
    the end before serving and closes its clients once served."""

    def __init__(self, settings: SchemaRegistrySettings):
        self.settings = settings
        self.store = KafkaStore(settings.bootstrap_servers, settings.client_config, topic=settings.topic,
                                group_id=settings.group_id, timeout=settings.timeout)
        access = Access(settings.bootstrap_servers, settings.client_config, settings.timeout)
        app = create_app(Registry(self.store), cluster_id=lambda: self.store.cluster_id, access=access)
        super().__init__(app, settings.host, settings.port, "schema registry", log, root="")

    def _starting(self) -> None:
        self.store.start()

    def _closed(self) -> None:
        self.store.stop()
