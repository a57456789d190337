"""The cleaner's key -> last offset map: Kafka's SkimpyOffsetMap, 24 bytes a slot in one flat bytearray.

The design sizes the cleaner by this map ("exactly 24 bytes an entry"), so it is not a dict (whose entries, with
their key and int objects, cost 100+ bytes each): a slot is the key's 16-byte MD5 digest followed by the offset as
a little-endian int64, slots live side by side in a `bytearray`, and an all-zero digest marks a free slot. Keys are
never stored, only their digests, exactly as Kafka does; two keys sharing a digest (odds 2**-128) would be taken
for one. The table has a power-of-two number of slots and resolves collisions by double hashing (the low 64 bits
of the digest pick the first slot, the high 64 bits, made odd, the stride), which keeps probe chains short at
Kafka's load factor of 0.9 where linear probing would walk dozens of slots.

The probes, the digests and the cleaner's per-record decision run in C (storage._offset_map) over a batch's bytes
and the int64 columns records.walk finds in them: in Python each put or get was an MD5 call, a slice and a probe
loop of Python steps (2 us a put at load factor 0.9), which made mapping and filtering most of a cleaning.
"""

from __future__ import annotations

from array import array

from odradek.storage import _offset_map

SLOT_BYTES = 24
LOAD_FACTOR = 0.9
_ONE_RECORD = array("q", [0])  # the start and offset delta of a lone key


class OffsetMap:
    """Digest-of-key -> offset, at most `max_entries` keys in `slots` slots (a power of two)."""

    def __init__(self, slots: int):
        if slots < 2 or slots & (slots - 1):
            raise ValueError(f"slot count {slots} is not a power of two >= 2")
        self.slots = slots
        self.max_entries = max(1, int(slots * LOAD_FACTOR))
        self.size = 0
        self.latest_offset = -1
        self._table = bytearray(slots * SLOT_BYTES)

    @classmethod
    def for_entries(cls, entries: int, memory_bytes: int) -> "OffsetMap":
        """The smallest map holding `entries` keys at the load factor, but no more than `memory_bytes` of slots."""
        needed = int(entries / LOAD_FACTOR) + 1
        wanted = 1 << max(1, (needed - 1).bit_length())  # the power of two >= needed
        allowed = 1 << max(1, (memory_bytes // SLOT_BYTES).bit_length() - 1)  # the power of two <= the budget
        return cls(min(wanted, allowed))

    @property
    def memory_bytes(self) -> int:
        return len(self._table)

    @property
    def is_full(self) -> bool:
        return self.size >= self.max_entries

    @property
    def utilization(self) -> float:
        """Share of `max_entries` in use (Kafka's buffer utilization)."""
        return self.size / self.max_entries

    def put_records(self, data, key_starts, key_lengths, base_offset: int, offset_deltas) -> None:
        """Record base_offset + delta as the latest offset of each non-null key data[start:start + length], in
        order (offsets are put in increasing order); OverflowError, with the keys before it put, at a new key that
        finds the map full."""
        added, last, full = _offset_map.put(self._table, self.max_entries - self.size, data, key_starts, key_lengths,
                                            base_offset, offset_deltas)
        self.size += added
        if last >= 0:
            self.latest_offset = last
        if full:
            raise OverflowError(f"offset map is full at {self.size} entries")

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the latest offset of `key`."""
        self.put_records(key, _ONE_RECORD, array("q", [len(key)]), offset, _ONE_RECORD)

    def get(self, key: bytes) -> int:
        """The latest offset put for `key`, or -1."""
        return _offset_map.get(self._table, key)

    def retained(self, data, fields, base_offset: int, end_offset: int, tombstones_expired: bool
                 ) -> tuple[memoryview, int, int]:
        """The cleaner's decision for the records of a data batch at `base_offset` (`fields`: their columns from
        records.walk over `data`): the indexes of those that stay, how many went for having no key, and how many
        that stay are tombstones. A record from `end_offset` on stays unjudged; another stays if no later offset is
        mapped for its key and it is not a tombstone while `tombstones_expired`."""
        kept, keyless, tombstones = _offset_map.retained(self._table, data, fields.key_starts, fields.key_lengths,
                                                         fields.value_lengths, base_offset, fields.offset_deltas,
                                                         end_offset, tombstones_expired)
        return memoryview(kept).cast("q"), keyless, tombstones
