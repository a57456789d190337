"""The Java world for the tests: Apache Kafka's jars fetched by `make java-jars` (tests/java/*/pom.xml into
build/java/), run as Kafka's own scripts run them.

- `start_tool("connect-distributed", ...)` starts one of Kafka's command-line tools (TOOLS: the class its
  bin/kafka-*.sh script execs, with kafka-run-class.sh's heap); `java_program(...)` compiles the Java sources of
  tests/java/src once per change and runs one of them with Kafka's clients, tools, Streams and Connect on the
  classpath (tests/interop/kafka_tools.py's ToolShell runs many tools in one such JVM).
- `KafkaServer` is Apache Kafka itself as a reference broker on free loopback ports: 4.3 in KRaft combined mode
  (storage formatted first; one node or several as one quorum) or 3.9 in ZooKeeper mode on a given ZooKeeper. It is
  ready when it logs its start, keeps its log on failure and runs in a capped heap, so that it fits beside our own
  brokers on 2 cores.

A missing jar set is an error naming `make java-jars`, never a skip: the suite's Java tests must run.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Mapping, Sequence

from odradek.embedded import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
JAVA_BUILD = ROOT / "build" / "java"
KAFKA_VERSION = "4.3.1"
KAFKA_ZK_VERSION = "3.9.1"
SPARK_KAFKA_JARS = JAVA_BUILD / "spark-kafka"
LOG4J2_CONFIG = ROOT / "tests" / "java" / "log4j2.properties"
LOG4J1_CONFIG = ROOT / "tests" / "java" / "log4j.properties"

# bin/kafka-<name>.sh -> the class it execs (Kafka 4.3's scripts)
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-storage": "kafka.tools.StorageTool",
    "connect-distributed": "org.apache.kafka.connect.cli.ConnectDistributed",
    "connect-mirror-maker": "org.apache.kafka.connect.mirror.MirrorMaker",
}

# What a short-lived tool's JVM is given: kafka-run-class.sh's heap for tools, and the client compiler only, which
# halves the start of a JVM that runs for seconds.
TOOL_JVM_OPTIONS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


def jars(version: str = KAFKA_VERSION) -> Path:
    """The directory of one fetched jar set (build/java/kafka-<version>), or an error saying how to fetch it."""
    directory = JAVA_BUILD / f"kafka-{version}"
    if not (directory / ".fetched").exists():
        raise RuntimeError(f"Kafka {version}'s jars are not in {directory}: run `make java-jars` (Maven Central)")
    return directory


def spark_kafka_jars() -> str:
    """Spark's Kafka connector (format("kafka")) and what pyspark lacks of it, as spark.jars takes them."""
    if not (SPARK_KAFKA_JARS / ".fetched").exists():
        raise RuntimeError(f"Spark's Kafka connector is not in {SPARK_KAFKA_JARS}: run `make java-jars`")
    return ",".join(str(jar) for jar in sorted(SPARK_KAFKA_JARS.glob("*.jar")))


def classpath(version: str = KAFKA_VERSION, *extra: str | os.PathLike) -> str:
    return os.pathsep.join([*map(str, extra), f"{jars(version)}/*"])


def _logging_options(version: str) -> list[str]:
    if version.startswith("3."):
        return [f"-Dlog4j.configuration=file:{LOG4J1_CONFIG}"]
    return [f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}"]


def java_command(main_class: str, args: Sequence[str] = (), *, version: str = KAFKA_VERSION,
                 jvm_options: Sequence[str] = TOOL_JVM_OPTIONS, extra_classpath: Sequence[str | os.PathLike] = ()
                 ) -> list[str]:
    return ["java", *jvm_options, *_logging_options(version), "-cp", classpath(version, *extra_classpath),
            main_class, *map(str, args)]


def start_tool(name: str, *args: object, log_path: str | os.PathLike | None = None,
               jvm_options: Sequence[str] = TOOL_JVM_OPTIONS) -> subprocess.Popen:
    """Start one of Kafka's long-running tools (a verifiable consumer, a Connect worker); stdout is a pipe unless
    `log_path` takes it."""
    out = open(log_path, "ab") if log_path else subprocess.PIPE
    process = subprocess.Popen(java_command(TOOLS[name], [str(arg) for arg in args], jvm_options=jvm_options),
                               stdout=out, stderr=subprocess.STDOUT if log_path else subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=log_path is None)
    if log_path:
        out.close()
    return process


_compile_lock = threading.Lock()


def compiled_classes() -> Path:
    """tests/java/src compiled against Kafka 4.3's jars into build/java/classes, again only when a source is newer
    than the last compile."""
    sources = sorted((ROOT / "tests" / "java" / "src").rglob("*.java"))
    output = JAVA_BUILD / "classes"
    stamp = output / ".compiled"
    with _compile_lock:
        newest = max((source.stat().st_mtime for source in sources), default=0)
        if not stamp.exists() or stamp.stat().st_mtime < newest:
            output.mkdir(parents=True, exist_ok=True)
            subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(output), "-cp", classpath(),
                            *map(str, sources)], check=True, capture_output=True, text=True)
            stamp.touch()
            os.utime(stamp, (newest, newest))  # a source edited while javac ran is newer, so compiled next time
    return output


def java_program(main_class: str, *args: object, timeout: float = 180, input: str | None = None,
                 jvm_options: Sequence[str] = TOOL_JVM_OPTIONS) -> subprocess.CompletedProcess:
    """Run one of tests/java/src's programs to the end with Kafka 4.3's jars."""
    return subprocess.run(java_command(main_class, [str(arg) for arg in args], jvm_options=jvm_options,
                                       extra_classpath=[compiled_classes()]),
                          capture_output=True, text=True, timeout=timeout, input=input)


def start_java_program(main_class: str, *args: object, log_path: str | os.PathLike,
                       jvm_options: Sequence[str] = TOOL_JVM_OPTIONS) -> subprocess.Popen:
    """Start one of tests/java/src's programs in the background, its output to `log_path`."""
    out = open(log_path, "ab")
    try:
        return subprocess.Popen(java_command(main_class, [str(arg) for arg in args], jvm_options=jvm_options,
                                             extra_classpath=[compiled_classes()]),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        out.close()


class KafkaServer:
    """Apache Kafka as a reference: `with KafkaServer() as kafka: kafka.bootstrap_servers`.

    version 4.x runs KRaft combined mode (process.roles=broker,controller) with the storage formatted first;
    `nodes` > 1 runs that many as one quorum (node ids 1..n). version 3.x runs ZooKeeper mode on `zookeeper` (a
    connect string, chroot allowed). `settings` are server.properties lines over test-friendly defaults; the heap is
    capped at `heap`. Logs stay in the directory (temporary unless given) and their tail is in the error when a node
    does not start."""

    JVM_OPTIONS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                   "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
    TEST_SETTINGS = {
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1, "group.initial.rebalance.delay.ms": 0, "num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
    }

    def __init__(self, version: str = KAFKA_VERSION, *, nodes: int = 1, zookeeper: str | None = None,
                 settings: Mapping[str, object] | None = None, data_dir: str | os.PathLike | None = None,
                 heap: str = "512m", jvm_options: Sequence[str] = ()):
        import tempfile

        self.version = version
        self.kraft = not version.startswith("3.")
        if not self.kraft and zookeeper is None:
            raise ValueError("Kafka 3.x runs here in ZooKeeper mode: give zookeeper=")
        self.zookeeper = zookeeper
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="kafka-reference-")
        self.data_dir = Path(data_dir or self._tmp.name)
        replicated = {key: nodes for key in ("offsets.topic.replication.factor",
                                             "transaction.state.log.replication.factor",
                                             "share.coordinator.state.topic.replication.factor")} if nodes > 1 else {}
        self.settings = {**self.TEST_SETTINGS, **replicated, **(settings or {})}
        self.heap = heap
        self.jvm_options = [*self.JVM_OPTIONS, *jvm_options]
        self.node_ids = list(range(1, nodes + 1))
        self.ports = {node: free_port() for node in self.node_ids}
        self.controller_ports = {node: free_port() for node in self.node_ids}
        self.cluster_id = _kafka_uuid()
        self.processes: dict[int, subprocess.Popen] = {}
        self.started_in: float | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    def log_path(self, node: int) -> Path:
        return self.data_dir / f"node-{node}" / "server.log"

    def properties(self, node: int) -> dict[str, object]:
        port = self.ports[node]
        common = {"log.dirs": self.data_dir / f"node-{node}" / "logs", **self.settings}
        if not self.kraft:
            return {"broker.id": node, "zookeeper.connect": self.zookeeper,
                    "listeners": f"PLAINTEXT://127.0.0.1:{port}", **common}
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.controller_ports.items())
        return {"process.roles": "broker,controller", "node.id": node, "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.controller_ports[node]}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,"
                                                  "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                "inter.broker.listener.name": "PLAINTEXT", **common}

    def _write_properties(self, node: int) -> Path:
        directory = self.data_dir / f"node-{node}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in self.properties(node).items()))
        return path

    def format(self, node: int) -> None:
        """kafka-storage format, once per node's log directory."""
        config = self._write_properties(node)
        if (self.data_dir / f"node-{node}" / "logs" / "meta.properties").exists():
            return
        formatted = subprocess.run(java_command(TOOLS["kafka-storage"], ["format", "-t", self.cluster_id, "-c", config],
                                                version=self.version),
                                   capture_output=True, text=True, timeout=120)
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{formatted.stdout}{formatted.stderr}")

    def start_node(self, node: int) -> None:
        if self.kraft:
            self.format(node)
        config = self._write_properties(node)
        log = open(self.log_path(node), "ab")
        try:
            self.processes[node] = subprocess.Popen(
                java_command("kafka.Kafka", [config], version=self.version,
                             jvm_options=[f"-Xmx{self.heap}", f"-Xms{self.heap}", *self.jvm_options]),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def wait_ready(self, node: int, timeout: float = 90.0) -> None:
        def started() -> bool:
            process = self.processes[node]
            if process.poll() is not None:
                return True
            log = self.log_path(node).read_text(errors="replace")  # KRaft's line, then ZooKeeper mode's
            return "Kafka Server started" in log or "started (kafka.server.KafkaServer)" in log

        if not wait_until(started, timeout, 0.1) or self.processes[node].poll() is not None:
            raise RuntimeError(f"Kafka {self.version} node {node} did not start; {self.log_path(node)} ends:\n"
                               + self.log_tail(node))

    def start(self, timeout: float = 120.0) -> "KafkaServer":
        begun = time.monotonic()
        try:
            for node in self.node_ids:
                self.start_node(node)
            for node in self.node_ids:
                self.wait_ready(node, timeout)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - begun
        return self

    def kill(self, node: int) -> None:
        process = self.processes.pop(node, None)
        if process is not None:
            process.kill()
            process.wait()

    def stop_node(self, node: int, timeout: float = 60.0) -> None:
        process = self.processes.pop(node, None)
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self) -> None:
        for node in list(self.processes):
            self.processes[node].terminate()
        for node in list(self.processes):
            self.stop_node(node)

    def log_tail(self, node: int, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path(node).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> "KafkaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _kafka_uuid() -> str:
    """A cluster id as kafka-storage random-uuid prints it: 16 random bytes, URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
