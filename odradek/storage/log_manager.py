"""All partition logs of one log directory: loading at start, creation, deletion, checkpoints, periodic work.

Layout (Kafka's): one directory `<topic>-<partition>` per partition (topic names may hold '.', '_' and '-', so the
partition is what follows the LAST '-'); `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` (the high watermarks, written by the broker through `checkpoint_high_watermarks`
every replica.high.watermark.checkpoint.interval.ms and at a clean stop, read at start) beside them; `.kafka_cleanshutdown` present only while the broker is cleanly stopped; `.lock`, which a running
broker holds with flock (`lock_log_dir`, taken before anything else in the directory is read or written) so that a
second broker, in another process or this one, refuses the directory instead of corrupting it. At start the marker decides
whether every log runs recovery, and it is removed once the logs are open, so a crash from then on is unclean.
The manager owns no thread or timer: the broker calls `checkpoint`, `run_retention` and `flush_due` on its own
schedule (log.flush.offset.checkpoint.interval.ms, log.retention.check.interval.ms, log.flush.scheduler.interval.ms).
A checkpoint file is rewritten only when its entries changed since this manager last wrote it: the high watermarks
go every 5 s, which with 50,000 idle partitions was 0.1 s of the event loop each time for the same bytes. A clean
close writes all three whatever they hold (the high watermarks as last given), so they are on disk at a clean stop.
Logs found on disk open with the broker-level defaults; the broker applies topic overrides with `Log.update_config`.
At start, directories left by an interrupted topic deletion (`-delete`) are removed, and a partition directory that
the catalogue does not know (`is_known` says no: a deletion cut short before its rename, or a copied-in directory)
is renamed `-stray` and not opened, as Kafka does, so a topic created later under the same name starts empty
instead of inheriting old records; the data stays on disk for the operator.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from odradek.config import LogConfig
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.clock import now_ms
from odradek.storage.log import DeferredWrites, Log
from odradek.storage.segment import DELETED_DIR_SUFFIX, STRAY_DIR_SUFFIX, fsync_path, set_aside

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]

log = logging.getLogger("odradek.storage")


def parse_partition_dir(name: str) -> TopicPartition | None:
    """(topic, partition) of a directory named `<topic>-<partition>`, else None."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogDirInUse(OSError):
    """Another broker holds the log directory's `.lock`."""


def lock_log_dir(log_dir: Path) -> int:
    """Create the directory if needed and take its `.lock` (Kafka's FileLock); the open descriptor holds the lock
    until `unlock_log_dir` or the process ends. LogDirInUse if someone else holds it."""
    log_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirInUse(f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A broker in another process "
                          f"or thread is using this directory.") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlock_log_dir(fd: int) -> None:
    os.close(fd)  # closing the only descriptor of the open file releases the flock


class LogManager:
    def __init__(self, log_dir: Path, broker_props: Mapping[str, Any], *,
                 now_ms: Callable[[], int] = now_ms, is_known: Callable[[TopicPartition], bool] = lambda _: True):
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.default_config = LogConfig.resolve(None, broker_props)
        self._clock = now_ms
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self.deferred_writes = DeferredWrites()  # the network shell's window for appends written together
        marker = self.log_dir / CLEAN_SHUTDOWN_FILE
        clean_shutdown = marker.exists()
        recovery_points = read_checkpoint(self.log_dir / RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = read_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT)
        self.checkpointed_high_watermarks = read_checkpoint(self.log_dir / REPLICATION_OFFSET_CHECKPOINT)
        self._written_checkpoints: dict[str, dict[TopicPartition, int]] = {}  # file name -> entries last written
        for path in sorted(self.log_dir.iterdir()):
            if path.name.endswith(DELETED_DIR_SUFFIX) and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                continue
            partition = parse_partition_dir(path.name)
            if partition is None or not path.is_dir():
                continue
            if not is_known(partition):
                stray = set_aside(path, STRAY_DIR_SUFFIX)
                log.warning("%s belongs to no known topic; set aside as %s", path.name, stray.name)
                continue
            self._logs[partition] = Log.open(path, self.default_config,
                                             recovery_point=recovery_points.get(partition, 0),
                                             clean_shutdown=clean_shutdown,
                                             log_start_offset=log_start_offsets.get(partition), now_ms=now_ms,
                                             deferred_writes=self.deferred_writes)
        marker.unlink(missing_ok=True)

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig) -> Log:
        """The partition's log, created empty if it does not exist (an existing one takes `config`)."""
        with self._lock:
            log = self._logs.get((topic, partition))
            if log is not None:
                log.update_config(config)
                return log
            log = Log.open(self.log_dir / f"{topic}-{partition}", config, clean_shutdown=True, now_ms=self._clock,
                           deferred_writes=self.deferred_writes)
            self._logs[(topic, partition)] = log
            return log

    def delete_partition(self, topic: str, partition: int) -> None:
        with self._lock:
            log = self._logs.pop((topic, partition), None)
        if log is not None:
            log.delete_all()

    def logs(self) -> list[tuple[TopicPartition, Log]]:
        return list(self._logs.items())

    def checkpoint(self, *, even_if_unchanged: bool = False) -> None:
        """Write both checkpoint files from the logs' current recovery points and start offsets."""
        logs = self.logs()
        self._write_if_changed(RECOVERY_POINT_CHECKPOINT, {partition: log.recovery_point for partition, log in logs},
                               even_if_unchanged)
        self._write_if_changed(LOG_START_OFFSET_CHECKPOINT,
                               {partition: log.log_start_offset for partition, log in logs}, even_if_unchanged)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write `replication-offset-checkpoint` (the partitions' high watermarks, which the broker keeps)."""
        self._write_if_changed(REPLICATION_OFFSET_CHECKPOINT, dict(high_watermarks))

    def _write_if_changed(self, name: str, entries: dict[TopicPartition, int], even_if_unchanged: bool = False) -> None:
        if even_if_unchanged or self._written_checkpoints.get(name) != entries:
            write_checkpoint(self.log_dir / name, entries)
            self._written_checkpoints[name] = entries

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log and remove `*.deleted` files whose delay passed; segments removed."""
        removed = 0
        for _, log in self.logs():
            removed += log.apply_retention(now_ms)
            log.delete_expired_files(now_ms)
        return removed

    def flush_due(self, now_ms: int) -> None:
        for _, log in self.logs():
            log.flush_if_due(now_ms)

    def close(self) -> None:
        """Flush and close every log, write every checkpoint file, then the clean-shutdown marker."""
        for _, log in self.logs():
            log.close()
        self.deferred_writes.close()
        self.checkpoint(even_if_unchanged=True)
        high_watermarks = self._written_checkpoints.get(REPLICATION_OFFSET_CHECKPOINT)
        if high_watermarks is not None:
            self._write_if_changed(REPLICATION_OFFSET_CHECKPOINT, high_watermarks, even_if_unchanged=True)
        marker = self.log_dir / CLEAN_SHUTDOWN_FILE
        with open(marker, "w") as file:
            os.fsync(file.fileno())
        fsync_path(self.log_dir)
