"""The Kafka clients the proxy acts through, one set per principal: an Admin (metadata, topics, configs, groups,
ACLs) and a Producer, built from the proxy's client settings plus, with basic auth, the request's user name and
password as sasl.username / sasl.password, so the broker authenticates that user and its ACLs apply to what the
request does.

The sets are kept in a bounded LRU (`max_principals`): the least recently used is closed when another principal
comes. A principal's first request proves its credentials with one Metadata request; a refused login is a 401 and
is not cached. Topics' partition counts are cached a few seconds per set, so a produce request costs no Metadata.
"""

from __future__ import annotations

import collections
import hashlib
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future

from odradek.client import Admin, ClientError, Producer
from odradek.restproxy.errors import topic_not_found

PARTITIONS_TTL_S = 5.0
REFRESHED_ERRORS = frozenset({"TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"})


def failed(error: ClientError) -> Future:
    future: Future = Future()
    future.set_exception(error)
    return future


class PrincipalClients:
    def __init__(self, bootstrap_servers: str, config: Mapping[str, str], timeout: float):
        self.config = dict(config)
        self.admin = Admin(bootstrap_servers, timeout, self.config)
        self.admin.list_topics()  # proves the credentials: a refused login raises here, at once
        # a record's delivery is waited for as long as Kafka's delivery.timeout.ms default, not librdkafka's 5 minutes
        self.producer = Producer(bootstrap_servers, config={"message.timeout.ms": 120_000, **self.config})
        self._partitions: dict[str, tuple[int, float]] = {}

    def partition_count(self, topic: str) -> int:
        """The topic's partitions (cached PARTITIONS_TTL_S); 40401 if there is no such topic."""
        cached = self._partitions.get(topic)
        if cached is not None and time.monotonic() - cached[1] < PARTITIONS_TTL_S:
            return cached[0]
        count = self.admin.partition_count(topic)
        if count is None:
            raise topic_not_found(topic)
        self._partitions[topic] = (count, time.monotonic())
        return count

    def send(self, topic: str, value: bytes | None, key: bytes | None, partition: int,
             headers: list | None = None, timestamp_ms: int | None = None) -> Future:
        """The record queued: a future of its RecordMetadata, failing with the ClientError of a refused record.
        A send librdkafka refuses at once for the topic's error it keeps (an authorization refused before the
        principal's ACLs changed) is tried again after fresh metadata."""
        def send() -> Future:
            return self.producer.send(topic, value, key, partition=partition, headers=headers,
                                      timestamp_ms=timestamp_ms)

        try:
            return send()
        except ClientError as exc:
            if exc.name not in REFRESHED_ERRORS:
                return failed(exc)
        self.producer.refresh_metadata(topic)
        try:
            return send()
        except ClientError as exc:
            return failed(exc)

    def forget(self, topic: str) -> None:
        self._partitions.pop(topic, None)

    def close(self) -> None:
        self.producer.close(5)


class ClientPool:
    """PrincipalClients by principal (None: the proxy's own settings, no basic auth)."""

    def __init__(self, bootstrap_servers: str, config: Mapping[str, str], timeout: float, max_principals: int = 32):
        self.bootstrap_servers = bootstrap_servers
        self.config = dict(config)
        self.timeout = timeout
        self.max_principals = max_principals
        self._sets: collections.OrderedDict[tuple, PrincipalClients] = collections.OrderedDict()
        self._lock = threading.Lock()

    def config_of(self, credentials: tuple[str, str] | None) -> dict[str, str]:
        """The librdkafka settings of a principal's clients, bootstrap.servers with them."""
        config = {**self.config, "bootstrap.servers": self.bootstrap_servers}
        if credentials is None:
            return config
        return {**config, "sasl.username": credentials[0], "sasl.password": credentials[1]}

    def get(self, credentials: tuple[str, str] | None) -> PrincipalClients:
        """The principal's clients (made on first use; blocking: call it from a worker thread)."""
        key = credentials and (credentials[0], hashlib.sha256(credentials[1].encode()).digest())
        with self._lock:
            clients = self._sets.get(key)
            if clients is not None:
                self._sets.move_to_end(key)
                return clients
        clients = PrincipalClients(self.bootstrap_servers, self.config_of(credentials), self.timeout)
        with self._lock:
            existing = self._sets.get(key)
            if existing is None:
                self._sets[key] = clients
        if existing is not None:  # another request of the principal made them meanwhile
            clients.close()
            return existing
        with self._lock:
            evicted = self._sets.popitem(last=False)[1] if len(self._sets) > self.max_principals else None
        if evicted is not None:
            evicted.close()
        return clients

    def close(self) -> None:
        with self._lock:
            sets, self._sets = list(self._sets.values()), collections.OrderedDict()
        for clients in sets:
            clients.close()
