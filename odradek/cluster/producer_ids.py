"""Producer ids: unique across the cluster and across restarts, handed out in blocks.

Kafka's controller reserves ids in blocks of 1000 and records the reservation before any id of the block is used,
so a crash can only waste ids, never reuse one. We do the same against the cluster metadata (the file of a single
node, ZooKeeper's /latest_producer_id_block in a cluster). The claim is I/O: `next_id` makes it where it is called
when no block is held, and a caller that must not block (the event loop, in a cluster) claims with `claim_block`
on a thread of its choosing first, whenever `ready` is false.
"""

from __future__ import annotations

from odradek.cluster.metadata import ClusterMetadata

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, metadata: ClusterMetadata):
        self.metadata = metadata
        self._next = 0
        self._end = 0

    @property
    def ready(self) -> bool:
        """Whether `next_id` can answer without claiming a block."""
        return self._next < self._end

    def claim_block(self) -> None:
        """Reserve the next block (blocking I/O); what was left of the one held is wasted, never reused."""
        start = self.metadata.allocate_producer_id_block(BLOCK_SIZE)
        self._next, self._end = start, start + BLOCK_SIZE

    def next_id(self) -> int:
        if not self.ready:
            self.claim_block()
        producer_id = self._next
        self._next += 1
        return producer_id
