"""Behind: which assigned partitions a consumer has not yet read to their end, for "stop when idle" options.

Idleness (`odradek consume --idle-timeout-ms`, `odradek mirror --idle-timeout-ms`) is nothing new arriving from a
consumer that has caught up. Before that the consumer is still getting there: joining a group (the broker's
group.initial.rebalance.delay.ms, 3 s by default), finding its start offsets, its first fetches, all of which take
longer on a loaded machine or a slow link, and none of which say anything about the topic. So the idle time counts
only once every assigned partition has reached its end at least once (librdkafka's partition EOF events, with
enable.partition.eof) since it was assigned. Partitions are any hashable names: numbers for one topic,
(topic, number) pairs for several.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


class Behind:
    def __init__(self):
        self.partitions: set[Hashable] | None = None  # None: nothing assigned yet

    def assigned(self, partitions: Iterable[Hashable]) -> None:
        """A whole new assignment (possibly empty)."""
        self.partitions = set(partitions)

    def acquired(self, partitions: Iterable[Hashable]) -> None:
        """Partitions added to the assignment."""
        self.partitions = (self.partitions or set()) | set(partitions)

    def released(self, partitions: Iterable[Hashable]) -> None:
        if self.partitions is not None:
            self.partitions -= set(partitions)

    def reached_end(self, partition: Hashable) -> None:
        if self.partitions is not None:
            self.partitions.discard(partition)

    @property
    def caught_up(self) -> bool:
        return self.partitions is not None and not self.partitions
