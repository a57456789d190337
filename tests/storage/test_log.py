"""The partition log in normal operation: appends, reads, rolls, indexes, timestamps, flushing, retention,
DeleteRecords, truncation."""

from __future__ import annotations

import os
import random
import threading

import pytest

from odradek.config import LogConfig
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import decode_batch, parse_header, validate_batches
from odradek.storage.log import Log
from odradek.storage.segment import DELETED_SUFFIX, RESERVE_CHUNK_BYTES, RESERVE_MIN_WRITE

from .conftest import append, append_raw, batch, read_all


def open_log(tmp_path, clock, **config) -> Log:
    return Log.open(tmp_path / "topic-0", LogConfig(**config), clean_shutdown=True, now_ms=clock)


def test_append_assigns_dense_offsets_and_reads_back(tmp_path, clock):
    log = open_log(tmp_path, clock)
    first = append(log, batch(3, tag=0))
    second = append(log, batch(2, tag=1) + batch(4, tag=2))
    assert (first.first_offset, first.last_offset, first.log_append_time_ms) == (0, 2, -1)
    assert (second.first_offset, second.last_offset, second.log_start_offset) == (3, 8, 0)
    assert log.log_end_offset == 9
    records = read_all(log)
    assert [offset for offset, _ in records] == list(range(9))
    assert [value[:4] for _, value in records][3:5] == [b"1:0:", b"1:1:"]
    region = log.read(4, 1)  # inside the second batch
    header = parse_header(region.read_bytes())
    assert (header.base_offset, header.last_offset, region.length) == (3, 4, header.size)
    assert log.read(9, 100) is None
    for bad in (-1, 10):
        with pytest.raises(KafkaError) as info:
            log.read(bad, 100)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_produced_batch_is_stamped_on_disk_and_the_request_bytes_stay_as_they_came(tmp_path, clock):
    """One CreateTime batch (Produce v3+) is written as its stamped first bytes and the rest of the request's own
    bytes (no copy of the batch): on disk it has its offset and the leader's epoch and a valid CRC; the frame it
    came in is untouched, so the same bytes appended again land at the next offsets."""
    log = open_log(tmp_path, clock)
    frame = bytearray(b"\xee" * 7 + batch(3, tag=0) + b"\xee" * 5)
    received = memoryview(frame)[7:-5]  # as the network hands a batch on: a view into the request frame
    before = bytes(frame)
    log.append(received, validate_batches(received), partition_leader_epoch=4)
    log.append(received, validate_batches(received), partition_leader_epoch=5)
    assert bytes(frame) == before
    on_disk = log.read(0, 1 << 20).read_bytes()
    headers = validate_batches(on_disk)  # checks each batch's CRC
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 5)]
    assert [offset for offset, _ in read_all(log)] == list(range(6))


def test_read_returns_at_least_one_whole_batch_then_what_fits(tmp_path, clock):
    log = open_log(tmp_path, clock)
    sizes = []
    for index in range(5):
        data = batch(1, value_size=1000 * (index + 1), tag=index)
        sizes.append(len(data))
        append(log, data)
    assert log.read(0, 10).length == sizes[0]  # larger than max_bytes, still whole
    assert log.read(0, sizes[0] + sizes[1] - 1).length == sizes[0]
    assert log.read(0, sizes[0] + sizes[1]).length == sizes[0] + sizes[1]
    assert log.read(2, 10**9).length == sum(sizes[2:])


def test_read_stops_before_max_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for index in range(4):
        append(log, batch(2, tag=index))
    region = log.read(0, 10**6, max_offset=4)
    assert [h.base_offset for h in _headers(region.read_bytes())] == [0, 2]
    assert log.read(4, 10**6, max_offset=4) is None
    assert [h.base_offset for h in _headers(log.read(3, 10**6, max_offset=5).read_bytes())] == [2, 4]


def _headers(data: bytes):
    position, out = 0, []
    while position < len(data):
        header = parse_header(data, position)
        out.append(header)
        position += header.size
    return out


def _batches_on_disk(log: Log) -> list[list[tuple[bytes, object]]]:
    """Each segment's batches as (bytes, header), read from its file in one go."""
    segments = []
    for segment in log.segments:
        data = segment.log_path.read_bytes()[:segment.size]
        batches, position = [], 0
        while position < len(data):
            header = parse_header(data, position)
            batches.append((data[position:position + header.size], header))
            position += header.size
        segments.append(batches)
    return segments


def _expected_read(segments, offset: int, max_bytes: int, max_offset: int | None) -> bytes:
    """Log.read's answer by its definition: from the first batch reaching `offset`, at least that batch, then whole
    batches of the same segment while they fit in `max_bytes`, none starting at or past `max_offset`."""
    for batches in segments:
        reaching = [i for i, (_, header) in enumerate(batches) if header.last_offset >= offset]
        if not reaching:
            continue
        first = reaching[0]
        if max_offset is not None and batches[first][1].base_offset >= max_offset:
            return b""
        taken, total = [batches[first][0]], len(batches[first][0])
        for data, header in batches[first + 1:]:
            if total + len(data) > max_bytes or (max_offset is not None and header.base_offset >= max_offset):
                break
            taken.append(data)
            total += len(data)
        return b"".join(taken)
    return b""


def test_reads_between_index_entries_match_their_definition(tmp_path, clock):
    """Reads outside the active segment's in-memory tail hop over the batch headers between index entries, a file
    chunk (HEADER_CHUNK_BYTES) at a time: batches of scattered sizes, some larger than a chunk, read at every
    offset with limits that end inside, between and across chunks."""
    rng = random.Random(18)
    log = open_log(tmp_path, clock, segment_bytes=60_000, index_interval_bytes=3000)
    for index in range(160):
        append(log, batch(rng.randint(1, 4), value_size=rng.choice([10, 150, 900, 4000, 11_000]), tag=index))
    assert len(log.segments) >= 4
    segments = _batches_on_disk(log)
    for offset in range(log.log_end_offset):
        whole = len(_expected_read(segments, offset, 10**9, None))
        exact = len(_expected_read(segments, offset, rng.randint(1, whole), None))  # ends on a batch boundary
        for max_bytes in (1, exact - 1, exact, exact + 1, rng.randint(100, 20_000), 10**6):
            max_offset = rng.choice([None, offset + rng.randint(1, 40)])
            region = log.read(offset, max_bytes, max_offset=max_offset)
            got = region.read_bytes() if region is not None else b""
            assert got == _expected_read(segments, offset, max_bytes, max_offset), (offset, max_bytes, max_offset)


def test_roll_by_size_and_reads_across_segments(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=1000, index_interval_bytes=100)
    for index in range(40):
        append(log, batch(2, value_size=50, tag=index))
    assert len(log.segments) > 5
    assert all(segment.size <= 1000 for segment in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    for previous, segment in zip(log.segments, log.segments[1:]):
        assert previous.next_offset == segment.base_offset
    assert [offset for offset, _ in read_all(log, max_bytes=300)] == list(range(80))
    names = sorted(os.listdir(log.directory))
    assert names[:3] == ["00000000000000000000.index", "00000000000000000000.log",
                         "00000000000000000000.timeindex"]


def test_read_continues_into_next_segment_over_a_gap(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=150)
    append_raw(log, batch(2, base_offset=0))
    append_raw(log, batch(2, base_offset=10))  # offsets 2..9 do not exist (compacted away); rolls by size
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert parse_header(log.read(5, 100).read_bytes()).base_offset == 10
    with pytest.raises(KafkaError):
        append_raw(log, batch(1, base_offset=11))  # below the log end offset 12


def test_roll_by_time_uses_record_timestamps_then_clock(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=100)
    append(log, batch(1, timestamp=5000))
    append(log, batch(1, timestamp=5100))  # exactly segment.ms: not yet
    assert len(log.segments) == 1
    append(log, batch(1, timestamp=5101))
    assert [s.base_offset for s in log.segments] == [0, 2]
    append(log, batch(1, timestamp=4000))  # older than the segment's first batch: no roll
    log.roll()
    append(log, batch(1, timestamp=-1))  # no timestamps: the segment ages by its creation time
    append(log, batch(1, timestamp=-1), now_ms=clock.now + 100)
    append(log, batch(1, timestamp=-1), now_ms=clock.now + 101)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]


def test_full_index_rolls(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_index_bytes=24, index_interval_bytes=0)  # 3 offset entries
    for index in range(10):
        append(log, batch(1, timestamp=1000 + index))
    assert all(len(segment.offset_index) <= 3 for segment in log.segments)
    assert len(log.segments) >= 3
    assert [offset for offset, _ in read_all(log)] == list(range(10))


def test_a_clean_close_rewrites_no_file_when_nothing_changed_since_the_open(tmp_path, clock):
    """A broker with many quiet partitions stops without rewriting (and fsyncing) each one's indexes and producer
    snapshot; a partition written to since it opened still gets them."""
    log = open_log(tmp_path, clock, segment_bytes=4000, index_interval_bytes=200)
    for index in range(30):
        append(log, batch(3, value_size=40, tag=index, timestamp=1_000_000 + index))
    log.close()

    def files() -> dict[str, tuple[int, int, int]]:
        return {name: (stat.st_ino, stat.st_size, stat.st_mtime_ns)
                for name in os.listdir(log.directory) if (stat := os.stat(log.directory / name))}

    for name in os.listdir(log.directory):  # an old mtime, which any rewrite would replace
        os.utime(log.directory / name, ns=(10**9, 10**9))
    before = files()
    assert {name.rsplit(".", 1)[1] for name in before} >= {"log", "index", "timeindex", "snapshot"}
    reopened = open_log(tmp_path, clock, segment_bytes=4000, index_interval_bytes=200)
    assert [offset for offset, _ in read_all(reopened, 45)] == list(range(45, 90))  # found through the indexes
    reopened.close()
    assert files() == before
    written_to = open_log(tmp_path, clock, segment_bytes=4000, index_interval_bytes=200)
    append(written_to, batch(3, value_size=40, tag=99, timestamp=2_000_000))
    written_to.close()
    after = files()
    active = max(name for name in after if name.endswith(".timeindex"))
    assert after[active] != before[active] and "00000000000000000093.snapshot" in after


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_an_active_segment_reopened_with_a_full_index_rolls_at_the_next_append(tmp_path, clock, clean_shutdown):
    config = LogConfig(segment_index_bytes=24, index_interval_bytes=0)  # 3 offset entries (2 time entries)
    log = Log.open(tmp_path / "topic-0", config, clean_shutdown=True, now_ms=clock)
    for _ in range(4):  # the first batch gets no entry: each of the next three one (one timestamp: one time entry)
        append(log, batch(1, timestamp=1000))
    assert len(log.segments) == 1 and len(log.segments[0].offset_index) == 3
    log.close()
    log = Log.open(tmp_path / "topic-0", config, clean_shutdown=clean_shutdown, now_ms=clock)
    end = log.log_end_offset
    append(log, batch(1, timestamp=2000))
    assert [segment.base_offset for segment in log.segments] == [0, end]
    assert [offset for offset, _ in read_all(log)] == list(range(end + 1))


def test_index_files_are_preallocated_while_active_and_trimmed_on_roll(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_index_bytes=8000, index_interval_bytes=50)
    for index in range(20):
        append(log, batch(2, timestamp=1000 + index, value_size=40))
    active = log.segments[0]
    assert os.path.getsize(active.offset_index.path) == 8000
    assert os.path.getsize(active.time_index.path) == 7992  # whole 12-byte entries
    log.roll()
    assert os.path.getsize(active.offset_index.path) == 8 * len(active.offset_index) > 0
    assert os.path.getsize(active.time_index.path) == 12 * len(active.time_index) > 0
    log.close()


def allocated_bytes(path) -> int:
    return os.stat(path).st_blocks * 512


def test_large_writes_reserve_blocks_past_the_end_which_the_roll_and_the_close_give_back(tmp_path, clock):
    """A write of RESERVE_MIN_WRITE bytes or more reserves the segment's blocks to the end of its RESERVE_CHUNK_BYTES
    chunk (cheaper writes on ext4) without moving the file's end; small writes reserve nothing, and what the segment
    did not fill is freed when it rolls or the log closes."""
    log = open_log(tmp_path, clock, segment_bytes=3 * RESERVE_CHUNK_BYTES)
    append(log, batch(1, value_size=1000))
    first = log.segments[-1]
    assert allocated_bytes(first.log_path) < RESERVE_MIN_WRITE
    append(log, batch(1, value_size=RESERVE_MIN_WRITE))
    assert os.path.getsize(first.log_path) == first.size < RESERVE_MIN_WRITE + 2000
    assert allocated_bytes(first.log_path) >= RESERVE_CHUNK_BYTES
    everything = read_all(log)
    log.roll()
    assert RESERVE_MIN_WRITE < allocated_bytes(first.log_path) < first.size + 8192
    append(log, batch(1, value_size=2 * RESERVE_MIN_WRITE))
    second = log.segments[-1]
    assert allocated_bytes(second.log_path) >= RESERVE_CHUNK_BYTES
    everything += read_all(log)[len(everything):]
    log.close()
    assert allocated_bytes(second.log_path) < second.size + 8192
    log = open_log(tmp_path, clock, segment_bytes=3 * RESERVE_CHUNK_BYTES)
    assert read_all(log) == everything
    log.close()


def test_sparse_index_lookups_land_on_or_before_the_batch(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=200)
    rng = random.Random(7)
    for index in range(60):
        append(log, batch(rng.randint(1, 4), value_size=rng.randint(5, 120), tag=index))
    [segment] = log.segments
    positions = {header.base_offset: (position, header) for position, header in segment.iter_headers(0)}
    assert len(segment.offset_index) > 10
    for offset in range(log.log_end_offset):
        _, position = segment.offset_index.lookup(offset)
        found_position, header = segment.find_batch(offset)
        assert position <= found_position
        assert header.base_offset <= offset <= header.last_offset
        assert positions[header.base_offset][0] == found_position


def test_offset_for_timestamp_matches_brute_force(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=2000, index_interval_bytes=150)
    rng = random.Random(3)
    everything = []
    for index in range(80):
        count = rng.randint(1, 4)
        timestamps = [rng.randint(0, 5000) for _ in range(count)]
        result = append(log, batch(count, timestamps=timestamps, tag=index))
        everything += [(result.first_offset + i, ts) for i, ts in enumerate(timestamps)]
    assert len(log.segments) > 3
    for target in list(range(-5, 5100, 97)) + [ts for _, ts in everything[::7]]:
        expected = next(((o, ts) for o, ts in everything if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    best = max(ts for _, ts in everything)
    assert log.max_timestamp() == (next(o for o, ts in everything if ts == best), best)


def test_offset_for_timestamp_respects_log_start(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log, batch(3, timestamps=[10, 20, 30]))
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 30)


def test_log_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    result = append(log, batch(3, timestamp=5), now_ms=777_000)
    assert result.log_append_time_ms == 777_000
    header, records = decode_batch(log.read(0, 1000).read_bytes())
    assert header.timestamp_type == 1 and [r.timestamp for r in records] == [777_000] * 3
    assert log.max_timestamp() == (0, 777_000)


def test_size_limits(tmp_path, clock):
    """max.message.bytes per batch. (CreateTime bounds are Produce's check, per record: tests/broker/
    test_record_validation.py.)"""
    log = open_log(tmp_path, clock, max_message_bytes=500)
    append(log, batch(1, timestamp=clock.now))
    append(log, batch(1, timestamp=-1))
    with pytest.raises(KafkaError) as info:
        append(log, batch(1, value_size=600))
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 2


def test_flush_policies_move_the_recovery_point(tmp_path, clock):
    log = open_log(tmp_path / "a", clock, flush_messages=3)
    append(log, batch(2))
    assert log.recovery_point == 0
    append(log, batch(1))
    assert log.recovery_point == 3
    timed = open_log(tmp_path / "b", clock, flush_ms=1000)
    append(timed, batch(2))
    timed.flush_if_due(clock.now + 999)
    assert timed.recovery_point == 0
    timed.flush_if_due(clock.now + 1000)
    assert timed.recovery_point == 2
    default = open_log(tmp_path / "c", clock)
    append(default, batch(2))
    default.roll()
    append(default, batch(2))
    default.flush_if_due(clock.now)  # a rolled segment is flushed even under the default policy
    assert default.recovery_point == 2
    default.flush()
    assert default.recovery_point == 4


def test_retention_by_time_never_the_active_segment(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=1000, file_delete_delay_ms=500)
    for index in range(4):
        append(log, batch(2, timestamp=10_000 + index * 1000, tag=index))
        log.roll()
    append(log, batch(1, timestamp=1))  # the active segment: old but never removed
    assert log.apply_retention(11_000) == 0
    assert log.apply_retention(12_001) == 2  # largest timestamps 10_000 and 11_000 are > 1000 ms old
    assert log.log_start_offset == 4 == log.segments[0].base_offset
    assert log.apply_retention(10**9) == 2
    assert len(log.segments) == 1 and log.log_start_offset == 8
    deleted = [name for name in os.listdir(log.directory) if name.endswith(DELETED_SUFFIX)]
    assert len(deleted) == 12
    assert log.delete_expired_files(12_400) == 0
    assert log.delete_expired_files(12_501) == 2
    assert log.delete_expired_files(10**9 + 500) == 2
    assert not [name for name in os.listdir(log.directory) if name.endswith(DELETED_SUFFIX)]
    with pytest.raises(KafkaError):
        log.read(0, 100)


def test_retention_by_bytes_and_policy(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_bytes=3000, retention_ms=-1, segment_bytes=1000)
    for index in range(30):
        append(log, batch(1, value_size=200, tag=index))
    before = log.size_bytes
    removed = log.apply_retention(clock.now)
    assert removed > 0 and before > log.size_bytes
    assert 3000 <= log.size_bytes < 3000 + log.segments[0].size  # Kafka's rule: whole segments, never below
    compacted = open_log(tmp_path / "c", clock, retention_bytes=1, segment_bytes=1000, cleanup_policy=("compact",))
    for index in range(10):
        append(compacted, batch(1, value_size=200))
    assert compacted.apply_retention(clock.now) == 0


def test_region_stays_readable_after_its_segment_is_deleted(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=10, file_delete_delay_ms=1000)
    append(log, batch(3, timestamp=100))
    log.roll()
    append(log, batch(1, timestamp=10**9))
    region = log.read(0, 10**6)
    expected = region.read_bytes()
    assert log.apply_retention(10**6) == 1
    assert not log.segments[0].base_offset == 0
    assert region.read_bytes() == expected  # renamed to .deleted, descriptor still open
    log.delete_expired_files(10**6 + 1000)
    with pytest.raises(OSError):
        region.read_bytes()


def test_delete_records_before(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for index in range(3):
        append(log, batch(2, tag=index))
        log.roll()
    assert log.delete_records_before(3) == 3
    assert [s.base_offset for s in log.segments] == [2, 4, 6]
    with pytest.raises(KafkaError):
        log.read(2, 100)
    assert read_all(log)[0][0] == 2  # the batch holding offset 3 starts at 2
    assert log.delete_records_before(1) == 3
    assert log.delete_records_before(6) == 6 and [s.base_offset for s in log.segments] == [6]
    with pytest.raises(KafkaError) as info:
        log.delete_records_before(7)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_truncate_to(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=600, index_interval_bytes=50)
    for index in range(20):
        append(log, batch(2, value_size=60, timestamp=1000 + index, tag=index))
    assert len(log.segments) > 3
    log.truncate_to(17)  # inside the batch 16..17: the whole batch goes, the log ends at 17 as in Kafka
    assert log.log_end_offset == 17
    assert [offset for offset, _ in read_all(log)] == list(range(16))
    assert log.max_timestamp()[1] == 1007
    assert append(log, batch(1)).first_offset == 17
    log.truncate_to(0)
    assert log.log_end_offset == 0 and read_all(log) == []
    assert append(log, batch(2)).last_offset == 1
    log.delete_records_before(2)
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)


def test_update_config_and_delete_all(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log, batch(1))
    log.update_config(LogConfig(max_message_bytes=100))
    assert log.config.max_message_bytes == 100
    with pytest.raises(KafkaError):
        append(log, batch(1, value_size=200))
    log.delete_all()
    assert not log.directory.exists()


def test_readers_never_wait_for_or_trip_over_appends(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=4000, index_interval_bytes=100)
    append(log, batch(1))
    errors = []
    stop = threading.Event()

    def reader():
        try:
            while not stop.is_set():
                end = log.log_end_offset
                offset = random.randrange(log.log_start_offset, end)
                data = log.read(offset, 2000).read_bytes()
                header, _ = decode_batch(data)
                assert header.base_offset <= offset <= header.last_offset
        except Exception as error:  # noqa: BLE001 - reported to the main thread
            errors.append(error)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for index in range(400):
            append(log, batch(2, value_size=50, tag=index))
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert len(log.segments) > 5


@pytest.mark.parametrize("sealed", [False, True], ids=["active", "sealed"])
@pytest.mark.parametrize("index_interval_bytes", [150, 4096])
def test_region_boundaries_match_a_batch_by_batch_walk(tmp_path, clock, index_interval_bytes, sealed):
    """Reads jump through the offset index, or answer from the active segment's in-memory tail (the batches after
    its last index entry: most of it at 4096 bytes); the regions must equal what walking every header would give,
    whichever way they were found, in the active segment and once it is sealed."""
    log = open_log(tmp_path, clock, index_interval_bytes=index_interval_bytes)
    rng = random.Random(9)
    for index in range(120):
        append(log, batch(rng.randint(1, 3), value_size=rng.randint(5, 90), tag=index))
    if sealed:
        log.roll()
    segment = log.segments[0]
    batches = [(position, header) for position, header in segment.iter_headers(0)]
    end_offset = batches[-1][1].last_offset + 1
    for _ in range(300):
        offset = rng.randrange(end_offset)
        max_bytes = rng.randint(1, 4000)
        max_offset = rng.choice([None, rng.randrange(end_offset + 1)])
        first = next(i for i, (_, header) in enumerate(batches) if header.last_offset >= offset)
        start = batches[first][0]
        if max_offset is not None and batches[first][1].base_offset >= max_offset:
            assert log.read(offset, max_bytes, max_offset=max_offset) is None
            continue
        if batches[first][1].size > max_bytes:
            assert log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=False) is None
        end = start + batches[first][1].size
        for position, header in batches[first + 1:]:
            if (max_offset is not None and header.base_offset >= max_offset) or position + header.size - start > max_bytes:
                break
            end = position + header.size
        region = log.read(offset, max_bytes, max_offset=max_offset)
        assert (region.position, region.length) == (start, end - start)


def test_small_reads_cost_at_most_one_pread(tmp_path, clock, monkeypatch):
    """What a fetch costs in system calls: a read among the active segment's last batches (a consumer at the log
    end) is answered from memory, and a 1 KiB read of small batches anywhere else takes one pread for all the
    headers it hops over (it took one per batch: 6 for 1 KiB of 172-byte batches, up to 24 near the log end)."""
    log = open_log(tmp_path, clock)
    for index in range(400):
        append(log, batch(1, value_size=100, tag=index))
        if index == 199:
            log.roll()
    preads = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, size, position: preads.append(size) or real_pread(fd, size, position))
    end = log.log_end_offset
    for offset in range(end - 20, end):  # the tail: behind the active segment's last index entry
        region = log.read(offset, 1024)
        assert parse_header(region.read_bytes()[:61]).last_offset == offset
        del preads[:]  # read_bytes' own pread (the network shell sends with sendfile instead)
    assert log.read(end - 1, 1024, max_offset=end - 1) is None
    assert preads == []
    for offset in (0, 150, 250, 350):  # a sealed segment's, and the active one's before its tail
        region = log.read(offset, 1024)
        assert len(preads) <= 1, (offset, preads)
        size = len(batch(1, value_size=100))
        assert region.length == 1024 // size * size and parse_header(region.read_bytes()).base_offset == offset
        del preads[:]
