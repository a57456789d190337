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


# -- large windows, written by the writer thread ---------------------------------------------------------------

LARGE = 100_000  # three batches of it make a window the writer thread writes (WRITER_THREAD_MIN_BYTES)


def written_batches(log: Log) -> list[int]:
    """Base offsets of the batches in the active segment's file, as it is on disk."""
    with open(log.segments[-1].log_path, "rb") as file:
        return [header.base_offset for header in validate_batches(file.read())]


def appended_large(window: DeferredWrites, log: Log, count: int = 3, first_tag: int = 0) -> None:
    window.open()
    for index in range(count):
        append(log, batch(1, tag=first_tag + index, value_size=LARGE))


def busy_writer(window: DeferredWrites) -> threading.Event:
    """Keep the window's writer thread busy until the returned event is set (a job of our own queued before the
    writes to come, so that they are still in flight when the test looks)."""
    gate = threading.Event()
    window._writer.submit(gate.wait)
    return gate


def test_a_large_window_goes_to_the_writer_thread_and_its_future_says_when_it_is_written(tmp_path, clock):
    window = DeferredWrites()
    log = open_log(tmp_path / "t-0", clock, window)
    appended_large(window, log)
    [write] = window.write()
    write.result(10)
    assert file_size(log) == log.segments[-1].size and written_batches(log) == [0, 1, 2]
    appended_large(window, log, first_tag=3)
    gate = busy_writer(window)
    [write] = window.write()
    assert not write.done()
    assert log.written_size(log.segments[-1]) == file_size(log) < log.segments[-1].size  # the cleaner's bound
    gate.set()
    write.result(10)
    assert written_batches(log) == list(range(6))
    log.close()


def test_every_operation_but_a_deferred_append_waits_for_the_writer_threads_write(tmp_path, clock):
    window = DeferredWrites()
    log = open_log(tmp_path / "t-0", clock, window)
    appended_large(window, log)
    window.write()[0].result(10)
    appended_large(window, log, first_tag=3)
    gate = busy_writer(window)
    [write] = window.write()
    window.open()
    append(log, batch(1, tag=6))  # held behind the write in flight, without waiting for it
    assert not write.done()
    threading.Timer(0.3, gate.set).start()
    region = log.read(5, 1 << 20)  # waits for the write in flight, then writes what the window holds
    assert write.done()
    assert [h.base_offset for h in validate_batches(region.read_bytes())] == [5, 6]
    assert window.write() == ()  # nothing left to write
    assert written_batches(log) == list(range(7))
    gate = busy_writer(window)
    appended_large(window, log, first_tag=7)
    [write] = window.write()
    threading.Timer(0.3, gate.set).start()
    log.truncate_to(8)  # the write in flight lands first, then the cut: nothing of it after the new end
    assert write.done()
    assert written_batches(log) == list(range(8)) and file_size(log) == log.segments[-1].size
    log.close()


def test_a_written_only_read_takes_what_is_in_the_file_and_names_the_write_it_stopped_before(tmp_path, clock):
    window = DeferredWrites()
    log = open_log(tmp_path / "t-0", clock, window)
    appended_large(window, log)
    window.write()[0].result(10)
    window.open()
    for data in produced(5):  # small batches, written on the loop: the segment's in-memory tail
        append(log, data)
    assert window.write() == ()
    gate = busy_writer(window)
    window.open()
    append(log, batch(1, tag=8, value_size=3 * LARGE))  # one batch: the tail's columns hold it after the small ones
    [write] = window.write()

    def batches_read(offset: int) -> list[int] | None:
        region = log.read(offset, 1 << 30, written_only=True)
        if region is None:
            return None
        data = region.read_bytes()
        assert len(data) == region.length  # nothing of it past what is in the file
        return [h.base_offset for h in validate_batches(data)]

    try:
        assert batches_read(5) == [5, 6, 7]  # from the tail's columns
        assert batches_read(1) == list(range(1, 8))  # through the index and the file's headers
        assert batches_read(8) is None
        assert log.write_in_flight() is write and not write.done()  # no read waited for it
    finally:
        gate.set()
    write.result(10)
    assert log.write_in_flight() is None
    assert batches_read(8) == [8]
    log.close()


def test_a_failed_write_of_the_writer_thread_is_held_again_and_the_next_write_tries_it(tmp_path, clock,
                                                                                      file_size_limit):
    window = DeferredWrites()
    log = open_log(tmp_path / "t-0", clock, window, segment_index_bytes=4096)  # indexes preallocated below the limit
    append(log, batch(1, value_size=8192))
    file_size_limit(file_size(log) + LARGE + LARGE // 2)  # room for one large batch and half of the next
    appended_large(window, log, first_tag=1)
    [write] = window.write()
    with pytest.raises(OSError):
        write.result(10)
    window.open()
    append(log, batch(1, tag=4))  # held after the failed bytes, which are held again before it
    with pytest.raises(OSError):
        window.write()
    assert log.log_end_offset == 5
    file_size_limit(resource.RLIM_INFINITY)
    append(log, batch(1, tag=5))  # outside a window: everything held, in order, then its own
    assert written_batches(log) == list(range(6))
    log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=False, now_ms=clock)
    assert [offset for offset, _ in read_all(reopened)] == list(range(6))
