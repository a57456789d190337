"""Kafka Streams 4.3.1 against Odradek: tests/java/src/odradek/interop/streams/OrdersApp.java, a stateful
exactly_once_v2 application (a sum in a RocksDB store with its changelog behind a repartition, a stream-GlobalKTable
join, a windowed count), run on `cluster3` (three brokers, RF 3, min.insync.replicas 2) through kill -9 of the Streams
JVM and of a broker. The input is produced deterministically; the outputs, read read_committed (last value per key),
must be exactly what that input gives (computed here), and so must the store the application answers interactive
queries from. Two instances run with num.standby.replicas=1. group.protocol=streams (KIP-1071) is not served:
the 4.3 client's StreamsGroupHeartbeat is not in Odradek's ApiVersions, so the application fails with Kafka's own
error, as against a broker without the streams protocol, and the classic protocol is what works.
Over SASL_SSL the application runs as a user holding only its prefixed ACLs. Long versions (many kills) run with
INTEROP_SECONDS set."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until
from tests.interop.conftest import secured_broker  # noqa: F401 (a fixture: SASL_SSL with ACLs)
from tests.jvm import start_java_program
from tests.security.conftest import certificates  # noqa: F401 (the secured broker's)

APP = "odradek.interop.streams.OrdersApp"
CUSTOMERS, REGIONS, WINDOW_MS = 24, 4, 10_000
BASE_TS = 1_700_000_000_000
JVM = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
OUTPUTS = ("totals", "windowed-counts", "region-counts")


def orders(count: int) -> list[tuple[str, str, int]]:
    """(order id, "customer:amount", timestamp ms): the same list every run."""
    return [(f"o{i}", f"c{(i * 7) % CUSTOMERS}:{(i * 13) % 97 + 1}", BASE_TS + i * 37) for i in range(count)]


def customers() -> dict[str, str]:
    return {f"c{c}": f"r{c % REGIONS}" for c in range(CUSTOMERS)}


def expected(records: list[tuple[str, str, int]]) -> dict[str, dict[str, str]]:
    totals, windows, regions = defaultdict(int), Counter(), Counter()
    for _, value, ts in records:
        customer, amount = value.split(":")
        totals[customer] += int(amount)
        windows[f"{customer}@{ts - ts % WINDOW_MS}"] += 1
        regions[customers()[customer]] += 1
    return {"totals": {k: str(v) for k, v in totals.items()},
            "windowed-counts": {k: str(v) for k, v in windows.items()},
            "region-counts": {k: str(v) for k, v in regions.items()}}


class StreamsRun:
    """One application's topics on a cluster, its instances (OrdersApp JVMs, each log in the test's tmp_path) and
    what it wrote."""

    def __init__(self, bootstrap: str, tmp_path: Path, client: dict | None = None, java: dict | None = None):
        """client: librdkafka settings of the test's own clients beside bootstrap.servers (a secured listener's);
        java: the application's Java client properties beside its Streams settings."""
        self.bootstrap, self.tmp_path = bootstrap, tmp_path
        self.client = {"bootstrap.servers": bootstrap, **(client or {})}
        self.prefix = f"orders-{uuid.uuid4().hex[:8]}"
        self.settings = {"bootstrap.servers": bootstrap, "application.id": self.prefix, "commit.interval.ms": 200,
                         "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
                         "consumer.max.poll.interval.ms": 60_000, **(java or {})}
        self.instances: dict[str, object] = {}
        self.started = 0
        admin = AdminClient(self.client)
        futures = admin.create_topics([NewTopic(f"{self.prefix}-{name}", 3) for name in ("orders", "customers")])
        for future in futures.values():
            future.result(60)

    def log_path(self, name: str) -> Path:
        return self.tmp_path / f"streams-{name}.log"

    def start(self, name: str, **settings) -> None:
        """Start instance `name` (a fresh state directory each start: its stores come back from the changelogs)."""
        self.started += 1
        state_dir = self.tmp_path / f"state-{name}-{self.started}"
        config = self.tmp_path / f"{name}-{self.started}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in {**self.settings, "state.dir": state_dir,
                                                           **settings}.items()))
        self.instances[name] = start_java_program(APP, config, self.prefix, log_path=self.log_path(name),
                                                  jvm_options=JVM)

    def kill(self, name: str) -> None:
        process = self.instances.pop(name)
        process.kill()
        process.wait()

    def stop(self) -> None:
        """Kill what still runs: the test is over, and a clean close of a Streams client takes seconds."""
        for name in list(self.instances):
            self.kill(name)

    def reports(self, name: str) -> list[dict]:
        lines = self.log_path(name).read_text(errors="replace").splitlines() if self.log_path(name).exists() else []
        return [json.loads(line) for line in lines if line.startswith("{")]

    def last_report(self, name: str) -> dict:
        return next(iter(self.reports(name)[::-1]), {})

    def tails(self) -> str:
        """Each instance's last log lines and its last report."""
        out = []
        for path in sorted(self.tmp_path.glob("streams-*.log")):
            lines = path.read_text(errors="replace").splitlines()
            reports = [line for line in lines if line.startswith("{")]
            out += [f"--- {path.name}:", *[line for line in lines if not line.startswith("{")][-20:], *reports[-1:]]
        return "\n".join(out)

    def produce_customers(self) -> None:
        producer = Producer({**self.client, "enable.idempotence": True})
        for customer, region in customers().items():
            producer.produce(f"{self.prefix}-customers", region, customer, timestamp=BASE_TS - 1000)
        assert producer.flush(60) == 0

    def produce_orders(self, records: list, pause_every: int = 0, pause: float = 0.0) -> threading.Thread:
        """Produce `records` in a thread (acks=all, idempotent), pausing `pause` s every `pause_every` records, so
        that the application is mid-run while it is; join the returned thread."""
        def run():
            producer = Producer({**self.client, "enable.idempotence": True, "linger.ms": 5})
            for n, (key, value, ts) in enumerate(records, 1):
                producer.produce(f"{self.prefix}-orders", value, key, timestamp=ts)
                if pause_every and n % pause_every == 0:
                    producer.flush(60)
                    time.sleep(pause)
            unsent = producer.flush(120)
            if unsent:
                failures.append(f"{unsent} orders not acknowledged")

        failures: list = []
        thread = threading.Thread(target=run, daemon=True)
        thread.failures = failures
        thread.start()
        return thread

    def outputs(self) -> dict[str, dict[str, str]]:
        """The last value per key of every output topic, read read_committed up to its last stable offset."""
        consumer = Consumer({**self.client, "group.id": "unused", "enable.auto.commit": False,
                             "isolation.level": "read_committed", "enable.partition.eof": True})
        try:
            result = {}
            for name in OUTPUTS:
                topic = f"{self.prefix}-{name}"
                partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
                if not partitions:
                    result[name] = {}
                    continue
                consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
                last, at_end, deadline = {}, set(), time.monotonic() + 60
                while len(at_end) < len(partitions) and time.monotonic() < deadline:
                    message = consumer.poll(1)
                    if message is None:
                        continue
                    if message.error():
                        if message.error().code() == KafkaError._PARTITION_EOF:
                            at_end.add(message.partition())
                        continue
                    last[message.key().decode()] = message.value().decode()
                result[name] = last
            return result
        finally:
            consumer.close()

    def wait_for(self, want: dict, timeout: float) -> dict:
        """The outputs once they equal `want` or when `timeout` passed."""
        seen = {}

        def done():
            seen.update(self.outputs())
            return seen == want

        wait_until(done, timeout, 2.0)
        return seen


def summary(got: dict, want: dict) -> str:
    lines = []
    for name in OUTPUTS:
        g, w = got.get(name, {}), want[name]
        wrong = {k: (g.get(k), w.get(k)) for k in set(g) | set(w) if g.get(k) != w.get(k)}
        lines.append(f"{name}: {len(g)} keys of {len(w)}, {len(wrong)} wrong (got, want): "
                     f"{dict(list(wrong.items())[:6])}")
    return "\n".join(lines)


def stores_match(run: StreamsRun, names: str, want: dict) -> bool:
    """Whether the instances' totals-store, queried through KafkaStreams.store, together hold exactly the totals."""
    reports = [run.last_report(name) for name in names]
    if not all("totals" in report for report in reports):
        return False
    merged = {key: value for report in reports for key, value in report["totals"].items()}
    return sum(map(len, (r["totals"] for r in reports))) == len(merged) and \
        merged == {k: int(v) for k, v in want["totals"].items()}


@pytest.fixture
def streams_run(cluster3, tmp_path):
    run = StreamsRun(cluster3.bootstrap_servers, tmp_path)
    yield run
    run.stop()


def test_streams_eos_instance_and_broker_killed(streams_run, cluster3):
    """Two instances with a standby each while input flows: one is killed -9 mid-run and started again with an empty
    state directory (its stores come back from the changelogs), then a broker of the cluster is killed -9 and
    started again (leaders move, transactions on it are finished or aborted). The outputs read read_committed are
    exact (no update lost or doubled through the repartitions, the restore and the dead instance's aborted
    transaction), and the two stores, queried interactively, hold the totals between them."""
    run, records = streams_run, orders(2000)
    want = expected(records)
    run.produce_customers()
    run.start("a", **{"num.standby.replicas": 1})
    run.start("b", **{"num.standby.replicas": 1})
    assert wait_until(lambda: all(run.last_report(n).get("standby") for n in "ab"), 150, 1), \
        "no instance got a standby task\n" + run.tails()
    producing = run.produce_orders(records, pause_every=100, pause=0.5)
    assert wait_until(lambda: run.outputs()["totals"], 120, 2), "no output before the kill\n" + run.tails()
    run.kill("a")
    run.start("a", **{"num.standby.replicas": 1})
    time.sleep(5)
    victim = cluster3.broker(1)
    victim.kill()
    time.sleep(3)
    victim.start(60)
    producing.join(180)
    assert not producing.failures, producing.failures
    got = run.wait_for(want, 240)
    assert got == want, summary(got, want) + "\n" + run.tails()
    assert wait_until(lambda: stores_match(run, "ab", want), 60, 1), \
        f"interactive queries: {run.last_report('a')} {run.last_report('b')}\n" + run.tails()


def test_streams_group_protocol_streams_fails_with_kafkas_error(streams_run):
    """group.protocol=streams asks for KIP-1071's StreamsGroupHeartbeat, which Odradek does not serve: the
    application stops with the error a Kafka broker without the streams protocol gives, naming it."""
    run = streams_run
    run.start("s", **{"group.protocol": "streams"})
    assert wait_until(lambda: "error" in run.last_report("s"), 120, 1), run.tails()
    error = run.last_report("s")["error"]
    assert error.startswith("org.apache.kafka.common.errors.UnsupportedVersionException: The cluster does not "
                            "support the STREAMS group protocol"), run.tails()


@pytest.mark.skipif(not os.environ.get("INTEROP_SECONDS"), reason="a soak run: set INTEROP_SECONDS")
def test_long_streams_eos_many_kills(streams_run, cluster3):
    """For INTEROP_SECONDS: kill -9 and restart an instance or a broker every ~15 s while input flows; outputs
    exact at the end."""
    run, seconds = streams_run, float(os.environ["INTEROP_SECONDS"])
    count = max(2000, int(seconds * 40))
    records = orders(count)
    want = expected(records)
    run.produce_customers()
    run.start("a", **{"num.standby.replicas": 1})
    run.start("b", **{"num.standby.replicas": 1})
    producing = run.produce_orders(records, pause_every=100, pause=100 * seconds / count)
    deadline, turn = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        time.sleep(15)
        turn += 1
        if turn % 2:
            name = "ab"[turn // 2 % 2]
            run.kill(name)
            run.start(name, **{"num.standby.replicas": 1})
        else:
            victim = cluster3.broker(turn // 2 % 3 + 1)
            victim.kill()
            time.sleep(3)
            victim.start(60)
    producing.join(300)
    assert not producing.failures, producing.failures
    got = run.wait_for(want, 600)
    assert got == want, summary(got, want) + "\n" + run.tails()


def test_streams_eos_over_sasl_ssl_with_only_its_prefixed_acls(secured_broker, tmp_path):
    """Over SASL_SSL as alice, who holds only the ACLs Kafka's Streams security guide names for an application
    (every resource by the application.id prefix: its topics, its consumer group, its transactional ids): the
    exactly_once_v2 application creates its internal topics and writes exactly what the input gives."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    run = StreamsRun(secured_broker.bootstrap_servers, tmp_path, client=secured_broker.librdkafka_config("admin"),
                     java=secured_broker.client_properties("alice"))
    grants = [AclBinding(kind, run.prefix, ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL,
                         AclPermissionType.ALLOW)
              for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)]
    acls = AdminClient(run.client)
    for done in acls.create_acls(grants).values():
        done.result(30)
    try:
        records = orders(300)
        run.produce_customers()
        run.start("a")
        producing = run.produce_orders(records)
        producing.join(120)
        assert not producing.failures, producing.failures
        want = expected(records)
        got = run.wait_for(want, 180)
        assert got == want, summary(got, want) + "\n" + run.tails()
    finally:
        run.stop()
