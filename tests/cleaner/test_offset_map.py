"""OffsetMap: the cleaner's 24-bytes-a-slot key -> offset table."""

from __future__ import annotations

import hashlib
import os
from array import array

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


def test_a_slot_holds_the_keys_md5_and_its_offset_for_keys_of_every_padding_case():
    keys = [os.urandom(length) for length in [*range(130), 1000, 4096]]  # one, two and many 64-byte blocks
    offsets = OffsetMap(1 << 10)
    for offset, key in enumerate(keys):
        offsets.put(key, offset)
    table = bytes(offsets._table)
    for offset, key in enumerate(keys):
        slot = table.index(hashlib.md5(key).digest())
        assert slot % SLOT_BYTES == 0 and int.from_bytes(table[slot + 16:slot + SLOT_BYTES], "little") == offset


def test_records_put_from_columns_map_each_non_null_key_to_its_offset():
    data = b"aaBBBcc"
    offsets = OffsetMap(64)
    offsets.put_records(data, array("q", [0, 2, 0, 5, 5]), array("q", [2, 3, -1, 2, 2]), 100,
                        array("q", [0, 1, 2, 3, 4]))
    assert offsets.size == 3 and offsets.latest_offset == 104
    assert [offsets.get(key) for key in (b"aa", b"BBB", b"cc", b"")] == [100, 101, 104, -1]
    with pytest.raises(ValueError):  # a key past the end of the data
        offsets.put_records(data, array("q", [6]), array("q", [2]), 0, array("q", [0]))
