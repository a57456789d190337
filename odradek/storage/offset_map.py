"""The cleaner's key -> last offset map: Kafka's SkimpyOffsetMap, 24 bytes a slot in one flat bytearray.

The design sizes the cleaner by this map ("exactly 24 bytes an entry"), so it is not a dict (whose entries, with
their key and int objects, cost 100+ bytes each): a slot is the key's 16-byte MD5 digest followed by the offset as
a little-endian int64, slots live side by side in a `bytearray`, and an all-zero digest marks a free slot. Keys are
never stored, only their digests, exactly as Kafka does; two keys sharing a digest (odds 2**-128) would be taken
for one. The table has a power-of-two number of slots and resolves collisions by double hashing (the low 64 bits
of the digest pick the first slot, the high 64 bits, made odd, the stride), which keeps probe chains short at
Kafka's load factor of 0.9 where linear probing would walk dozens of slots, each one a Python-level step.
"""

from __future__ import annotations

import hashlib
import struct

SLOT_BYTES = 24
LOAD_FACTOR = 0.9
_DIGEST_BYTES = 16
_EMPTY_DIGEST = bytes(_DIGEST_BYTES)
_OFFSET = struct.Struct("<q")
_SLOT = struct.Struct("<16sq")
_MASK64 = (1 << 64) - 1


class OffsetMap:
    """Digest-of-key -> offset, at most `max_entries` keys in `slots` slots (a power of two)."""

    def __init__(self, slots: int):
        if slots < 2 or slots & (slots - 1):
            raise ValueError(f"slot count {slots} is not a power of two >= 2")
        self.slots = slots
        self.max_entries = max(1, int(slots * LOAD_FACTOR))
        self.size = 0
        self.latest_offset = -1
        self._mask = slots - 1
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

    def _position(self, digest: bytes) -> int:
        """Byte position of the slot holding `digest`, or of the free slot where it belongs."""
        table = self._table
        hashed = int.from_bytes(digest, "little")
        mask = self._mask
        slot = hashed & mask
        stride = ((hashed >> 64) & _MASK64) | 1
        while True:
            position = slot * SLOT_BYTES
            held = table[position:position + _DIGEST_BYTES]
            if held == digest or held == _EMPTY_DIGEST:
                return position
            slot = (slot + stride) & mask

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the latest offset of `key` (offsets are put in increasing order)."""
        digest = hashlib.md5(key).digest()
        position = self._position(digest)
        if self._table[position:position + _DIGEST_BYTES] == _EMPTY_DIGEST:
            if self.size >= self.max_entries:
                raise OverflowError(f"offset map is full at {self.size} entries")
            self.size += 1
        _SLOT.pack_into(self._table, position, digest, offset)
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for `key`, or -1."""
        digest = hashlib.md5(key).digest()
        position = self._position(digest)
        if self._table[position:position + _DIGEST_BYTES] == _EMPTY_DIGEST:
            return -1
        return _OFFSET.unpack_from(self._table, position + _DIGEST_BYTES)[0]
