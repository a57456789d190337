"""Embedded brokers: `Broker` for users (`from odradek import Broker`), over two ways of running one.

- `BrokerThread`: odradek.broker.broker.Broker on its own event loop in a background thread of this process. It
  starts in a fraction of a second, which is what a test suite wants (the `odradek_broker` pytest fixture).
- `BrokerProcess`: a real `odradek serve` child process: start it, wait for its ready line, stop it cleanly or kill
  it. Tests that need exactly what `odradek serve` does, including SIGKILL and restart, use this one (with port 0,
  reading the bound port from the ready line) rather than an in-process imitation.

Both take a data directory (a temporary one by default, removed on close), broker settings under Kafka's names and
a port (0: any free one, kept across restarts), and give `bootstrap_servers`. `Broker` adds test-friendly defaults.

For a cluster: `ZooKeeperServer` runs a standalone ZooKeeper (Debian's jars, `java` directly, loopback only) and
`Cluster` runs N BrokerProcess brokers coordinated by it (or by a ZooKeeper given by address), `odradek cluster up`
and the `odradek_cluster` fixture being thin layers over it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from odradek.config import host_port

_READY = re.compile(r"ready on (?P<host>[^ ]+):(?P<port>\d+)")


class _Service:
    """The lifecycle every runner here shares: restart, close (stop, then remove the temporary directory `_tmp` if
    one was made) and use as a context manager. Subclasses say how to start and stop."""

    _tmp: tempfile.TemporaryDirectory | None = None

    def _temporary_directory(self, prefix: str) -> Path:
        """A directory of this runner's own, removed at close."""
        self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
        return Path(self._tmp.name)

    def restart(self):
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class _ChildProcess:
    """A runner whose service is the child process `process` (None when not running)."""

    process: subprocess.Popen | None = None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait (SIGKILL after `timeout`): a broker shuts down cleanly (clean-shutdown marker written)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code

    def kill(self) -> None:
        """SIGKILL: no chance to flush or write the clean-shutdown marker."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class _LocalBroker(_Service):
    """What both broker runners share: a data directory (temporary unless given), settings and a port kept across
    restarts."""

    def __init__(self, data_dir: str | os.PathLike | None, settings: dict[str, object] | None, port: int):
        # a temporary data directory sits inside its own temporary directory, so that what goes beside it (the
        # child process's log) is removed with it
        self.data_dir = Path(data_dir) if data_dir is not None else self._temporary_directory("odradek-") / "data"
        self.settings = dict(settings or {})
        self.port = port
        self.host = "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        return host_port(self.host, self.port)


class BrokerProcess(_ChildProcess, _LocalBroker):
    def __init__(self, data_dir: str | os.PathLike | None = None, *, settings: dict[str, object] | None = None,
                 port: int = 0, log_path: str | os.PathLike | None = None):
        super().__init__(data_dir, settings, port)
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"{self.data_dir.name}.broker.log"
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        """The `odradek serve` command line this runner starts (a subclass may run it under a tool)."""
        command = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(self.data_dir),
                   "--host", self.host, "--port", str(self.port)]
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        return command

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=log_file, text=True)
        log_file.close()
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        match = _READY.search(ready[0]) if ready else None
        if match is None:
            self.kill()
            raise RuntimeError(f"broker did not become ready; see {self.log_path}:\n{self.log_tail()}")
        self.port = int(match["port"])  # keep the same port across restarts
        return self

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""



class BrokerThread(_LocalBroker):
    """A broker on its own event loop in a daemon thread; `broker` is the running odradek.broker.broker.Broker."""

    def __init__(self, data_dir: str | os.PathLike | None = None, *, settings: dict[str, object] | None = None,
                 port: int = 0):
        super().__init__(data_dir, settings, port)
        self.broker = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._failure: BaseException | None = None

    def start(self, timeout: float = 30.0) -> "BrokerThread":
        ready = threading.Event()
        self._failure = None
        self._thread = threading.Thread(target=self._run, args=(ready,), name="odradek-broker", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"embedded broker did not start within {timeout:g}s")
        if self._failure is not None:
            self._thread.join()
            raise RuntimeError(f"embedded broker failed to start: {self._failure!r}") from self._failure
        return self

    def _run(self, ready: threading.Event) -> None:
        with asyncio.Runner(loop_factory=_new_event_loop) as runner:
            runner.run(self._serve(ready))

    async def _serve(self, ready: threading.Event) -> None:
        from odradek.broker.broker import Broker as BrokerCore

        try:
            broker = BrokerCore({**self.settings, "log.dirs": str(self.data_dir)}, host=self.host, port=self.port)
            _, self.port = await broker.start()
        except BaseException as exc:
            self._failure = exc
            ready.set()
            return
        self.broker, self._loop, self._stopped = broker, asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await self._stopped.wait()
        await broker.stop()

    def stop(self) -> None:
        """Clean shutdown, as SIGTERM gives `odradek serve`."""
        if self._thread is None:
            return
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join()
        self._thread = self._loop = self._stopped = self.broker = None



def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Broker:
    """A broker for your program or test suite: `with Broker() as broker: ... broker.bootstrap_servers`.

    In this process by default (a background thread); `process=True` runs `odradek serve` as a child process
    instead. Settings use Kafka's names and win over TEST_FRIENDLY_SETTINGS.
    """

    # Groups form at once and the offsets topic is small: what a test wants, where a server wants Kafka's defaults.
    TEST_FRIENDLY_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1}

    def __init__(self, settings: dict[str, object] | None = None, *, process: bool = False,
                 data_dir: str | os.PathLike | None = None, port: int = 0):
        settings = {**self.TEST_FRIENDLY_SETTINGS, **(settings or {})}
        runner = BrokerProcess if process else BrokerThread
        self.runner: BrokerProcess | BrokerThread = runner(data_dir, settings=settings, port=port)

    @property
    def bootstrap_servers(self) -> str:
        return self.runner.bootstrap_servers

    @property
    def data_dir(self) -> Path:
        return self.runner.data_dir

    def start(self, timeout: float = 30.0) -> "Broker":
        self.runner.start(timeout)
        return self

    def restart(self) -> "Broker":
        self.runner.restart()
        return self

    def close(self) -> None:
        """Stop the broker and remove its temporary data directory (if it made one)."""
        self.runner.close()

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


ZOOKEEPER_CLASSPATH = "/usr/share/java/*"  # where Debian's `zookeeper` package puts its jars and their dependencies


def zookeeper_available(classpath: str = ZOOKEEPER_CLASSPATH) -> bool:
    """Whether a ZooKeeper server can be started here: java and the ZooKeeper jars."""
    import glob
    import shutil

    jars = [path for entry in classpath.split(":") for path in glob.glob(entry)]
    return shutil.which("java") is not None and any(Path(jar).name.startswith("zookeeper-") for jar in jars)


class ZooKeeperServer(_ChildProcess, _Service):
    """A standalone ZooKeeper server on 127.0.0.1 (port 0: a free one, kept across restarts) with its data in a
    directory of its own (temporary unless given), run as `java ... QuorumPeerMain zoo.cfg`. For tests and
    `odradek cluster up`; `connect` is what brokers take as zookeeper.connect."""

    def __init__(self, data_dir: str | os.PathLike | None = None, *, port: int = 0, tick_time_ms: int = 1000,
                 classpath: str = ZOOKEEPER_CLASSPATH, extra_config: Mapping[str, object] | None = None,
                 jvm_options: Sequence[str] = ()):
        """extra_config: more zoo.cfg lines (authProvider.1, secureClientPort, ...); jvm_options: more java
        arguments (-Djava.security.auth.login.config=..., -Dzookeeper.ssl.keyStore.location=...)."""
        self.data_dir = Path(data_dir) if data_dir is not None else self._temporary_directory("odradek-zookeeper-")
        self.extra_config = dict(extra_config or {})
        self.jvm_options = list(jvm_options)
        self.port = port or free_port()  # known before start, so brokers can be configured first
        self.tick_time_ms = tick_time_ms
        self.classpath = classpath
        self.log_path = self.data_dir / "zookeeper.log"
        self.process: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        if not zookeeper_available(self.classpath):
            raise RuntimeError(f"no ZooKeeper server here (java and zookeeper-*.jar in {self.classpath}): "
                               "install Debian's `zookeeper` package (make system-packages as root)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(f"tickTime={self.tick_time_ms}\ndataDir={self.data_dir / 'data'}\nclientPort={self.port}\n"
                          "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n"
                          "4lw.commands.whitelist=ruok,srvr,stat\n"
                          + "".join(f"{key}={value}\n" for key, value in self.extra_config.items()))
        log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dzookeeper.jmx.log4j.disable=true",
             *self.jvm_options, "-cp", self.classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log_file.close()
        if not wait_until(lambda: self.process.poll() is not None or self._answers(), timeout) \
                or self.process.poll() is not None:
            self.kill()
            raise RuntimeError(f"ZooKeeper did not start; see {self.log_path}")
        return self

    def _answers(self) -> bool:
        """The `ruok` four-letter word: `imok` once the server serves."""
        import socket

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"ruok")
                return sock.recv(4) == b"imok"
        except OSError:
            return False



class Cluster(_Service):
    """N `odradek serve` brokers (ids 1..N, each a BrokerProcess) coordinated by ZooKeeper:
    `with Cluster(brokers=3) as cluster: ... cluster.bootstrap_servers`.

    Without `zookeeper` it runs a ZooKeeperServer of its own; with one (a connect string, optionally with a
    chroot) it joins that one, so many clusters can share one ZooKeeper under different chroots."""

    TEST_FRIENDLY_SETTINGS = {**Broker.TEST_FRIENDLY_SETTINGS, "zookeeper.session.timeout.ms": 6000}

    def __init__(self, brokers: int = 3, *, zookeeper: str | None = None, settings: dict[str, object] | None = None,
                 data_dir: str | os.PathLike | None = None):
        self.data_dir = Path(data_dir) if data_dir is not None else self._temporary_directory("odradek-cluster-")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.zookeeper_server = None if zookeeper else ZooKeeperServer(self.data_dir / "zookeeper")
        self._zookeeper = zookeeper
        self.settings = {**self.TEST_FRIENDLY_SETTINGS, **(settings or {})}
        self.brokers = [self.new_broker(node_id) for node_id in range(1, brokers + 1)]

    @property
    def zookeeper_connect(self) -> str:
        return self._zookeeper or self.zookeeper_server.connect

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap_servers for broker in self.brokers)

    def broker(self, node_id: int) -> BrokerProcess:
        return next(broker for broker in self.brokers if broker.node_id == node_id)

    def new_broker(self, node_id: int, data_dir: str | os.PathLike | None = None,
                   settings: dict[str, object] | None = None) -> BrokerProcess:
        """A broker of this cluster, not started (its data under the cluster's directory unless given)."""
        broker = BrokerProcess(data_dir or self.data_dir / f"broker-{node_id}", settings={
            **self.settings, **(settings or {}), "broker.id": node_id, "zookeeper.connect": self.zookeeper_connect})
        broker.node_id = node_id
        return broker

    def start(self, timeout: float = 60.0) -> "Cluster":
        if self.zookeeper_server is not None:
            self.zookeeper_server.start()
        try:  # all at once, as brokers of a real cluster start: the first ones race for /cluster/id and /controller
            with concurrent.futures.ThreadPoolExecutor(len(self.brokers) or 1) as pool:
                for started in [pool.submit(broker.start, timeout) for broker in self.brokers]:
                    started.result()
        except BaseException:
            self.close()
            raise
        return self

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        if self.zookeeper_server is not None:
            self.zookeeper_server.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS's pick), for a server to be configured with
    before it starts."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05):
    """Poll predicate until it returns a true value or the timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
