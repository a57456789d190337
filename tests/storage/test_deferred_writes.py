"""Appends in a DeferredWrites window: their bytes reach the file together when it closes, and nothing that looks at
the log (a read, a flush, a roll, an append outside the window, another thread) ever finds the file behind it."""

from __future__ import annotations

import os
import resource
import threading

import pytest

from odradek.config import LogConfig
from odradek.records.batch import validate_batches
from odradek.storage.log import DeferredWrites, Log

from .conftest import append, batch, read_all


def open_log(path, clock, window: DeferredWrites | None, **config) -> Log:
    return Log.open(path, LogConfig(**config), clean_shutdown=True, now_ms=clock, deferred_writes=window)


def file_size(log: Log) -> int:
    return os.stat(log.segments[-1].log_path).st_size


def produced(count: int, value_size: int = 100) -> list[bytes]:
    return [batch(1, tag=index, value_size=value_size) for index in range(count)]


def appended_in_window(path, clock, count: int, **config) -> tuple[DeferredWrites, Log]:
    """A log with `count` one-record batches appended in a window still open."""
    window = DeferredWrites()
    log = open_log(path, clock, window, **config)
    window.open()
    for data in produced(count):
        append(log, data)
    return window, log


def test_a_window_writes_its_appends_when_it_closes_and_the_file_is_what_direct_appends_write(tmp_path, clock):
    window = DeferredWrites()
    deferred = open_log(tmp_path / "deferred-0", clock, window)
    direct = open_log(tmp_path / "direct-0", clock, None)
    batches = produced(40)
    window.open()
    for data in batches:
        frame = memoryview(b"\xee" + data)[1:]  # a view into a request frame, as the network hands it on
        deferred.append(frame, validate_batches(frame), partition_leader_epoch=3)
        direct.append(data, validate_batches(data), partition_leader_epoch=3)
    assert deferred.log_end_offset == 40
    assert file_size(deferred) == 0  # held until the window closes
    window.write()
    assert file_size(deferred) == deferred.segments[-1].size
    with open(deferred.segments[-1].log_path, "rb") as got, open(direct.segments[-1].log_path, "rb") as expected:
        assert got.read() == expected.read()
    assert [offset for offset, _ in read_all(deferred)] == list(range(40))
    append(deferred, batch(1))  # closed: written at once
    assert file_size(deferred) == deferred.segments[-1].size


def test_a_read_in_the_window_writes_first(tmp_path, clock):
    window, log = appended_in_window(tmp_path / "t-0", clock, 3)
    region = log.read(0, 1 << 20)
    assert [h.base_offset for h in validate_batches(region.read_bytes())] == [0, 1, 2]
    append(log, batch(1))  # the window is still open: held again
    assert file_size(log) < log.segments[-1].size
    window.write()
    assert [offset for offset, _ in read_all(log)] == [0, 1, 2, 3]


def test_a_roll_in_the_window_writes_the_segment_it_seals(tmp_path, clock):
    window, log = appended_in_window(tmp_path / "t-0", clock, 100, segment_bytes=4096)
    sealed = log.segments[:-1]
    assert len(sealed) >= 3
    for segment in sealed:  # whole on disk before the window closes
        assert os.stat(segment.log_path).st_size == segment.size
    window.write()
    assert [offset for offset, _ in read_all(log)] == list(range(100))


def test_a_flush_in_the_window_writes_then_syncs(tmp_path, clock):
    window, log = appended_in_window(tmp_path / "t-0", clock, 5)
    log.flush()
    assert log.recovery_point == 5
    assert file_size(log) == log.segments[-1].size
    window.write()


def test_appends_of_other_threads_and_replicated_appends_are_written_at_once(tmp_path, clock):
    window = DeferredWrites()
    log = open_log(tmp_path / "t-0", clock, window)
    window.open()
    other = threading.Thread(target=lambda: append(log, batch(2)))
    other.start()
    other.join()
    assert file_size(log) == log.segments[-1].size  # the window is this thread's only
    assert log.written_size(log.segments[-1]) == log.segments[-1].size
    append(log, batch(1))
    assert log.written_size(log.segments[-1]) == file_size(log) < log.segments[-1].size
    window.write()
    assert [offset for offset, _ in read_all(log)] == [0, 1, 2]


@pytest.fixture
def file_size_limit():
    """Set this process's RLIMIT_FSIZE (a real kernel refusal: writes past it fail with EFBIG; Python ignores the
    SIGXFSZ that comes with it); restored after the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    yield lambda limit: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_failed_write_keeps_the_bytes_until_a_later_operation_writes_them(tmp_path, clock, file_size_limit):
    window = DeferredWrites()
    log = open_log(tmp_path / "t-0", clock, window)
    append(log, batch(1, value_size=8192))
    written = file_size(log)
    window.open()
    for data in produced(20, value_size=500):
        append(log, data)
    file_size_limit(written + 1000)
    with pytest.raises(OSError):
        window.write()
    with pytest.raises(OSError):  # a read tries them again first, and is refused while the disk refuses them
        log.read(0, 1 << 20)
    with pytest.raises(OSError):  # so is an append outside the window, which changes nothing
        append(log, batch(1))
    assert log.log_end_offset == 21
    file_size_limit(resource.RLIM_INFINITY)
    append(log, batch(1))  # the held bytes first, then its own right after them: no hole for a crash to cut at
    assert log.log_end_offset == 22
    with open(log.segments[-1].log_path, "rb") as file:
        assert [header.base_offset for header in validate_batches(file.read())] == list(range(22))
    assert [offset for offset, _ in read_all(log)] == list(range(22))
    log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=False, now_ms=clock)
    assert [offset for offset, _ in read_all(reopened)] == list(range(22))
