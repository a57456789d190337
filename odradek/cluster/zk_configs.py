"""Entity configs of a ZooKeeper cluster in Kafka's /config znodes: SCRAM credentials, client quotas and dynamic
broker configs, shared by every broker.

What this owns: the znodes Kafka's AdminZkClient writes for kafka-configs.sh --zookeeper (and ZkAdminManager for
AlterClientQuotas, AlterUserScramCredentials and AlterConfigs on a BROKER resource), each {"version":1,"config":{...}}
with string values:
  /config/users/<user>                  a user's SCRAM credentials ("SCRAM-SHA-256": "salt=..,stored_key=..,
                                        server_key=..,iterations=4096") and its quotas (producer_byte_rate, ...)
  /config/clients/<client-id>           a client id's quotas
  /config/users/<user>/clients/<id>     quotas of that user with that client id
  /config/brokers/<id>                  one broker's dynamic configs; /config/brokers/<default> the cluster default
A default user or client id is `<default>`; names are URL-encoded as Kafka's Sanitizer does. Every change is written
conditionally on the version read (a user's credentials and quotas share one znode, so neither write loses the
other's keys) and followed by a /config/changes/config_change_<n> notification {"version":2,"entity_path":
"users/alice"}; an entity whose config becomes empty keeps its znode with an empty config, as Kafka leaves it.

Every broker reads all of it at start and follows the notifications (odradek.cluster.zk_changes), re-reading the
entity named; topic notifications are the catalogue's own (odradek.cluster.zk_catalogue watches topic configs). The
views (`scram_credentials`, `client_quotas`, `broker_configs`, in ClusterMetadata's shapes) are rebuilt whole at
every change and handed to `on_change`, so the event loop reads them without locks.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.cluster.zk_changes import change_path, follow_changes
from odradek.security.quotas import CLIENT_ID, QUOTA_KEYS, REQUEST_PERCENTAGE, USER, Entity
from odradek.security.scram import MECHANISMS

log = logging.getLogger("odradek.zookeeper")

CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CHANGE_PREFIX = "config_change_"
DEFAULT_NAME = "<default>"
USERS, CLIENTS, BROKERS = "users", "clients", "brokers"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: Java's URLEncoder with '*' and ' ' percent-encoded."""
    return urllib.parse.quote(name, safe="-._").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote_plus(name)


def _segment(name: str | None) -> str:
    return DEFAULT_NAME if name is None else sanitize(name)


def _name(segment: str) -> str | None:
    return None if segment == DEFAULT_NAME else desanitize(segment)


def quota_entity_path(entity: Entity) -> str:
    """users/<user>, clients/<id> or users/<user>/clients/<id> (ConfigEntityName.Default: <default>)."""
    names = dict(entity)
    if USER in names and CLIENT_ID in names:
        return f"{USERS}/{_segment(names[USER])}/{CLIENTS}/{_segment(names[CLIENT_ID])}"
    if USER in names:
        return f"{USERS}/{_segment(names[USER])}"
    return f"{CLIENTS}/{_segment(names[CLIENT_ID])}"


def quota_entity_of(entity_path: str) -> Entity | None:
    """The quota entity of a config entity path; None for one that is not a user or client id."""
    parts = entity_path.split("/")
    if len(parts) == 2 and parts[0] == USERS:
        return ((USER, _name(parts[1])),)
    if len(parts) == 2 and parts[0] == CLIENTS:
        return ((CLIENT_ID, _name(parts[1])),)
    if len(parts) == 4 and parts[0] == USERS and parts[2] == CLIENTS:
        return tuple(sorted([(USER, _name(parts[1])), (CLIENT_ID, _name(parts[3]))]))
    return None


def user_entity_path(user: str) -> str:
    return f"{USERS}/{sanitize(user)}"


def broker_entity_path(resource_name: str) -> str:
    """brokers/<id>, or brokers/<default> for the cluster default (resource name "")."""
    return f"{BROKERS}/{resource_name or DEFAULT_NAME}"


def encode_config(configs: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": configs}, separators=(",", ":")).encode()


def decode_config(data: bytes | None) -> dict[str, str]:
    return {key: str(value) for key, value in json.loads(data)["config"].items()} if data else {}


def encode_quota(key: str, value: float) -> str:
    """As ZkAdminManager stores a quota: the byte rates (Kafka LONG) as whole numbers, request_percentage as a
    double."""
    return str(float(value)) if key == REQUEST_PERCENTAGE else str(int(value))


def decode_change(data: bytes) -> str:
    """The entity path of a /config/changes notification: version 2's entity_path, or version 1's type and name."""
    body = json.loads(data)
    if body.get("version") == 1:
        return f"{body['entity_type']}/{body['entity_name']}"
    return body["entity_path"]


class ZooKeeperConfigs:
    """Every broker's copy of the cluster's entity configs and the writes made through this broker (see the module
    docstring). `on_change(scram_credentials, client_quotas, broker_configs)` gets the rebuilt views."""

    def __init__(self, client, on_change: Callable[[dict, dict, dict], None]):
        self._client = client
        self._on_change = on_change
        self._lock = threading.RLock()
        self._configs: dict[str, dict[str, str]] = {}  # entity path -> its config, as stored

    def follow(self) -> None:
        with self._lock:
            for kind in (USERS, CLIENTS, BROKERS):
                self._client.ensure_path(f"{CONFIG}/{kind}")
                for name in self._client.get_children(f"{CONFIG}/{kind}"):
                    self._read(f"{kind}/{name}")
                    if kind == USERS:
                        for client_id in self._children(f"{CONFIG}/{USERS}/{name}/{CLIENTS}"):
                            self._read(f"{USERS}/{name}/{CLIENTS}/{client_id}")
            self._publish()
        follow_changes(self._client, CONFIG_CHANGES, CHANGE_PREFIX, lambda data: self._read(decode_change(data)),
                       self._publish, self._lock)

    def _children(self, path: str) -> list[str]:
        try:
            return self._client.get_children(path)
        except NoNodeError:
            return []

    def _read(self, entity_path: str) -> None:
        if not entity_path.startswith((f"{USERS}/", f"{CLIENTS}/", f"{BROKERS}/")):
            return  # topics/...: the catalogue follows topic configs itself
        try:
            data, _ = self._client.get(f"{CONFIG}/{entity_path}")
            configs = decode_config(data)
        except NoNodeError:
            configs = {}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable %s/%s: %s", CONFIG, entity_path, exc)
            return
        if configs:
            self._configs[entity_path] = configs
        else:
            self._configs.pop(entity_path, None)

    def _publish(self) -> None:
        scram: dict[str, dict[str, str]] = {}
        quotas: dict[Entity, dict[str, float]] = {}
        brokers: dict[str, dict[str, str]] = {}
        for entity_path, configs in self._configs.items():
            if entity_path.startswith(f"{BROKERS}/"):
                name = entity_path[len(BROKERS) + 1:]
                brokers["" if name == DEFAULT_NAME else name] = dict(configs)
                continue
            entity = quota_entity_of(entity_path)
            if entity is None:
                continue
            values = {key: float(value) for key, value in configs.items() if key in QUOTA_KEYS}
            if values:
                quotas[entity] = values
            credentials = {key: value for key, value in configs.items() if key in MECHANISMS}
            if credentials and len(entity) == 1 and entity[0][0] == USER and entity[0][1] is not None:
                scram[entity[0][1]] = credentials
        self._on_change(scram, quotas, brokers)

    def update(self, entity_path: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Apply `change` to the entity's stored config and write it conditionally on the version read (reading
        again if another writer came first), then the notification, as AdminZkClient.changeEntityConfig."""
        path = f"{CONFIG}/{entity_path}"
        while True:
            try:
                data, stat = self._client.get(path)
                current, version = decode_config(data), stat.version
            except NoNodeError:
                current, version = {}, None
            wanted = change(dict(current))
            try:
                if version is None:
                    self._client.create(path, encode_config(wanted), makepath=True)
                else:
                    self._client.set(path, encode_config(wanted), version=version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
        self._client.create(change_path(CONFIG_CHANGES, CHANGE_PREFIX),
                            json.dumps({"version": 2, "entity_path": entity_path}, separators=(",", ":")).encode(),
                            sequence=True)
        with self._lock:
            if wanted:
                self._configs[entity_path] = wanted
            else:
                self._configs.pop(entity_path, None)
            self._publish()
