"""The cleaner on real Log objects: what it keeps, what it drops, how it chooses, and how its swap survives crashes."""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest

from odradek.records.batch import DELETE_HORIZON_BIT, Record, encode_batch, validate_batches
from odradek.storage.checkpoint import read_checkpoint
from odradek.storage.cleaner import CLEANER_CHECKPOINT, Cleaner, Throttler, cleanable_log
from odradek.storage.log import Log

from .conftest import (
    COMPACTED, NOW, TransactionalWriter, cleaner_for, fill, keyed_batch, last_offsets, produce, read_batches,
    read_records,
)


def expected_after_clean(written: dict[int, tuple], end_offset: int) -> dict[int, tuple]:
    """What a clean up to `end_offset` keeps: each key's last record below it, and everything from it on."""
    below = last_offsets({offset: pair for offset, pair in written.items() if offset < end_offset})
    return {offset: pair for offset, pair in written.items() if offset >= end_offset or offset in below.values()}


def as_written(log: Log) -> dict[int, tuple]:
    return {offset: (key, value) for offset, key, value in read_records(log)}


def test_keeps_the_last_value_of_every_key_at_its_offset_and_in_order(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    written = fill(log, rounds=20, keys=50)
    size_before, active = log.size_bytes, log.segments[-1]
    stats = manager_cleaner = cleaner_for(manager, clock)
    stats = manager_cleaner.clean_filthiest()
    assert stats.end_offset == active.base_offset and log.segments[-1] is active
    records = read_records(log)
    assert [offset for offset, _, _ in records] == sorted(expected_after_clean(written, stats.end_offset))
    assert all(written[offset] == (key, value) for offset, key, value in records)
    assert log.size_bytes < size_before / 10 and log.log_end_offset == max(written) + 1
    assert read_checkpoint(manager.log_dir / CLEANER_CHECKPOINT) == {("t", 0): stats.end_offset}
    assert manager_cleaner.clean_filthiest() is None  # nothing dirty is left


def test_cleaned_segments_are_grouped_and_cleaning_again_changes_nothing_but_the_layout(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    written = fill(log, rounds=20, keys=50)
    cleaner = cleaner_for(manager, clock)
    cleaner.clean_filthiest()
    written.update(fill(log, rounds=1, keys=5))  # a little dirt so that the log is chosen again
    log.roll()
    written.update(fill(log, rounds=1, keys=1))
    stats = cleaner.clean_filthiest()
    assert stats.segments_written < stats.segments_replaced  # the small cleaned segments were merged
    assert all(segment.size <= COMPACTED.segment_bytes for segment in log.segments)
    assert as_written(log) == expected_after_clean(written, stats.end_offset)


def test_readers_are_never_blocked_and_old_regions_stay_readable(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    written = fill(log, rounds=3, keys=600)
    keys = {key for key, _ in written.values()}
    region = log.read(0, 1 << 20)
    before = region.read_bytes()
    stop = threading.Event()
    reads, failures = [], []

    def read_constantly():
        while not stop.is_set():
            records = read_records(log)
            offsets = [offset for offset, _, _ in records]
            reads.append(len(records))
            if offsets != sorted(set(offsets)) or any(written[o] != (k, v) for o, k, v in records) \
                    or {key for _, key, _ in records} != keys:
                failures.append(offsets)
            time.sleep(0.001)

    reader = threading.Thread(target=read_constantly)
    reader.start()
    try:  # a small map: many partial cleanings, many swaps under the reader
        cleaner = cleaner_for(manager, clock, **{"log.cleaner.dedupe.buffer.size": 24 * 512})
        cleanings = 0
        while cleaner.clean_filthiest() is not None:
            cleanings += 1
    finally:
        stop.set()
        reader.join()
    assert not failures and len(reads) > 1 and cleanings > 1
    assert as_written(log) == expected_after_clean(written, log.segments[-1].base_offset)
    assert region.read_bytes() == before  # the replaced file is renamed *.deleted, not gone
    assert any(name.endswith(".log.deleted") for name in os.listdir(log.directory))


def test_tombstones_stay_until_their_delete_horizon_then_go(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    produce(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])
    produce(log, [(b"a", None), (b"b", b"2")])
    log.roll()
    produce(log, [(b"z", b"active")])
    cleaner = cleaner_for(manager, clock)
    cleaner.clean_filthiest()
    assert [(key, value) for _, key, value in read_records(log)] == [(b"c", b"1"), (b"a", None), (b"b", b"2"),
                                                                     (b"z", b"active")]
    header = next(header for header, records in read_batches(log) if any(r.value is None for r in records))
    assert header.attributes & DELETE_HORIZON_BIT and header.base_timestamp == NOW + COMPACTED.delete_retention_ms
    assert read_records(log)[1][0] == 3  # offsets unchanged
    clock.now += COMPACTED.delete_retention_ms - 1
    assert cleaner.clean_filthiest() is None  # not dirty, horizon not reached
    clock.now += 1
    assert cleaner.clean_filthiest() is not None  # chosen for its expired tombstones alone
    assert [(key, value) for _, key, value in read_records(log)] == [(b"c", b"1"), (b"b", b"2"), (b"z", b"active")]
    assert cleaner.clean_filthiest() is None


def test_min_compaction_lag_keeps_young_segments_dirty(manager, clock):
    config = dataclasses.replace(COMPACTED, min_compaction_lag_ms=60_000)
    log = manager.create("t", 0, config)
    fill(log, rounds=10, keys=50)
    cleaner = cleaner_for(manager, clock)
    assert cleaner.clean_filthiest() is None  # every record is younger than the lag
    clock.now += 60_001
    assert cleaner.clean_filthiest().end_offset == log.segments[-1].base_offset


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(manager, clock):
    config = dataclasses.replace(COMPACTED, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    log = manager.create("t", 0, config)
    fill(log, rounds=20, keys=50)
    cleaner = cleaner_for(manager, clock)
    cleaner.clean_filthiest()
    fill(log, rounds=1, keys=10)  # a little dirt, far below the ratio
    log.roll()
    produce(log, [(b"x", b"y")])
    assert cleaner.clean_filthiest() is None
    clock.now += 90_000
    assert cleaner.clean_filthiest() is not None
    assert cleaner.metrics()["max-compaction-delay-secs"] == pytest.approx(30.0)


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_compressed_batches_are_filtered_and_recompressed_with_their_codec(manager, clock, compression):
    log = manager.create("t", 0, COMPACTED)
    for round_ in range(5):
        produce(log, [(b"k%d" % i, b"v%d-%d" % (round_, i)) for i in range(30)], compression=compression)
    produce(log, [(b"k1", b"last")], compression=compression)
    log.roll()
    produce(log, [(b"x", b"y")])
    cleaner_for(manager, clock).clean_filthiest()
    headers = [header for header, _ in read_batches(log)]
    assert {header.compression for header in headers} == {compression, 0}
    final = {key: value for _, key, value in read_records(log)}
    assert final[b"k1"] == b"last" and final[b"k2"] == b"v4-2" and len(read_records(log)) == 31


@pytest.mark.parametrize("compression", [0, 3])
@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_records_kept_from_a_rewritten_batch_keep_their_headers_and_timestamps(manager, clock, compression,
                                                                                timestamp_type):
    log = manager.create("t", 0, COMPACTED)
    headers = [("trace", b"\x00\x01"), ("\udcff-not-utf-8", None), ("empty", b"")]  # a raw 0xff byte in a key
    records = [Record(index, NOW + (7 * index or 100), b"k%d" % (index % 4), b"v%d" % index,
                      headers if index % 2 else []) for index in range(10)]  # the latest timestamp goes
    batch = encode_batch(records, compression=compression, timestamp_type=timestamp_type)
    log.append(batch, validate_batches(batch))  # keys k0..k3: the last four records stay, the first six go
    log.roll()
    produce(log, [(b"x", b"y")])
    cleaner_for(manager, clock).clean_filthiest()
    (header, kept), _ = read_batches(log)
    assert header.compression == compression and header.timestamp_type == timestamp_type
    stamp = (lambda record: max(r.timestamp for r in records)) if timestamp_type else (lambda record: record.timestamp)
    assert kept == [Record(record.offset_delta, stamp(record), record.key, record.value, list(record.headers))
                    for record in records[6:]]


def test_emptied_batches_keep_only_each_producers_last_one(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    for sequence in (0, 1):
        data = keyed_batch([(b"a", b"p%d" % sequence)], producer_id=7, producer_epoch=3, base_sequence=sequence)
        log.append(data, validate_batches(data))
    produce(log, [(b"b", b"plain")])
    produce(log, [(b"a", b"later"), (b"b", b"later")])
    log.roll()
    produce(log, [(b"x", b"y")])
    cleaner_for(manager, clock).clean_filthiest()
    batches = read_batches(log)
    empty = [header for header, records in batches if not records]
    assert len(empty) == 1
    header = empty[0]
    assert (header.base_offset, header.last_offset_delta, header.producer_id, header.producer_epoch,
            header.base_sequence, header.record_count) == (1, 0, 7, 3, 1, 0)
    assert [(offset, value) for offset, _, value in read_records(log)] == [(3, b"later"), (4, b"later"), (5, b"y")]


def test_records_without_a_key_are_dropped_from_a_topic_that_became_compacted(manager, clock):
    log = manager.create("t", 0, dataclasses.replace(COMPACTED, cleanup_policy=("delete",)))
    data = encode_batch([Record(0, NOW, None, b"keyless"), Record(1, NOW, b"k", b"keyed")])
    log.append(data, validate_batches(data))
    log.roll()
    produce(log, [(b"x", b"y")])
    cleaner = cleaner_for(manager, clock)
    assert cleaner.clean_filthiest() is None  # delete-only topics are not the cleaner's
    log.update_config(COMPACTED)
    assert cleaner.clean_filthiest().keyless_records == 1
    assert [value for _, _, value in read_records(log)] == [b"keyed", b"y"]


def test_a_small_dedupe_buffer_cleans_in_steps_and_converges(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    written = fill(log, rounds=10, keys=300)
    cleaner = cleaner_for(manager, clock, **{"log.cleaner.dedupe.buffer.size": 24 * 256})  # 230 keys a pass
    stats = cleaner.clean_filthiest()
    assert stats.end_offset < log.segments[-1].base_offset and stats.map_utilization > 0.9
    assert as_written(log) == expected_after_clean(written, stats.end_offset)
    for _ in range(30):
        if cleaner.clean_filthiest() is None:
            break
    assert as_written(log) == expected_after_clean(written, log.segments[-1].base_offset)
    assert cleaner.metrics()["max-buffer-utilization-percent"] > 90


def test_records_past_a_full_maps_end_stay_unjudged_keyless_ones_too(manager, clock):
    log = manager.create("t", 0, dataclasses.replace(COMPACTED, cleanup_policy=("delete",)))
    for first in (0, 10):
        produce(log, [(b"k%d" % index, b"v") for index in range(first, first + 10)])
    data = encode_batch([Record(0, NOW, None, b"keyless"),
                         *(Record(index, NOW, b"k0", b"new") for index in range(1, 10))])
    log.append(data, validate_batches(data))  # offsets 20-29: ten more keys would not fit the map
    log.roll()
    produce(log, [(b"x", b"y")])
    log.update_config(COMPACTED)
    stats = cleaner_for(manager, clock, **{"log.cleaner.dedupe.buffer.size": 24 * 32}).clean_filthiest()
    assert stats.end_offset == 20 and stats.keyless_records == 0  # 28 keys fit: two batches, not three
    assert [offset for offset, _, _ in read_records(log)] == list(range(31))


def test_io_is_throttled(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    fill(log, rounds=10, keys=100)
    cleaner = cleaner_for(manager, clock, **{"log.cleaner.io.max.bytes.per.second": 100_000})
    started = time.monotonic()
    stats = cleaner.clean_filthiest()
    moved = stats.bytes_read + stats.bytes_written
    assert time.monotonic() - started >= 0.8 * moved / 100_000 > 0.5


def test_deleting_a_log_aborts_its_cleaning(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    fill(log, rounds=10, keys=100)
    cleaner = cleaner_for(manager, clock, **{"log.cleaner.io.max.bytes.per.second": 50_000})
    result = []
    thread = threading.Thread(target=lambda: result.append(cleaner.clean_filthiest()))
    thread.start()
    time.sleep(0.3)
    manager.delete_partition("t", 0)
    thread.join(5)
    assert not thread.is_alive() and result == [None] and not log.directory.exists()
    assert cleaner.metrics()["uncleanable-partitions-count"] == 0


def test_threads_clean_in_the_background_and_checkpoints_survive_a_restart(tmp_path, manager, clock):
    log = manager.create("t", 0, COMPACTED)
    written = fill(log, rounds=10, keys=20)
    cleaner = cleaner_for(manager, clock, **{"log.cleaner.threads": 2})
    cleaner.start()
    try:
        deadline = time.monotonic() + 10
        while not cleaner.checkpoints() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        cleaner.stop()
    assert cleaner.checkpoints() == {("t", 0): log.segments[-1].base_offset}
    assert as_written(log) == expected_after_clean(written, log.segments[-1].base_offset)
    metrics = cleaner.metrics()
    assert set(metrics) >= {"uncleanable-partitions-count", "max-clean-time-secs", "max-compaction-delay-secs",
                            "max-buffer-utilization-percent", "max-dirty-percent"}
    assert metrics["dead-thread-count"] == 0 and metrics["max-clean-time-secs"] > 0
    assert cleaner_for(manager, clock).clean_filthiest() is None  # a new cleaner reads the checkpoint


class Crash(BaseException):
    """Stands for the power going out just before a rename."""


@pytest.mark.parametrize("renames_before_crash", range(22))
def test_a_crash_at_any_step_of_the_swap_leaves_the_old_or_the_new_segments(manager, clock, monkeypatch,
                                                                            renames_before_crash):
    config = dataclasses.replace(COMPACTED, segment_bytes=100_000)
    log = manager.create("t", 0, config)
    written = {}
    for round_ in range(4):  # four segments that one cleaned segment replaces
        written.update(fill(log, rounds=5, keys=50))
        if round_ == 0:  # an aborted transaction whose emptied batch and marker stay: its producer's last writes
            writer = TransactionalWriter(log, producer_id=9)
            writer.send([(b"k1", b"aborted")])
            writer.end(commit=False)
        log.roll()
    written[produce(log, [(b"x", b"y")]).first_offset] = (b"x", b"y")
    [aborted] = log.aborted_transactions(0, log.log_end_offset)
    old = as_written(log)
    target = cleanable_log(("t", 0), log, None, clock())
    cleaned = expected_after_clean(written, target.first_uncleanable_offset)
    real_replace = os.replace
    renames = []

    def replace_then_crash(source, destination):
        if len(renames) == renames_before_crash:
            raise Crash()
        renames.append((os.path.basename(source), os.path.basename(destination)))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", replace_then_crash)
    try:
        Cleaner(1 << 20, Throttler(float("inf"), threading.Event()), threading.Event(), clock).clean(target)
        crashed = False
    except Crash:
        crashed = True
    monkeypatch.setattr(os, "replace", real_replace)
    reopened = Log.open(log.directory, config, clean_shutdown=False, now_ms=clock)
    names = os.listdir(log.directory)
    assert not [name for name in names if name.endswith((".cleaned", ".swap", ".deleted"))]
    after = as_written(reopened)
    committed = any(destination.endswith(".log.swap") for _, destination in renames)
    assert after == (cleaned if committed else old), (crashed, renames)
    assert reopened.log_end_offset == log.log_end_offset
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [aborted]
    if not crashed:
        assert renames_before_crash >= len(renames)  # the whole swap ran: no later step left to crash in
