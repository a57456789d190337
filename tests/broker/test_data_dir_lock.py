"""One broker per data directory (issue 12): a running broker holds Kafka's `.lock` in its log directory, so a
second `odradek serve` or embedded broker on it refuses to start with a clear message instead of corrupting it; and
a start that fails (the port is taken) leaves the directory exactly as it was, clean-shutdown marker included."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from odradek.embedded import BrokerProcess, BrokerThread
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE


def serve(data_dir, port: int = 0, *settings: str) -> subprocess.CompletedProcess:
    """`odradek serve` that is expected to fail at start (data_dir None: log.dirs among the settings): its exit
    code and stderr."""
    directory = ["--data-dir", str(data_dir)] if data_dir is not None else []
    return subprocess.run([sys.executable, "-m", "odradek", "serve", *directory, "--host", "127.0.0.1",
                           "--port", str(port), *(f"--set={setting}" for setting in settings)],
                          capture_output=True, text=True, timeout=60)


def snapshot(directory) -> dict[str, tuple[int, str]]:
    """Every file under the directory (but the lock file): modification time and content hash."""
    return {str(path.relative_to(directory)): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(directory.rglob("*")) if path.is_file() and path.name != ".lock"}


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    # the broker's own periodic checkpoints (high watermarks every 5 s by default) must not pass for the second
    # serve's writes: none of them is due during the module
    quiet = {key: 3_600_000 for key in ("replica.high.watermark.checkpoint.interval.ms",
                                        "log.flush.offset.checkpoint.interval.ms")}
    process = BrokerProcess(tmp_path_factory.mktemp("locked") / "data", settings=quiet)
    process.start()
    producer = Producer({"bootstrap.servers": process.bootstrap_servers})
    producer.produce("kept", value=b"before")
    assert producer.flush(10) == 0
    yield process
    process.close()


def test_a_second_serve_on_a_directory_in_use_refuses_with_a_clear_message(running):
    before = snapshot(running.data_dir)
    result = serve(running.data_dir)
    assert result.returncode == 1
    assert "Failed to acquire lock on file .lock in" in result.stderr
    assert "is using this directory" in result.stderr
    assert snapshot(running.data_dir) == before
    producer = Producer({"bootstrap.servers": running.bootstrap_servers})  # the first broker still serves
    producer.produce("kept", value=b"after")
    assert producer.flush(10) == 0


def test_every_log_directory_is_locked(running, tmp_path):
    """log.dirs lists several: each is locked (Kafka's LogManager), so one in use by another broker refuses the
    start even when it is not the first, and the first is left with nothing but its lock file."""
    result = serve(None, 0, f"log.dirs={tmp_path / 'first'},{running.data_dir}")
    assert result.returncode == 1
    assert f"Failed to acquire lock on file .lock in {running.data_dir}" in result.stderr
    assert [path.name for path in (tmp_path / "first").iterdir()] == [".lock"]


def test_an_embedded_broker_on_a_directory_in_use_refuses(running):
    with pytest.raises(RuntimeError, match=r"Failed to acquire lock on file \.lock"):
        BrokerThread(running.data_dir).start()


def test_two_embedded_brokers_in_one_process_do_not_share_a_directory(tmp_path):
    with BrokerThread(tmp_path / "data"):
        with pytest.raises(RuntimeError, match="is using this directory"):
            BrokerThread(tmp_path / "data").start()
    with BrokerThread(tmp_path / "data"):  # released at stop
        pass


@pytest.mark.parametrize("taken_listener", ["first", "second"])
def test_a_start_on_a_port_in_use_leaves_the_directory_as_it_was(tmp_path, taken_listener):
    """Every listener is bound before the logs open: a taken port of any of them fails the start untouched."""
    data_dir = tmp_path / "data"
    with BrokerProcess(data_dir) as process:
        producer = Producer({"bootstrap.servers": process.bootstrap_servers})
        producer.produce("kept", value=b"x")
        assert producer.flush(10) == 0
    assert (data_dir / CLEAN_SHUTDOWN_FILE).exists()
    before = snapshot(data_dir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        if taken_listener == "first":
            result = serve(data_dir, port)
        else:
            result = serve(data_dir, 0, f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}")
    assert result.returncode == 1
    assert snapshot(data_dir) == before
    assert (data_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "in use" in result.stderr


def test_an_embedded_broker_whose_start_failed_gives_the_directory_back(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        failing = BrokerThread(tmp_path / "data", settings={"metrics.port": taken.getsockname()[1]})
        with pytest.raises(RuntimeError, match="failed to start"):
            failing.start()
    with BrokerThread(tmp_path / "data") as again:
        producer = Producer({"bootstrap.servers": again.bootstrap_servers})
        producer.produce("after-a-failed-start", value=b"x")
        assert producer.flush(10) == 0
