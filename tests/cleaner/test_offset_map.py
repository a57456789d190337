"""OffsetMap: the cleaner's 24-bytes-a-slot key -> offset table."""

from __future__ import annotations

import pytest

from odradek.storage.offset_map import LOAD_FACTOR, SLOT_BYTES, OffsetMap


def test_put_get_overwrite_and_missing():
    offsets = OffsetMap(1024)
    for index in range(900):
        offsets.put(b"key-%d" % index, index)
    offsets.put(b"key-7", 5000)
    assert offsets.size == 900 and offsets.latest_offset == 5000
    assert offsets.get(b"key-7") == 5000
    assert all(offsets.get(b"key-%d" % index) == index for index in range(900) if index != 7)
    assert offsets.get(b"absent") == -1 and offsets.get(b"") == -1


def test_full_map_refuses_a_new_key_but_takes_known_ones():
    offsets = OffsetMap(16)
    for index in range(offsets.max_entries):
        offsets.put(b"%d" % index, index)
    assert offsets.is_full and offsets.utilization == 1.0
    offsets.put(b"0", 99)
    assert offsets.get(b"0") == 99
    with pytest.raises(OverflowError):
        offsets.put(b"one too many", 100)


def test_sizing_follows_the_entries_and_never_exceeds_the_memory_budget():
    assert OffsetMap.for_entries(1000, 1 << 30).max_entries >= 1000
    small = OffsetMap.for_entries(10**6, 48_000)
    assert small.memory_bytes <= 48_000 and small.slots == 1024
    with pytest.raises(ValueError):
        OffsetMap(1000)


def test_a_full_map_costs_24_bytes_a_slot_and_under_27_a_key():
    offsets = OffsetMap(1 << 14)
    for index in range(offsets.max_entries):
        offsets.put(b"user-%d" % index, index)
    assert offsets.memory_bytes == SLOT_BYTES * offsets.slots
    assert offsets.memory_bytes / offsets.size < SLOT_BYTES / LOAD_FACTOR + 0.01
