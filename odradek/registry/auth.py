"""Who may call the registry, when its cluster connection uses SASL: HTTP basic auth against the cluster's own users
and Kafka's topic ACLs of each subject's topic, both asked of the cluster through a Kafka client logged in as the
caller (so the registry holds no user list or ACLs of its own, and any Kafka-compatible cluster decides).

- A user:password is checked by a SASL login with the registry's own mechanism and listener (a DescribeCluster as
  that user); a good pair is kept for CACHE_S, a bad one is a 401.
- The topic of a subject is its name without `-key` / `-value` (TopicNameStrategy); a subject of another strategy
  is its own topic name. Reading a subject needs DESCRIBE on that topic (READ, WRITE, ... imply it, as in Kafka);
  registering, deleting and setting its config or mode need WRITE. A topic that does not exist yet needs CREATE on
  the cluster to be written and DESCRIBE on the topic name to be read.
- Global config and mode changes need ALTER_CONFIGS on the cluster; global reads and reads by schema id need a
  login only (the id is what a record carries).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections.abc import Mapping

import confluent_kafka
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError, ConnectionFailures

CACHE_S = 30.0  # how long a login and the cluster's answers about a caller's rights are kept
POLL_S = 0.05
IMPLY_DESCRIBE = {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                  AclOperation.ALTER, AclOperation.ALL}


def topic_of(subject: str) -> str:
    name = subject.split(":", 2)[2] if subject.startswith(":.") and subject.count(":") >= 2 else subject
    for suffix in ("-key", "-value"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


class Caller:
    """A logged-in user: its own Kafka client, and what the cluster answered about its rights, for a while."""

    def __init__(self, name: str, admin: AdminClient, failures: ConnectionFailures, timeout: float):
        self.name = name
        self.admin = admin
        self.failures = failures
        self.timeout = timeout
        self._answers: dict[str, tuple[float, set | None]] = {}

    def answer(self, future):
        """The future's result, serving the client's error callback meanwhile: a refused login ends the wait."""
        deadline = time.monotonic() + self.timeout
        while not future.done():
            self.admin.poll(POLL_S)
            self.failures.check()
            if time.monotonic() >= deadline:
                raise ClientError(f"no answer from the cluster within {self.timeout:g}s")
        return future.result()

    def cluster_operations(self) -> set:
        return self._cached("", lambda: set(self.answer(self.admin.describe_cluster(
            include_authorized_operations=True, request_timeout=self.timeout)).authorized_operations or ()))

    def topic_operations(self, topic: str) -> set | None:
        """The caller's operations on the topic; None when the topic does not exist but may be described."""
        def ask():
            futures = self.admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                                 request_timeout=self.timeout)
            try:
                return set(self.answer(futures[topic]).authorized_operations or ())
            except confluent_kafka.KafkaException as exc:
                if exc.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART:
                    return None
                return set()
        return self._cached(topic, ask)

    def _cached(self, key: str, ask):
        now = time.monotonic()
        found = self._answers.get(key)
        if found is None or now - found[0] > CACHE_S:
            found = (now, ask())
            self._answers[key] = found
        return found[1]

    def may(self, subject: str | None, write: bool) -> bool:
        if subject is None:
            return not write or bool(self.cluster_operations() & {AclOperation.ALTER_CONFIGS, AclOperation.ALL})
        operations = self.topic_operations(topic_of(subject))
        if operations is None:  # no such topic, and the caller may know it
            return not write or bool(self.cluster_operations() & {AclOperation.CREATE, AclOperation.ALL})
        if write:
            return bool(operations & {AclOperation.WRITE, AclOperation.ALL})
        return bool(operations & IMPLY_DESCRIBE)


class Access:
    """The callers of one registry; `enabled` when its client config logs in with SASL."""

    def __init__(self, bootstrap_servers: str, client_config: Mapping[str, str], timeout: float = 15.0):
        self.bootstrap_servers = bootstrap_servers
        self.client_config = dict(client_config)
        self.timeout = timeout
        self.enabled = str(self.client_config.get("security.protocol", "")).upper().startswith("SASL")
        self._callers: dict[tuple[str, str], tuple[float, Caller]] = {}
        self._lock = threading.Lock()

    def login(self, authorization: str | None) -> Caller | None:
        """The caller of an `Authorization: Basic ...` header, None if it is missing or its login fails."""
        if not authorization or not authorization.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(authorization[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        key = (user, hashlib.sha256(password.encode()).hexdigest())
        with self._lock:
            found = self._callers.get(key)
            if found is not None and time.monotonic() - found[0] < CACHE_S:
                return found[1]
        failures = ConnectionFailures(self.bootstrap_servers)
        admin = AdminClient({**self.client_config, "bootstrap.servers": self.bootstrap_servers, "error_cb": failures,
                             "sasl.username": user, "sasl.password": password, "logger": LIBRDKAFKA_LOGGER})
        caller = Caller(user, admin, failures, self.timeout)
        try:
            caller.answer(admin.describe_cluster(request_timeout=self.timeout))
        except (ClientError, confluent_kafka.KafkaException):
            return None
        with self._lock:
            self._callers[key] = (time.monotonic(), caller)
        return caller
