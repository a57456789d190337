"""A chaos run: a three-broker cluster behind fault proxies, clients writing and reading while a nemesis injects
faults, then everything healed, a final read, and the checker over the whole history.

- `ProxiedCluster`: odradek.embedded.Cluster whose every broker advertises a proxy of its own (so clients and the
  other brokers reach it only through that proxy) and reaches ZooKeeper through another (its zookeeper.connect).
- Clients (each a thread, recording into one `History`): confluent-kafka idempotent producers (acks=all, every value
  unique, the delivery report's partition/offset or error recorded), an `assign` consumer reading every partition
  from offset 0 and a `subscribe` consumer in a group (each poll's records, each assignment, and each reset of a
  position by auto.offset.reset, which librdkafka only logs: `OffsetResets`).
- `Nemesis`: from a seeded random generator, one fault at a time on one broker, held for a while, then healed: kill
  (-9, then start again), bounce (-9 and start again at once), cut-tail (-9, the end of one of its partition logs
  cut off, start again at once), pause (SIGSTOP/SIGCONT), restart (clean stop and start), partition the broker from
  everyone (its proxy blackholed or dropped) or from ZooKeeper alone.
- `run`: all of the above for some seconds; the topic's settings (replication factor, min.insync.replicas, unclean
  election) are parameters, so the same run proves replication once it lands (RF=3, min.insync.replicas=2).
  Duplicates that one producer id wrote in rising epochs (librdkafka's epoch bump renumbering what it could not
  know the fate of, which Kafka's brokers write again too) are counted apart, as `renumbered`, from the checker's
  duplicates, which stay anomalies: `renumbered_by_epoch_bumps` reads each copy's batch header from the logs.

With RF=1 (today) a broker that is down or cut off takes its partitions offline: producers see errors for those,
which is allowed; what is acknowledged must survive, once, and readers must agree on one history.
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess, Cluster, wait_until
from odradek.records.batch import BATCH_HEADER_SIZE, parse_header

from .checker import Op, Report, check
from .proxy import Proxy

LOSS_REPORT = re.compile(r"ACKNOWLEDGED RECORDS LOST: offsets \d+-\d+ \((\d+)\)")
FAULTS = ("kill", "bounce", "cut-tail", "pause", "restart", "partition-broker", "partition-zookeeper")


class ProxiedCluster(Cluster):
    """A Cluster whose brokers advertise `broker_proxies[id]` and use `zookeeper_proxies[id]` as zookeeper.connect."""

    def __init__(self, brokers: int = 3, *, zookeeper: str, **kwargs):
        self.broker_proxies: dict[int, Proxy] = {}
        self.zookeeper_proxies: dict[int, Proxy] = {}
        super().__init__(brokers, zookeeper=zookeeper, **kwargs)

    def new_broker(self, node_id: int, data_dir=None, settings=None) -> BrokerProcess:
        broker = super().new_broker(node_id, data_dir, settings)
        address, slash, chroot = self.zookeeper_connect.partition("/")
        host, _, port = address.split(",")[0].rpartition(":")
        zookeeper_proxy = Proxy(lambda: (host, int(port)), name=f"zookeeper-{node_id}")
        broker_proxy = Proxy(lambda: (broker.host, broker.port), name=f"broker-{node_id}")
        broker.settings["zookeeper.connect"] = zookeeper_proxy.address + slash + chroot
        broker.settings["advertised.listeners"] = f"PLAINTEXT://{broker_proxy.address}"
        self.zookeeper_proxies[node_id], self.broker_proxies[node_id] = zookeeper_proxy, broker_proxy
        return broker

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(proxy.address for proxy in self.broker_proxies.values())

    def proxies(self) -> list[Proxy]:
        return [*self.broker_proxies.values(), *self.zookeeper_proxies.values()]

    def close(self) -> None:
        for broker in self.brokers:  # a paused broker would not hear SIGTERM
            if broker.process is not None:
                broker.process.send_signal(signal.SIGCONT)
        for proxy in self.proxies():
            proxy.heal()
        super().close()
        for proxy in self.proxies():
            proxy.close()


class History:
    """The operations of every client, in the order they happened (appends from many threads)."""

    def __init__(self):
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self.started = time.monotonic()

    def add(self, process: str, f: str, type: str, **fields) -> None:
        with self._lock:
            self.ops.append(Op(process, f, type, time=time.monotonic() - self.started, **fields))


@dataclass
class Settings:
    """What a run does: topic settings as Kafka names them, clients, and how faults come."""

    seconds: float = 60.0
    seed: int = 0
    partitions: int = 6
    replication_factor: int = 1
    topic_config: dict[str, str] = field(default_factory=dict)  # min.insync.replicas, unclean.leader.election...
    producers: int = 2
    sends_per_second: int = 100  # per producer
    faults: tuple[str, ...] | None = None  # None: FAULTS, without cut-tail at RF=1 (no other copy to restore it)
    fault_seconds: tuple[float, float] = (2.0, 9.0)  # how long a fault is held; ZooKeeper's session is 6 s
    calm_seconds: tuple[float, float] = (1.0, 4.0)   # between a heal and the next fault
    in_turn: bool = False  # brokers 1, 2, 3, 1, ... (a rolling restart) rather than at random

    def fault_kinds(self) -> tuple[str, ...]:
        if self.faults is not None:
            return self.faults
        return FAULTS if self.replication_factor > 1 else tuple(f for f in FAULTS if f != "cut-tail")


@dataclass
class Outcome:
    settings: Settings
    report: Report
    faults: list[tuple[float, str, int, str]]  # (time, fault, broker id, detail)
    longest_ack_gap: float                      # seconds without any acknowledged send, after the first one
    longest_partition_stall: float              # the same on one partition
    producer_fatal_errors: list[str]            # a producer librdkafka gave up on: an idempotent one told its
                                                # sequence broke (data loss, often), a transactional one fenced or
                                                # told its transaction state is invalid
    reported_lost: int = 0                      # acknowledged offsets the brokers' logs say a truncation removed
    consumer_resets: list[str] = field(default_factory=list)  # librdkafka's warnings: a consumer's position reset
    renumbered: list = field(default_factory=list)  # duplicates an epoch bump made (`renumbered_by_epoch_bumps`)

    def row(self) -> dict[str, object]:
        kinds = Counter(fault for _, fault, _, _ in self.faults)
        return {"seed": self.settings.seed, "seconds": f"{self.settings.seconds:.0f}", "rf": self.settings.replication_factor,
                "faults": ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())) or "none",
                "acked": self.report.acknowledged, "failed": self.report.failed,
                "txns ok/aborted/?": "/".join(str(self.report.transactions.get(end, 0)) for end in ("ok", "fail", "info")),
                "polled": self.report.polled_records, "final": self.report.final_records,
                "ack-gap": f"{self.longest_ack_gap:.1f}s", "partition-stall": f"{self.longest_partition_stall:.1f}s",
                "producer-fatal": len(self.producer_fatal_errors), "broker-reported-lost": self.reported_lost,
                "consumer-resets": len(self.consumer_resets), "renumbered": len(self.renumbered),
                **self.report.counts()}

    @property
    def valid(self) -> bool:
        return self.report.valid and not self.producer_fatal_errors and not self.consumer_resets

    def summary(self) -> str:
        return (f"seed {self.settings.seed}: {self.report.summary()}; producer fatal errors "
                f"{self.producer_fatal_errors}; consumer resets {self.consumer_resets}")


def table(outcomes: list[Outcome]) -> str:
    rows = [outcome.row() for outcome in outcomes]
    if not rows:
        return ""
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(row[c]).ljust(widths[c]) for c in columns) for row in rows]
    return "\n".join(lines)


def client_debug(name: str) -> dict[str, object]:
    """librdkafka's log quiet, or with CHAOS_CLIENT_DEBUG_DIR set its `debug=eos,msg,protocol,broker` log in
    <dir>/<name>.log (what made an idempotent producer bump its epoch, say: grep "epoch" there; where a consumer
    looked for its group's coordinator: grep "coordinator")."""
    directory = os.environ.get("CHAOS_CLIENT_DEBUG_DIR")
    if not directory:
        return {"log_level": 0}
    logger = logging.getLogger(f"chaos.librdkafka.{name}")
    logger.propagate = False
    os.makedirs(directory, exist_ok=True)
    handler = logging.FileHandler(os.path.join(directory, f"{name}.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return {"debug": "eos,msg,protocol,broker,cgrp", "log_level": 7, "logger": logger}


class OffsetResets(logging.Handler):
    """librdkafka's warning when a consumer's position is reset by its auto.offset.reset policy after an error
    (OFFSET_OUT_OF_RANGE, or log truncation found by KIP-320 validation): recorded as a `reset` op, since the
    consumer then jumps (to the partition's start or end) without telling the application. A read that jumped to
    the end looks like a poll-skip of everything in between; the op says why."""

    PATTERN = re.compile(r"(?P<topic>\S+) \[(?P<partition>\d+)\]: offset reset \(at offset (?P<offset>-?\d+)")

    def __init__(self, history: History, process: str):
        super().__init__(logging.WARNING)
        self.history, self.process = history, process

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        found = self.PATTERN.search(message)
        if found:
            self.history.add(self.process, "reset", "info", partition=int(found["partition"]),
                             offset=int(found["offset"]), error=message)

    @classmethod
    def config(cls, history: History, process: str) -> dict[str, object]:
        """A consumer's logging settings: librdkafka's warnings go to a logger that records resets, nothing else."""
        logger = logging.getLogger(f"chaos.consumer.{process}.{id(history)}")
        logger.propagate = False
        logger.handlers = [cls(history, process)]
        return {"log_level": 4, "logger": logger}


class _Client(threading.Thread):
    def __init__(self, name: str, history: History, stop: threading.Event):
        super().__init__(name=name, daemon=True)
        self.history, self.stop = history, stop
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # the run reports it, rather than a thread dying in silence
            self.failure = exc


class ProducerClient(_Client):
    """`partitions` None: the partitioner chooses (librdkafka's picks only partitions that have a leader);
    else value n goes to partition n mod `partitions`, so an offline partition's sends fail, as a keyed write's."""

    def __init__(self, name, history, stop, bootstrap: str, topic: str, rate: int, partitions: int | None):
        super().__init__(name, history, stop)
        self.bootstrap, self.topic, self.rate, self.partitions = bootstrap, topic, rate, partitions
        self.fatal_errors: list[str] = []

    def _producer(self) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 15000, **client_debug(f"{self.topic}-{self.name}")})

    def work(self) -> None:
        producer = self._producer()

        def delivered(error, message):
            value = message.value()
            if error is None:
                self.history.add(self.name, "send", "ok", value=value, partition=message.partition(),
                                 offset=message.offset())
            else:
                self.history.add(self.name, "send", "fail", value=value, error=error.name())

        n = 0
        while not self.stop.is_set():
            value = f"{self.name}-{n}".encode()
            self.history.add(self.name, "send", "invoke", value=value)
            try:
                if self.partitions is None:
                    producer.produce(self.topic, value=value, on_delivery=delivered)
                else:
                    producer.produce(self.topic, value=value, partition=n % self.partitions, on_delivery=delivered)
                producer.poll(1 / self.rate)
            except BufferError:
                self.history.add(self.name, "send", "fail", value=value, error="queue full")
            except KafkaException as exc:  # fatal (the broker broke the idempotence contract): a new producer
                self.history.add(self.name, "send", "info", value=value, error=exc.args[0].name())
                self.fatal_errors.append(exc.args[0].str())
                producer = self._producer()  # the old one's queue stays indeterminate
            n += 1
        try:
            producer.flush(30)  # what is still not delivered then stays indeterminate (invoke only)
        except KafkaException as exc:
            self.fatal_errors.append(exc.args[0].str())


class TransactionalClient(_Client):
    """Transactions of 5 values each, committed or aborted at random (seeded): a committed one's values must be
    read, an aborted one's never by read_committed consumers. A transaction whose end still failed after retries is
    indeterminate (`info`); then a failed abort is aborted again if librdkafka says it must, and after a failed
    commit the client starts over (a new producer with the same transactional id, whose InitProducerId completes or
    aborts whatever the coordinator holds, fencing the old).

    librdkafka sends EndTxn(abort) even when every AddPartitionsToTxn of the transaction was refused, and they are,
    CONCURRENT_TRANSACTIONS, while the previous commit's markers wait for a partition's leader (a broker stopping
    between the delivery of that commit's records and its markers); the coordinator, still PrepareCommit, answers the
    abort INVALID_TXN_STATE, as Kafka's does, and librdkafka makes it fatal (librdkafka #4849; docs/chaos.md). So an
    abort waits for its records' delivery first (delivered records mean registered partitions, so the abort ends an
    Ongoing transaction), and a commit that failed, its records undelivered or its EndTxn perhaps prepared, is never
    followed by an abort."""

    def __init__(self, name, history, stop, bootstrap: str, topic: str, partitions: int, seed: int):
        super().__init__(name, history, stop)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.random = random.Random(seed)
        self.fatal_errors: list[str] = []  # librdkafka gave up on the producer (INVALID_TXN_STATE, PRODUCER_FENCED...)

    def _producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.topic}-{self.name}",
                             "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                             **({"debug": os.environ["CHAOS_TXN_DEBUG"], "log_level": 7}
                                if os.environ.get("CHAOS_TXN_DEBUG") else {"log_level": 0})})
        producer.init_transactions(30)
        return producer

    def work(self) -> None:
        producer, n = None, 0
        while not self.stop.is_set():
            values = tuple(f"{self.name}-{n + i}".encode() for i in range(5))
            n += len(values)
            commit = self.random.random() < 0.5
            self.history.add(self.name, "txn", "invoke", values=values)
            try:
                producer = producer or self._producer()
                producer.begin_transaction()
                for value in values:
                    producer.produce(self.topic, value=value, partition=self.random.randrange(self.partitions))
                if not commit:  # delivered first, so the partitions are in the transaction: see below
                    producer.flush(15)
                self._end(producer.commit_transaction if commit else producer.abort_transaction)
                self.history.add(self.name, "txn", "ok" if commit else "fail", values=values)
            except KafkaException as exc:
                error = exc.args[0]
                self.history.add(self.name, "txn", "info", values=values, error=error.name())
                if error.fatal():
                    self.fatal_errors.append(error.str())
                abortable = producer is not None and not commit and error.txn_requires_abort()
                producer = self._abort(producer) if abortable else None
                self.stop.wait(0.5)
            self.stop.wait(0.05)

    @staticmethod
    def _end(end) -> None:
        """Commit or abort, again while the error is retriable (librdkafka's rule: an abort after a commit that
        timed out would be INVALID_TXN_STATE, fatal, if the commit was in fact prepared)."""
        for attempt in range(4):
            try:
                return end(15)
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 3:
                    raise

    def _abort(self, producer: Producer) -> Producer | None:
        try:
            producer.abort_transaction(15)
            return producer
        except KafkaException as exc:
            if exc.args[0].fatal():
                self.fatal_errors.append(exc.args[0].str())
            return None


class ConsumerClient(_Client):
    """`assign`: every partition from offset 0; `subscribe`: a member of a group (auto commit), whose assignments
    are recorded since a rebalance legitimately moves it back to the committed offset."""

    def __init__(self, name, history, stop, bootstrap: str, topic: str, partitions: int, mode: str):
        super().__init__(name, history, stop)
        self.bootstrap, self.topic, self.partitions, self.mode = bootstrap, topic, partitions, mode

    def work(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"chaos-{self.topic}",
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                             "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                             "session.timeout.ms": 10000, **OffsetResets.config(self.history, self.name)})
        if self.mode == "assign":
            partitions = tuple(range(self.partitions))
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
            self.history.add(self.name, "assign", "ok", partitions=partitions)
        else:
            consumer.subscribe([self.topic], on_assign=lambda _, assigned: self.history.add(
                self.name, "assign", "ok", partitions=tuple(tp.partition for tp in assigned)))
        while not self.stop.is_set():
            messages = consumer.consume(500, 0.5)
            records = tuple((m.partition(), m.offset(), m.value()) for m in messages if m.error() is None)
            if records:
                self.history.add(self.name, "poll", "ok", records=records, read_committed=True)
        consumer.close()


class Nemesis(threading.Thread):
    def __init__(self, cluster: ProxiedCluster, settings: Settings, stop: threading.Event, started: float,
                 topic: str):
        super().__init__(name="nemesis", daemon=True)
        self.cluster, self.settings, self.stop, self.started, self.topic = cluster, settings, stop, started, topic
        self.random = random.Random(settings.seed)
        self.faults: list[tuple[float, str, int, str]] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.wait(self.random.uniform(*self.settings.calm_seconds)):
                brokers = self.cluster.brokers
                broker = brokers[len(self.faults) % len(brokers)] if self.settings.in_turn \
                    else self.random.choice(brokers)
                fault = self.random.choice(self.settings.fault_kinds())
                held = self.random.uniform(*self.settings.fault_seconds)
                heal = self.inject(fault, broker, held)
                self.stop.wait(held)
                heal()
        except BaseException as exc:
            self.failure = exc

    def inject(self, fault: str, broker: BrokerProcess, held: float):
        """Do `fault` to `broker` (for `held` seconds, recorded); returns what heals it."""
        node_id, detail = broker.node_id, f"{held:.1f}s"
        if fault == "kill":
            broker.kill()
            heal = lambda: broker.start(timeout=60)  # noqa: E731
        elif fault in ("bounce", "cut-tail"):
            broker.kill()
            if fault == "cut-tail":
                detail = self.cut_tail(broker)
            broker.start(timeout=60)  # at once, within its old ZooKeeper session
            heal = lambda: None  # noqa: E731
        elif fault == "pause":
            broker.process.send_signal(signal.SIGSTOP)
            heal = lambda: broker.process.send_signal(signal.SIGCONT)  # noqa: E731
        elif fault == "restart":
            broker.stop()
            heal = lambda: broker.start(timeout=60)  # noqa: E731
        else:
            proxy = (self.cluster.broker_proxies if fault == "partition-broker" else self.cluster.zookeeper_proxies)[
                node_id]
            mode = self.random.choice(("blackhole", "drop"))
            proxy.cut(mode)
            detail = f"{mode} {detail}"
            heal = proxy.heal
        self.faults.append((time.monotonic() - self.started, fault, node_id, detail))
        return heal

    def cut_tail(self, broker: BrokerProcess) -> str:
        """Cut a random part off the end of the last segment of one of the topic's partitions on the (stopped)
        broker, as a power cut loses what was not flushed; the detail for the fault list."""
        logs = sorted(broker.data_dir.glob(f"{self.topic}-*/*.log"))
        last_segments = {path.parent: path for path in logs}  # sorted: each directory's last segment wins
        if not last_segments:
            return "no log"
        segment = last_segments[self.random.choice(sorted(last_segments))]
        size = segment.stat().st_size
        keep = self.random.randrange(size) if size else 0
        with open(segment, "r+b") as file:
            file.truncate(keep)
        return f"{segment.parent.name} {size - keep} bytes cut"


def create_topic(bootstrap: str, settings: Settings) -> str:
    topic = f"chaos-{settings.seed}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    # the brokers register in ZooKeeper a moment after they listen: wait until every replica has one
    wait_until(lambda: len(admin.list_topics(timeout=10).brokers) >= settings.replication_factor, timeout=30)
    admin.create_topics([NewTopic(topic, settings.partitions, settings.replication_factor,
                                  config=settings.topic_config)])[topic].result(30)
    return topic


def heal_everything(cluster: ProxiedCluster) -> None:
    for proxy in cluster.proxies():
        proxy.heal()
    for broker in cluster.brokers:
        if broker.process is None:
            broker.start(timeout=60)
        else:
            broker.process.send_signal(signal.SIGCONT)


def final_read(bootstrap: str, topic: str, partitions: int, history: History, timeout: float = 60) -> None:
    """Every partition from 0 to its end (high watermark) once every partition has a leader again."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-final", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         **OffsetResets.config(history, "final")})
    deadline = time.monotonic() + timeout
    ends = {}
    for partition in range(partitions):
        ends[partition] = wait_until(lambda: _high_watermark(consumer, topic, partition),
                                     timeout=max(deadline - time.monotonic(), 1))
        if ends[partition] is None:
            raise RuntimeError(f"partition {partition} of {topic} has no leader after healing")
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list = []
    last = {p: -1 for p in range(partitions)}
    quiet_since = time.monotonic()
    while any(last[p] < ends[p] - 1 for p in range(partitions)) and time.monotonic() < deadline \
            and time.monotonic() - quiet_since < 5:  # a log may end in transaction markers, which are not read
        for m in consumer.consume(1000, 0.5):
            if m.error() is None:
                records.append((m.partition(), m.offset(), m.value()))
                last[m.partition()] = m.offset()
                quiet_since = time.monotonic()
    consumer.close()
    history.add("final", "poll", "ok", records=tuple(records), read_committed=True)


def _high_watermark(consumer: Consumer, topic: str, partition: int) -> int | None:
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=2)[1]
    except KafkaException:
        return None


def renumbered_by_epoch_bumps(data_dirs: list[Path], topic: str, duplicates: list) -> list:
    """The duplicates (the checker's: value, [(partition, offset), ...]) whose copies were all written by one
    idempotent producer id, each in a later epoch than the one before: librdkafka renumbers the messages whose fate
    it cannot know from sequence 0 of a bumped epoch (KIP-360; its documentation says the bump may duplicate them),
    so the broker cannot tell such a copy from a new send and Kafka's would write it too. A duplicate within one
    epoch, or from two producer ids, is the broker's failure and stays one. Each copy's batch is found in the
    partition's segment files of the first broker whose log still holds it (`data_dirs`)."""
    renumbered = []
    for value, positions in duplicates:
        writers = [_batch_writer(data_dirs, topic, partition, offset) for partition, offset in sorted(positions)]
        if all(writers) and len({producer_id for producer_id, _ in writers}) == 1 and writers[0][0] >= 0 \
                and all(before[1] < after[1] for before, after in zip(writers, writers[1:])):
            renumbered.append((value, positions, writers))
    return renumbered


def _batch_writer(data_dirs: list[Path], topic: str, partition: int, offset: int) -> tuple[int, int] | None:
    """(producer id, producer epoch) of the batch holding `offset`, from the first log that has it."""
    for data_dir in data_dirs:
        for path in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
            data, position = path.read_bytes(), 0
            while position + BATCH_HEADER_SIZE <= len(data):
                header = parse_header(data, position)
                if header.size < BATCH_HEADER_SIZE:
                    break
                if header.base_offset <= offset <= header.last_offset:
                    return header.producer_id, header.producer_epoch
                position += header.size
    return None


def reported_losses(cluster: ProxiedCluster, since: dict[int, int]) -> int:
    """Acknowledged offsets the brokers' logs report lost since the log sizes in `since` (the replica fetcher's
    "ACKNOWLEDGED RECORDS LOST: offsets a-b (n)" warnings, an unclean election's cost), summed."""
    lost = 0
    for broker in cluster.brokers:
        with open(broker.log_path, "rb") as log_file:
            log_file.seek(since.get(broker.node_id, 0))
            lost += sum(int(count) for count in LOSS_REPORT.findall(log_file.read().decode(errors="replace")))
    return lost


def log_sizes(cluster: ProxiedCluster) -> dict[int, int]:
    return {broker.node_id: broker.log_path.stat().st_size for broker in cluster.brokers if broker.log_path.exists()}


def run(cluster: ProxiedCluster, settings: Settings) -> Outcome:
    """Clients and nemesis for `settings.seconds`, heal, final read, check (and the losses the brokers reported)."""
    bootstrap = cluster.bootstrap_servers
    logs_before = log_sizes(cluster)
    topic = create_topic(bootstrap, settings)
    history = History()
    clients_stop, nemesis_stop = threading.Event(), threading.Event()
    clients = [ProducerClient(f"producer-{i}", history, clients_stop, bootstrap, topic, settings.sends_per_second,
                              settings.partitions if i % 2 else None) for i in range(settings.producers)]
    clients.append(TransactionalClient("transactions", history, clients_stop, bootstrap, topic, settings.partitions,
                                       settings.seed))
    clients += [ConsumerClient(f"consumer-{mode}", history, clients_stop, bootstrap, topic, settings.partitions, mode)
                for mode in ("assign", "subscribe")]
    nemesis = Nemesis(cluster, settings, nemesis_stop, history.started, topic)
    for thread in (*clients, nemesis):
        thread.start()
    time.sleep(settings.seconds)
    nemesis_stop.set()
    nemesis.join()
    heal_everything(cluster)
    time.sleep(5)  # clients get going again on a healed cluster before they stop
    clients_stop.set()
    for client in clients:
        client.join(60)
    failures = [thread.failure for thread in (*clients, nemesis) if thread.failure is not None]
    if failures:
        raise RuntimeError(f"a client or the nemesis failed: {failures!r}") from failures[0]
    final_read(bootstrap, topic, settings.partitions, history)
    acks = [op for op in history.ops if op.f == "send" and op.type == "ok"]
    report = check(history.ops)
    renumbered = renumbered_by_epoch_bumps([broker.data_dir for broker in cluster.brokers], topic,
                                           report.anomalies["duplicate"])
    report.anomalies["duplicate"] = [duplicate for duplicate in report.anomalies["duplicate"]
                                     if duplicate[0] not in {value for value, _, _ in renumbered}]
    return Outcome(settings, report, nemesis.faults, _longest_gap(acks),
                   max((_longest_gap([op for op in acks if op.partition == p]) for p in range(settings.partitions)),
                       default=0.0), [error for client in clients for error in getattr(client, "fatal_errors", ())],
                   reported_losses(cluster, logs_before), [op.error for op in history.ops if op.f == "reset"],
                   renumbered)


def _longest_gap(ops: list[Op]) -> float:
    return max((b.time - a.time for a, b in zip(ops, ops[1:])), default=0.0)
