"""Kafka Connect 4.3.1's distributed worker (connect-distributed) against one Odradek broker: the worker creates
its config, offset and status topics compacted (replication factor -1, the broker's default) and checks them; the
FileStream source and sink connectors, created through the workers' REST API, carry a file through a topic to
another file (the source exactly-once, KIP-618); two workers in one group share the tasks, and when the one running
the source task is killed -9 the survivor takes its tasks over and finishes the file, from the source offsets the
dead one committed.
A worker on three brokers gets its internal topics replicated, and one over SASL_SSL runs with only prefixed ACLs.
Worker logs are in the test's tmp_path and their tail in assertion messages."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.embedded import free_port, wait_until
from tests.interop.conftest import secured_broker  # noqa: F401 (a fixture: SASL_SSL with ACLs)
from tests.jvm import start_tool
from tests.security.conftest import certificates  # noqa: F401 (the secured broker's)

JVM = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


class ConnectWorker:
    """One connect-distributed JVM of group `group`, its REST API on a free port, its log in `directory`."""

    def __init__(self, bootstrap: str, group: str, directory: Path, name: str, settings: dict | None = None):
        self.port, self.name, self.directory = free_port(), name, directory
        self.log_path = directory / f"connect-{name}.log"
        self.properties = {
            "bootstrap.servers": bootstrap, "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status", "config.storage.replication.factor": -1,
            "offset.storage.replication.factor": -1, "status.storage.replication.factor": -1,
            "offset.flush.interval.ms": 500, "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": self.port,
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000, "scheduled.rebalance.max.delay.ms": 3000,
            "plugin.discovery": "service_load",  # the connectors are on the classpath: no scan of every jar
            **(settings or {})}
        self.process = None

    def start(self) -> "ConnectWorker":
        config = self.directory / f"connect-{self.name}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.process = start_tool("connect-distributed", config, log_path=self.log_path, jvm_options=JVM)
        return self

    def wait_ready(self, timeout: float = 150) -> None:
        def ready():
            try:
                return self.rest("GET", "/connectors") == []
            except (OSError, urllib.error.HTTPError):
                return self.process.poll() is not None
        assert wait_until(ready, timeout, 1) and self.process.poll() is None, "worker not ready\n" + self.tail()

    def rest(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except Exception:
                self.process.kill()
                self.process.wait()

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- {self.log_path.name}:\n" + "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def workers(broker, tmp_path):
    """A factory of workers in one group on the module's broker, all stopped at the end; exactly-once source
    support enabled (KIP-618: transactional source tasks, zombies fenced when a task moves)."""
    group, started = f"connect-{uuid.uuid4().hex[:8]}", []

    def new(name: str, **settings) -> ConnectWorker:
        settings = {"exactly.once.source.support": "enabled", **settings}
        worker = ConnectWorker(broker.bootstrap_servers, group, tmp_path, name, settings).start()
        started.append(worker)
        return worker

    new.group = group
    new.started = started
    yield new
    for worker in started:
        worker.stop()


def file_connectors(worker: ConnectWorker, topic: str, source: Path, sink: Path) -> None:
    worker.rest("POST", "/connectors", {"name": "file-source", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": 1,
        "file": str(source), "topic": topic}})
    worker.rest("POST", "/connectors", {"name": "file-sink", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": 1,
        "file": str(sink), "topics": topic}})


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def tails(workers) -> str:
    return "\n".join(worker.tail() for worker in workers.started)


def running_tasks(worker: ConnectWorker) -> dict[str, str] | None:
    """connector -> the worker id running its task, asked of `worker`, when both tasks run (else None)."""
    try:
        status = {name: worker.rest("GET", f"/connectors/{name}/status") for name in ("file-source", "file-sink")}
    except (OSError, urllib.error.HTTPError):
        return None
    tasks = {name: s["tasks"][0] for name, s in status.items() if s["tasks"]}
    if len(tasks) < 2 or any(task["state"] != "RUNNING" for task in tasks.values()):
        return None
    return {name: task["worker_id"] for name, task in tasks.items()}


def test_connect_file_round_trip_and_rebalance_when_a_worker_is_killed(broker, workers, tmp_path, topic_name):
    """The first worker starts, its internal topics created compacted with the partitions Connect asks for. With a
    second worker in the group, connectors created over REST carry a file through a topic to another file line
    for line. The worker running the source task is then killed -9 while the file grows: the survivor gets both
    tasks and finishes the file, every line in the sink file in order (a line the dead worker had sent but not
    committed may come twice, the sink being at-least-once). The topic, read read_committed, has every line once:
    the source task's transactions and the fencing of the dead worker's producer held. Last, the sink's offsets
    are reset to the start through the REST API (KIP-875) and it writes the file again."""
    first = workers("a")
    first.wait_ready()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resources = [ConfigResource("topic", f"{workers.group}-{kind}") for kind in ("configs", "offsets", "status")]
    for resource, future in admin.describe_configs(resources).items():
        assert future.result(30)["cleanup.policy"].value == "compact", resource
    partitions = {name: len(meta.partitions) for name, meta in admin.list_topics(timeout=30).topics.items()}
    assert partitions[f"{workers.group}-configs"] == 1  # Connect asks for one partition of its config topic
    assert partitions[f"{workers.group}-offsets"] == 25 and partitions[f"{workers.group}-status"] == 5
    second = workers("b")
    second.wait_ready()
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"record {i:05d}" for i in range(3000)]
    source.write_text("".join(f"{line}\n" for line in lines[:1000]))
    file_connectors(first, topic_name, source, sink)

    assert wait_until(lambda: len(lines_of(sink)) >= 1000, 150, 1), tails(workers)
    assert lines_of(sink) == lines[:1000]
    tasks = running_tasks(first)
    assert tasks, tails(workers)
    by_port = {f"127.0.0.1:{w.port}": w for w in (first, second)}
    victim = by_port[tasks["file-source"]]
    survivor = second if victim is first else first
    victim.kill()
    with source.open("a") as out:
        out.write("".join(f"{line}\n" for line in lines[1000:]))

    def moved():
        tasks = running_tasks(survivor)
        return tasks is not None and set(tasks.values()) == {f"127.0.0.1:{survivor.port}"}

    assert wait_until(moved, 120, 1), "tasks did not move to the survivor\n" + tails(workers)
    assert wait_until(lambda: lines[-1] in lines_of(sink), 150, 1), f"{len(lines_of(sink))} lines\n" + tails(workers)
    got = lines_of(sink)
    assert set(got) == set(lines), \
        f"missing {sorted(set(lines) - set(got))[:5]}, extra {sorted(set(got) - set(lines))[:5]}"
    assert list(dict.fromkeys(got)) == lines  # first occurrences in the file's order
    assert topic_values(broker.bootstrap_servers, topic_name) == lines

    # KIP-875: a stopped sink connector's offsets reset to the start over REST (its group's offsets altered on the
    # broker); resumed, it writes the whole file again
    [committed] = survivor.rest("GET", "/connectors/file-sink/offsets")["offsets"]
    assert committed["offset"]["kafka_offset"] >= len(lines)  # past the last record (and maybe its commit marker)
    survivor.rest("PUT", "/connectors/file-sink/stop")
    assert wait_until(lambda: survivor.rest("GET", "/connectors/file-sink/status")["connector"]["state"] == "STOPPED",
                      60, 1), tails(workers)
    partition = {"kafka_topic": topic_name, "kafka_partition": 0}
    survivor.rest("PATCH", "/connectors/file-sink/offsets",
                  {"offsets": [{"partition": partition, "offset": {"kafka_offset": 0}}]})
    assert survivor.rest("GET", "/connectors/file-sink/offsets")["offsets"] == [
        {"partition": partition, "offset": {"kafka_offset": 0}}]
    before = len(lines_of(sink))
    survivor.rest("PUT", "/connectors/file-sink/resume")
    assert wait_until(lambda: len(lines_of(sink)) >= before + len(lines), 90, 1), tails(workers)
    assert lines_of(sink)[before:] == lines


@pytest.mark.skipif(not os.environ.get("INTEROP_SECONDS"), reason="a soak run: set INTEROP_SECONDS")
def test_long_connect_workers_killed_repeatedly(broker, workers, tmp_path, topic_name):
    """For INTEROP_SECONDS: the file grows all along while, every ~20 s, the worker running the source task is
    killed -9 and a new one joins; at the end every line is in the sink file and exactly once in the topic."""
    seconds = float(os.environ["INTEROP_SECONDS"])
    live = [workers("w0"), workers("w1")]
    for worker in live:
        worker.wait_ready()
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.touch()
    file_connectors(live[0], topic_name, source, sink)
    lines, deadline, generation = [], time.monotonic() + seconds, 2
    while time.monotonic() < deadline:
        with source.open("a") as out:
            batch = [f"record {len(lines) + i:07d}" for i in range(200)]
            out.write("".join(f"{line}\n" for line in batch))
            lines += batch
        time.sleep(2)
        if len(lines) % 2000 == 0:
            tasks = wait_until(lambda: running_tasks(live[-1]), 120, 1)
            assert tasks, tails(workers)
            victim = next(w for w in live if f"127.0.0.1:{w.port}" == tasks["file-source"])
            victim.kill()
            live.remove(victim)
            live.append(workers(f"w{generation}"))
            generation += 1
    assert wait_until(lambda: lines[-1] in lines_of(sink), 300, 2), f"{len(lines_of(sink))} lines\n" + tails(workers)
    assert list(dict.fromkeys(lines_of(sink))) == lines
    assert topic_values(broker.bootstrap_servers, topic_name) == lines


def topic_values(bootstrap: str, topic: str) -> list[str]:
    """The values of the one-partition `topic`, read read_committed to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values, deadline = [], time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def round_trip(worker: ConnectWorker, topic: str, directory: Path, count: int) -> None:
    """FileStream source and sink through `topic`: the sink file gets the source file's `count` lines, in order."""
    source, sink = directory / f"{topic}.in", directory / f"{topic}.out"
    lines = [f"line {i:04d}" for i in range(count)]
    source.write_text("".join(f"{line}\n" for line in lines))
    file_connectors(worker, topic, source, sink)
    assert wait_until(lambda: len(lines_of(sink)) >= count, 150, 1), worker.tail()
    assert lines_of(sink) == lines


def test_connect_on_three_brokers_replicates_its_internal_topics(cluster3, tmp_path):
    """On three brokers a worker's internal topics, made with replication factor -1, get the cluster's default of 3
    and min.insync.replicas 2, and the file round trip holds."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    worker = ConnectWorker(cluster3.bootstrap_servers, group, tmp_path, "rf3").start()
    try:
        worker.wait_ready()
        topics = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers}).list_topics(timeout=30).topics
        for kind in ("configs", "offsets", "status"):
            assert {len(p.replicas) for p in topics[f"{group}-{kind}"].partitions.values()} == {3}, kind
        round_trip(worker, f"{group}-data", tmp_path, 300)
    finally:
        worker.stop()


def test_connect_over_sasl_ssl_as_a_user_with_prefixed_acls(secured_broker, tmp_path):
    """A worker over SASL_SSL as alice, whose only ACLs are on the `connect-` prefix (topics, groups, transactional
    ids: the worker's group and internal topics, the connectors' topic and the sink's group): it starts and carries
    the file through."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    admin = AdminClient(secured_broker.librdkafka_config("admin"))
    grants = [AclBinding(kind, "connect-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL,
                         AclPermissionType.ALLOW)
              for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)]
    for done in admin.create_acls(grants).values():
        done.result(30)
    alice = secured_broker.client_properties("alice")
    settings = {**alice, **{f"{client}.{key}": value for client in ("producer", "consumer", "admin")
                            for key, value in alice.items()}}
    group = f"connect-{uuid.uuid4().hex[:8]}"
    worker = ConnectWorker(secured_broker.bootstrap_servers, group, tmp_path, "sasl", settings).start()
    try:
        worker.wait_ready()
        round_trip(worker, f"{group}-data", tmp_path, 300)
    finally:
        worker.stop()
