"""The `_schemas` topic through Kafka clients: a reader thread that applies the topic, from its start, to the
registry's State, and a writer whose every write is a Kafka transaction of one transactional.id shared by all the
registries of a cluster (`<group id>-writer`).

The shared transactional.id is what keeps ids from colliding when several registries write: a registry's writer
starts with InitProducerId, which fences the writer of any other registry, then commits a NOOP record and waits
until its reader has applied it, so that it has seen everything committed before it took over. A write computed
on that state commits only if no other registry has taken over since; if one has, the commit fails as fenced and
the write starts again (a new writer, caught up, recomputes). The reader reads committed records only, so a write
that lost never shows. A registry that reads `_schemas` uncommitted (Confluent's, Karapace) sees a losing write too,
until compaction removes it; ours never write at the same time as another kind.

A new writer (at start, or after it was fenced) bootstraps from the given servers and the brokers the last writer
knew, so that it finds the cluster when the given broker has stopped. Two registries starting at once fence each
other's first writer; each starts again, as a write does.

The topic is created on start when missing: compacted, one partition, replication factor min(3, brokers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

import confluent_kafka

from odradek.client import Admin, ClientError
from odradek.client.errors import LIBRDKAFKA_LOGGER
from odradek.config import host_port
from odradek.registry.state import NOOP_KEY, State, encode

log = logging.getLogger("odradek.registry")
DEFAULT_TOPIC = "_schemas"
DEFAULT_GROUP = "schema-registry"
WRITE_ATTEMPTS = 5


class StoreError(Exception):
    """The cluster did not take or give back a write in time (Confluent's 50001/50002)."""


class KafkaStore:
    def __init__(self, bootstrap_servers: str, client_config: Mapping[str, str] | None = None, *,
                 topic: str = DEFAULT_TOPIC, group_id: str = DEFAULT_GROUP, timeout: float = 30.0):
        self.bootstrap_servers = bootstrap_servers
        self.client_config = dict(client_config or {})
        self.topic = topic
        self.group_id = group_id
        self.timeout = timeout
        self.state = State()
        self.lock = threading.RLock()  # guards state; held by readers of it and by the applying thread
        self._applied = threading.Condition(self.lock)
        self._position = 0  # the next offset the reader will apply
        self._write_lock = threading.Lock()
        self._producer: confluent_kafka.Producer | None = None
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._failure: str | None = None
        self.cluster_id = ""  # the Kafka cluster's id, known once started
        self._known = [server.strip() for server in bootstrap_servers.split(",") if server.strip()]
        self._given = len(self._known)  # the given servers first, then the brokers the last writer learnt of

    def _config(self) -> dict:
        return {**self.client_config, "bootstrap.servers": self.bootstrap_servers, "logger": LIBRDKAFKA_LOGGER}

    def start(self) -> None:
        """Creates the topic if missing, starts reading it and catches up (a first writer's NOOP)."""
        self._ensure_topic()
        consumer = confluent_kafka.Consumer({**self._config(), "group.id": self.group_id,
                                             "enable.auto.commit": False, "isolation.level": "read_committed",
                                             "fetch.wait.max.ms": 50, "enable.partition.eof": False})
        consumer.assign([confluent_kafka.TopicPartition(self.topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        self._reader = threading.Thread(target=self._read, args=(consumer,), name="odradek-registry-reader",
                                        daemon=True)
        self._reader.start()
        with self._write_lock:
            self._writer()

    def _ensure_topic(self) -> None:
        admin = Admin(self.bootstrap_servers, timeout=self.timeout, config=self.client_config)
        cluster = admin.describe_cluster()
        self.cluster_id = cluster.cluster_id or ""
        if admin.partition_count(self.topic) is not None:
            return
        try:
            admin.create_topic(self.topic, 1, min(3, max(len(cluster.brokers), 1)), {"cleanup.policy": "compact"})
        except ClientError as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                raise

    def _read(self, consumer: confluent_kafka.Consumer) -> None:
        try:
            while not self._stop.is_set():
                first = consumer.poll(0.2)  # consume(n, timeout) would wait out its timeout for n records
                if first is None:
                    continue
                records = [first] + consumer.consume(499, 0)
                with self.lock:
                    for record in records:
                        if record.error() is not None:
                            if record.error().fatal():
                                self._failure = record.error().str()
                            continue
                        self.state.apply(record.key(), record.value())
                        self._position = record.offset() + 1
                    self._applied.notify_all()
        finally:
            consumer.close()

    def wait_applied(self, offset: int) -> None:
        """Until the reader has applied the record at `offset`."""
        deadline = time.monotonic() + self.timeout
        with self._applied:
            while self._position <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreError(f"the registry's reader did not reach offset {offset} of {self.topic} in "
                                     f"{self.timeout:g} s{': ' + self._failure if self._failure else ''}")
                self._applied.wait(left)

    # ---- writes ----

    def _bootstrap(self) -> str:
        """The servers a new writer starts from: those given and the brokers the last writer knew, so that a writer
        made after its bootstrap broker stopped (a failover, a fenced writer made anew) still finds the cluster."""
        return ",".join(dict.fromkeys(self._known))

    def _learn_brokers(self, producer: confluent_kafka.Producer) -> None:
        try:
            brokers = producer.list_topics(self.topic, timeout=5).brokers.values()
        except confluent_kafka.KafkaException:
            return
        self._known = self._known[:self._given] + [host_port(broker.host, broker.port) for broker in brokers]

    def _writer(self) -> confluent_kafka.Producer:
        """The transactional producer, the other registries' fenced and this one caught up since (tried again when
        another registry fences it meanwhile, as at two registries' start)."""
        for attempt in range(WRITE_ATTEMPTS):
            if self._producer is not None:
                return self._producer
            producer = confluent_kafka.Producer({**self._config(), "bootstrap.servers": self._bootstrap(),
                                                 "transactional.id": f"{self.group_id}-writer",
                                                 "transaction.timeout.ms": int(self.timeout * 1000),
                                                 "linger.ms": 0})
            try:
                producer.init_transactions(self.timeout)
                self._learn_brokers(producer)
                self._produce(producer, [(NOOP_KEY, None)])
            except confluent_kafka.KafkaException as exc:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise StoreError(f"cannot write to {self.topic}: {exc.args[0].str()}") from None
                log.info("registry writer fenced as it started (%s): starting again", exc.args[0].str())
                continue
            self._producer = producer
        return self._producer

    def _produce(self, producer: confluent_kafka.Producer, records: list[tuple[dict, dict | None]]) -> None:
        offsets: list[int] = []
        errors: list[str] = []

        def delivered(error, message) -> None:
            if error is not None:
                errors.append(error.str())
            else:
                offsets.append(message.offset())

        producer.begin_transaction()
        for key, value in records:
            producer.produce(self.topic, encode(value), encode(key), partition=0, on_delivery=delivered)
        producer.commit_transaction(self.timeout)  # flushes: every delivery report is in
        if errors or not offsets:
            raise StoreError(f"cannot write to {self.topic}: {', '.join(errors) or 'no delivery report'}")
        self.wait_applied(max(offsets))

    def write(self, compute: Callable[[State], list[tuple[dict, dict | None]]]):
        """Writes the records `compute(state)` returns (called with the lock held, on a caught-up state; it may
        raise to refuse the write, and the records' list may be empty), as one transaction, retried on a state
        caught up again when another registry took over the writes meanwhile. Returns what compute returned."""
        with self._write_lock:
            for attempt in range(WRITE_ATTEMPTS):
                producer = self._writer()
                with self.lock:
                    records = compute(self.state)
                if not records:
                    return records
                try:
                    self._produce(producer, records)
                    return records
                except confluent_kafka.KafkaException as exc:
                    error = exc.args[0]
                    log.info("registry write lost (%s): catching up and trying again", error.str())
                    if error.txn_requires_abort() and not error.fatal():
                        try:
                            producer.abort_transaction(self.timeout)
                        except confluent_kafka.KafkaException:
                            pass  # the next writer's InitProducerId aborts it
                    self._producer = None  # a new writer takes over and catches up before the next try
            raise StoreError(f"cannot write to {self.topic}: other registries kept taking over the writes")

    def stop(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(5)

