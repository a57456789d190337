"""The produce-time check that a compacted topic gets keyed records only (Kafka's LogValidator rule).

Compaction keeps the last value per key, so a record without a key has nothing to be kept by: Kafka refuses such
a batch with INVALID_RECORD. Unlike every other produce check this one must decode the records (and decompress
them), so the produce path runs it only for topics whose cleanup.policy includes compact.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.records.batch import BatchHeader, decode_batch


def batches_all_keyed(data, headers: Sequence[BatchHeader]) -> bool:
    """Whether every record of the batches laid end to end in `data` (with their `headers`) has a key."""
    view = memoryview(data)
    position = 0
    for header in headers:
        _, records = decode_batch(view[position:position + header.size])
        if any(record.key is None for record in records):
            return False
        position += header.size
    return True
