"""A real broker in a child process: start it, wait for its ready line, stop it cleanly or kill it.

Tests and users' own suites need a broker that behaves exactly as `odradek serve` does, including what happens on
SIGKILL and restart, so this runs that very command (with port 0, reading the bound port from the ready line) rather
than an in-process imitation.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_READY = re.compile(r"ready on (?P<host>[^ ]+):(?P<port>\d+)")


class BrokerProcess:
    def __init__(self, data_dir: str | os.PathLike | None = None, *, settings: dict[str, object] | None = None,
                 port: int = 0, log_path: str | os.PathLike | None = None):
        self._tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="odradek-")
        self.data_dir = Path(data_dir if data_dir is not None else self._tmp.name)
        self.settings = dict(settings or {})
        self.port = port
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"{self.data_dir.name}.broker.log"
        self.process: subprocess.Popen | None = None
        self.host = "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        command = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(self.data_dir),
                   "--host", self.host, "--port", str(self.port)]
        for key, value in self.settings.items():
            command += ["--set", f"{key}={value}"]
        log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log_file, text=True)
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

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the broker shuts down cleanly (clean-shutdown marker written)."""
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

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05):
    """Poll predicate until it returns a true value or the timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
