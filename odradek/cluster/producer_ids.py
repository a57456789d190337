"""Producer ids: unique across the cluster and across restarts, handed out in blocks.

Kafka's controller reserves ids in blocks of 1000 and records the reservation before any id of the block is used,
so a crash can only waste ids, never reuse one. We do the same against the cluster metadata file.
"""

from __future__ import annotations

from odradek.cluster.metadata import ClusterMetadata

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, metadata: ClusterMetadata):
        self.metadata = metadata
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next = self.metadata.allocate_producer_id_block(BLOCK_SIZE)
            self._end = self._next + BLOCK_SIZE
        producer_id = self._next
        self._next += 1
        return producer_id
