"""Crash recovery: the two corruptions of Kafka's design (a lost tail and nonsense bytes added), index damage,
stray files, and restarts after clean and unclean shutdowns."""

from __future__ import annotations

import os
import random
import re
import shutil

import pytest

from odradek.config import LogConfig
from odradek.records.batch import encode_batch, Record
from odradek.storage.leader_epochs import LEADER_EPOCH_CHECKPOINT
from odradek.storage.log import Log
from odradek.storage.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, segment_file_name

from .conftest import append, append_raw, batch, read_all

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=300)


def crashed_log(directory, clock, batches: int = 40, seed: int = 1) -> tuple[list[tuple[int, int, int]], list]:
    """Write batches of random sizes and leave the log without closing it, as a crash would (the active indexes
    stay preallocated). Returns (first offset, last offset, end position in the active segment) per batch of the
    active segment, and every (offset, value) written."""
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    rng = random.Random(seed)
    for index in range(batches):
        append(log, batch(rng.randint(1, 5), value_size=rng.randint(10, 300), timestamp=1000 + index, tag=index))
    active = log.segments[-1]
    boundaries = [(header.base_offset, header.last_offset, position + header.size)
                  for position, header in active.iter_headers(0)]
    everything = read_all(log)
    assert len(log.segments) > 3
    return boundaries, everything


@pytest.fixture
def crashed(tmp_path, clock):
    directory = tmp_path / "original" / "topic-0"
    boundaries, everything = crashed_log(directory, clock)
    return directory, boundaries, everything


def reopen(directory, clock, **kwargs) -> Log:
    kwargs.setdefault("clean_shutdown", False)
    return Log.open(directory, CONFIG, now_ms=clock, **kwargs)


def active_log_file(directory):
    return max(path for path in directory.iterdir() if path.suffix == ".log")


def test_lost_tail_at_random_cut_points(tmp_path, clock, crashed):
    directory, boundaries, everything = crashed
    active = active_log_file(directory)
    active_base = int(active.stem)
    size = active.stat().st_size
    rng = random.Random(11)
    cuts = sorted({0, 1, 60, 61, size - 1} | {rng.randrange(size) for _ in range(12)})
    for cut in cuts:
        copy = tmp_path / f"cut-{cut}" / "topic-0"
        shutil.copytree(directory, copy)
        os.truncate(copy / active.name, cut)
        log = reopen(copy, clock)
        whole = [b for b in boundaries if b[2] <= cut]
        expected_end = whole[-1][1] + 1 if whole else active_base
        assert log.log_end_offset == expected_end, cut
        assert read_all(log) == [record for record in everything if record[0] < expected_end]
        assert (copy / active.name).stat().st_size == (whole[-1][2] if whole else 0)
        result = append(log, batch(2, tag=999))
        assert result.first_offset == expected_end
        assert read_all(log)[-2:] == [(expected_end, b"999:0:xxxx"), (expected_end + 1, b"999:1:xxxx")]
        assert log.recovery_point == 0  # recovery fsyncs nothing, so the checkpoint's recovery point stands
        log.close()


@pytest.mark.parametrize("garbage", ["zeros", "random", "fake header"])
def test_nonsense_appended_is_cut_off(tmp_path, clock, crashed, garbage):
    directory, boundaries, everything = crashed
    active = active_log_file(directory)
    size = active.stat().st_size
    rng = random.Random(5)
    if garbage == "zeros":
        junk = bytes(4096)
    elif garbage == "random":
        junk = rng.randbytes(5000)
    else:  # a plausible header claiming the next offsets, with a wrong CRC
        junk = bytearray(batch(3, base_offset=boundaries[-1][1] + 1))
        junk[-1] ^= 0xFF
        junk = bytes(junk)
    with open(active, "ab") as file:
        file.write(junk)
    log = reopen(directory, clock)
    assert read_all(log) == everything
    assert active.stat().st_size == size
    assert append(log, batch(1)).first_offset == everything[-1][0] + 1


def test_corrupt_batch_in_an_earlier_segment_cuts_the_log_there(tmp_path, clock, crashed):
    directory, _, everything = crashed
    logs = sorted(path for path in directory.iterdir() if path.suffix == ".log")
    victim = logs[1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x55
    victim.write_bytes(bytes(data))
    log = reopen(directory, clock)
    remaining = read_all(log)
    assert remaining == everything[:len(remaining)]
    assert int(logs[1].stem) <= log.log_end_offset < int(logs[2].stem)
    assert [path.name for path in directory.iterdir() if path.suffix == ".log"] == [logs[0].name, logs[1].name]
    assert append(log, batch(1)).first_offset == remaining[-1][0] + 1


def test_recovery_starts_at_the_recovery_point_segment(tmp_path, clock, crashed):
    directory, _, everything = crashed
    logs = sorted(path for path in directory.iterdir() if path.suffix == ".log")
    with open(logs[-1], "ab") as file:
        file.write(b"\xff" * 100)
    log = reopen(directory, clock, recovery_point=int(logs[-1].stem) + 1)
    assert read_all(log) == everything
    assert log.recovery_point == int(logs[-1].stem) + 1  # checked, not fsynced: the next crash checks it again


def test_clean_restart_keeps_everything_and_state(tmp_path, clock):
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    for index in range(30):
        append(log, batch(3, value_size=100, timestamp=5000 + (index * 37) % 500, tag=index))
    before = (read_all(log), log.log_end_offset, log.max_timestamp(), log.offset_for_timestamp(5250),
              [s.base_offset for s in log.segments])
    log.close()
    index_files = {path.name: path.read_bytes() for path in directory.iterdir() if path.suffix != ".log"}
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert (read_all(log), log.log_end_offset, log.max_timestamp(), log.offset_for_timestamp(5250),
            [s.base_offset for s in log.segments]) == before
    log.close()
    assert {path.name: path.read_bytes() for path in directory.iterdir() if path.suffix != ".log"} == index_files


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage", "zeros"])
def test_damaged_indexes_are_rebuilt_identically(tmp_path, clock, damage):
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    for index in range(40):
        append(log, batch(2, value_size=150, timestamp=1000 + index, tag=index))
    everything = read_all(log)
    log.close()
    originals = {path.name: path.read_bytes() for path in directory.iterdir()
                 if path.suffix not in (".log", ".snapshot")}  # producer snapshots are not indexes
    for name, content in originals.items():
        path = directory / name
        if damage == "delete":
            path.unlink()
        elif damage == "truncate":
            path.write_bytes(content[:-3])
        elif damage == "garbage":
            path.write_bytes(content[:8] + bytes(range(200, 240)) + content[8:])
        else:
            path.write_bytes(content + bytes(96))  # an untrimmed preallocated tail
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert read_all(log) == everything
    assert log.offset_for_timestamp(1020) == (40, 1020)
    log.close()
    assert {path.name: path.read_bytes() for path in directory.iterdir()
            if path.suffix not in (".log", ".snapshot")} == originals


def test_stray_files(tmp_path, clock):
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    for base in (0, 10, 20):
        append_raw(log, encode_batch([Record(i, 100 + base + i, b"k%d" % i, b"old") for i in range(10)],
                                     base_offset=base))
        log.roll()
    log.close()
    (directory / (segment_file_name(30, ".log") + DELETED_SUFFIX)).write_bytes(b"x")
    (directory / (segment_file_name(0, ".log") + CLEANED_SUFFIX)).write_bytes(b"x")
    (directory / segment_file_name(99, ".index")).write_bytes(b"")  # an index without its log
    # An interrupted compaction: the cleaned segment for 0..19 was renamed to .swap, the old ones not yet removed.
    compacted = encode_batch([Record(9, 109, b"k9", b"new"), Record(19, 129, b"k9", b"newer")], base_offset=0)
    (directory / (segment_file_name(0, ".log") + SWAP_SUFFIX)).write_bytes(compacted)
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    names = sorted(os.listdir(directory))
    assert not [name for name in names if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX))]
    assert segment_file_name(99, ".index") not in names
    assert [s.base_offset for s in log.segments] == [0, 20, 30]
    records = read_all(log)
    assert records[:2] == [(9, b"new"), (19, b"newer")] and records[2] == (20, b"old")


def test_start_offset_beyond_a_lost_tail_restarts_the_log_there(tmp_path, clock):
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    append(log, batch(5))
    os.truncate(active_log_file(directory), 10)
    log = reopen(directory, clock, log_start_offset=3)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert append(log, batch(1)).first_offset == 3


@pytest.mark.parametrize("damage", ["torn write", "nonsense"])
def test_unclean_flag_alone_triggers_recovery(tmp_path, clock, damage):
    """Indexes intact (closed cleanly, then the tail damaged): only the unclean-shutdown flag finds the damage."""
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    for index in range(12):
        append(log, batch(2, value_size=100, tag=index))
    everything = read_all(log)
    log.close()
    active = active_log_file(directory)
    if damage == "torn write":
        os.truncate(active, active.stat().st_size - 30)
        everything = everything[:-2]
    else:
        with open(active, "ab") as file:
            file.write(random.Random(2).randbytes(700))
    log = reopen(directory, clock, recovery_point=everything[-1][0] + 1)
    assert read_all(log) == everything
    assert append(log, batch(1)).first_offset == everything[-1][0] + 1


def test_preallocated_segments_are_trimmed_on_roll_and_recovered_after_a_crash(tmp_path, clock):
    config = LogConfig(segment_bytes=3000, preallocate=True)
    directory = tmp_path / "topic-0"
    log = Log.open(directory, config, clean_shutdown=True, now_ms=clock)
    for index in range(10):
        append(log, batch(2, value_size=200, tag=index))
    first, active = log.segments[0], log.segments[-1]
    assert len(log.segments) > 1
    assert first.log_path.stat().st_size == first.size
    assert active.log_path.stat().st_size == 3000 > active.size
    everything = read_all(log)
    log = Log.open(directory, config, clean_shutdown=False, now_ms=clock)  # the zero-filled tail is cut
    assert read_all(log) == everything
    assert log.segments[-1].log_path.stat().st_size == log.segments[-1].size


def test_a_torn_tail_behind_a_clean_marker_is_still_recovered(tmp_path, clock):
    """The clean-shutdown marker is trusted, but the headers after the last index entry are read anyway: if they
    do not end at the end of the file, the segment is recovered rather than served with a partial batch."""
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    for index in range(5):
        append(log, batch(2, value_size=100, tag=index))
    everything = read_all(log)
    log.close()
    active = active_log_file(directory)
    os.truncate(active, active.stat().st_size - 7)
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert read_all(log) == everything[:-2]
    assert append(log, batch(1)).first_offset == everything[-2][0]


def test_a_partition_never_written_to_stops_and_reopens_as_its_log_file_alone(tmp_path, clock):
    """A new partition's first clean stop writes no index file and no producer snapshot (their fsyncs were most of
    stopping a broker that had just created thousands): an empty log loads the same without them."""
    directory = tmp_path / "topic-0"
    files = lambda: sorted(path.suffix for path in directory.iterdir() if path.name != LEADER_EPOCH_CHECKPOINT)
    Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock).close()
    assert files() == [".log"]
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    append(log, batch(2, value_size=20, timestamp=5000, tag=0))
    log.close()
    assert files() == [".index", ".log", ".snapshot", ".timeindex"]


def test_index_files_appear_with_their_first_entry_and_a_short_log_reopens_without_them(tmp_path, clock):
    """Indexes are created lazily (Kafka's LazyIndex): a new partition is one .log file; the index files appear
    once the log passes index.interval.bytes. A log too short for an entry reopens cleanly without them, with its
    end offset and max timestamp intact and nothing rebuilt."""
    directory = tmp_path / "topic-0"
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    append(log, batch(2, value_size=20, timestamp=5000, tag=0))
    files = lambda: sorted(path.suffix for path in directory.iterdir() if path.name != LEADER_EPOCH_CHECKPOINT)
    assert files() == [".log"]
    log.close()  # a clean close seals the indexes, as a roll does
    assert files() == [".index", ".log", ".snapshot", ".timeindex"]
    for path in directory.glob("*index"):
        path.unlink()
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert not list(directory.glob("*index"))  # nothing to rebuild: the log is shorter than one index interval
    assert (log.log_end_offset, log.segments[-1].max_timestamp) == (2, 5000)
    while log.segments[-1].size <= CONFIG.index_interval_bytes:
        append(log, batch(1, value_size=100, timestamp=6000, tag=1))
    append(log, batch(1, value_size=100, timestamp=7000, tag=2))
    assert (directory / segment_file_name(0, ".index")).stat().st_size > 0  # opened, preallocated, written
    log.close()
    log = Log.open(directory, CONFIG, clean_shutdown=True, now_ms=clock)
    assert log.offset_for_timestamp(7000)[0] == log.log_end_offset - 1
    log.close()



def test_a_cut_log_warns_with_the_bytes_and_records_it_dropped(tmp_path, clock, crashed, caplog):
    """A batch cut short in the first segment, recovery from offset 0: the cut and the later segments removed with
    it are one WARN line with their bytes and records (the cut-short batch's records counted too)."""
    directory, boundaries, everything = crashed
    segment_files = sorted(path for path in directory.iterdir() if path.suffix == ".log")
    bytes_before = sum(path.stat().st_size for path in segment_files) - 5
    os.truncate(segment_files[0], segment_files[0].stat().st_size - 5)
    with caplog.at_level("WARNING", logger="odradek.storage"):
        log = reopen(directory, clock)
    kept = log.log_end_offset
    assert [path for path in directory.iterdir() if path.suffix == ".log"] == [segment_files[0]]
    [warning] = [record for record in caplog.records if "Corruption found" in record.getMessage()]
    assert warning.levelname == "WARNING"
    assert re.fullmatch(
        rf"Corruption found in segment {re.escape(str(segment_files[0]))} at byte {segment_files[0].stat().st_size} "
        rf"\(a batch of \d+ bytes with \d+ left in the file\): truncating to offset {kept}, "
        rf"dropping {bytes_before - segment_files[0].stat().st_size} bytes and {len(everything) - kept} records "
        rf"\({len(segment_files) - 1} later segment\(s\) removed\)", warning.getMessage()), warning.getMessage()
    log.close()
