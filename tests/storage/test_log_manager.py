"""LogManager: partition directories, checkpoints in Kafka's format, the clean-shutdown marker."""

from __future__ import annotations

import os

from odradek.config import LogConfig
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
    LogManager, parse_partition_dir,
)

from .conftest import append, batch, read_all


def test_parse_partition_dir_by_last_dash():
    assert parse_partition_dir("my-topic.v1_x-12") == ("my-topic.v1_x", 12)
    assert parse_partition_dir("topic-0") == ("topic", 0)
    for bad in ("topic", "-3", "topic-", "topic-x", "topic-1.abc-delete"):
        assert parse_partition_dir(bad) is None


def test_checkpoint_file_format(tmp_path):
    path = tmp_path / "cp"
    write_checkpoint(path, {("a-b.c", 1): 7, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\na-b.c 1 7\n"
    assert read_checkpoint(path) == {("a-b.c", 1): 7, ("a", 0): 42}
    assert not (tmp_path / "cp.tmp").exists()
    for malformed in ("", "1\n0\n", "0\n2\na 0 1\n", "0\nx\n"):
        path.write_text(malformed)
        assert read_checkpoint(path) == {}
    assert read_checkpoint(tmp_path / "missing") == {}


def test_lifecycle_clean_then_unclean(tmp_path, clock):
    manager = LogManager(tmp_path, {"log.segment.bytes": 2000}, now_ms=clock)
    assert manager.default_config.segment_bytes == 2000
    log = manager.create("orders.v1-eu", 3, LogConfig(segment_bytes=1500))
    assert manager.create("orders.v1-eu", 3, LogConfig(segment_bytes=1500)) is log
    other = manager.create("x", 0, manager.default_config)
    for index in range(20):
        append(log, batch(2, value_size=100, tag=index))
    append(other, batch(1))
    log.delete_records_before(5)
    expected = read_all(log)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("orders.v1-eu", 3): 40, ("x", 0): 1}
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("orders.v1-eu", 3): 5, ("x", 0): 0}

    manager = LogManager(tmp_path, {}, now_ms=clock)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert sorted(partition for partition, _ in manager.logs()) == [("orders.v1-eu", 3), ("x", 0)]
    log = manager.get("orders.v1-eu", 3)
    assert read_all(log) == expected and log.log_start_offset == 5
    # Crash: no close, a torn write at the end of the active segment.
    active = log.segments[-1].log_path
    append(log, batch(2, tag=99))
    os.truncate(active, active.stat().st_size - 5)
    manager = LogManager(tmp_path, {}, now_ms=clock)
    assert read_all(manager.get("orders.v1-eu", 3)) == expected
    assert manager.get("missing", 0) is None


def test_delete_retention_and_flush(tmp_path, clock):
    manager = LogManager(tmp_path, {"log.retention.ms": 1000, "log.segment.delete.delay.ms": 0}, now_ms=clock)
    log = manager.create("t", 0, manager.default_config)
    append(log, batch(1, timestamp=100))
    log.roll()
    append(log, batch(1, timestamp=100))
    manager.flush_due(clock.now)
    assert log.recovery_point == 1
    assert manager.run_retention(clock.now) == 1
    assert not [name for name in os.listdir(log.directory) if name.endswith(".deleted")]
    manager.delete_partition("t", 0)
    assert manager.get("t", 0) is None and not (tmp_path / "t-0").exists()


def test_checkpoints_are_rewritten_only_when_they_change(tmp_path, clock):
    """The broker checkpoints every partition every few seconds; an idle broker's files stay as they are."""
    manager = LogManager(tmp_path, {}, now_ms=clock)
    log = manager.create("idle", 0, manager.default_config)
    files = [tmp_path / RECOVERY_POINT_CHECKPOINT, tmp_path / LOG_START_OFFSET_CHECKPOINT,
             tmp_path / REPLICATION_OFFSET_CHECKPOINT]
    manager.checkpoint()
    manager.checkpoint_high_watermarks({("idle", 0): 0})
    written = [os.stat(path).st_ino for path in files]  # each write renames a new file into place
    manager.checkpoint()
    manager.checkpoint_high_watermarks({("idle", 0): 0})
    assert [os.stat(path).st_ino for path in files] == written
    append(log, batch(2))
    log.flush()
    manager.checkpoint()
    manager.checkpoint_high_watermarks({("idle", 0): 2})
    assert read_checkpoint(files[0]) == {("idle", 0): 2}
    assert read_checkpoint(files[2]) == {("idle", 0): 2}
    assert read_checkpoint(files[1]) == {("idle", 0): 0}
    for path in files:
        path.unlink()
    manager.close()  # a clean stop writes them all, changed or not
    assert [read_checkpoint(path) for path in files] == [{("idle", 0): 2}, {("idle", 0): 0}, {("idle", 0): 2}]
