"""Partitioners: `(key bytes or None, partition count) -> partition`.

The default is the Java client's: murmur2 of the key, made positive with `& 0x7fffffff`, modulo the partition
count, so a key lands on the same partition whichever client wrote it (librdkafka's `murmur2_random` agrees).
A null key goes to a random partition.
"""

from __future__ import annotations

import random
from collections.abc import Callable

Partitioner = Callable[[bytes | None, int], int]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: MurmurHash2, 32-bit, seed 0x9747b28c, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partitioner(key: bytes | None, partitions: int) -> int:
    if key is None:
        return random_partitioner(key, partitions)
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def random_partitioner(key: bytes | None, partitions: int) -> int:
    return random.randrange(partitions)
