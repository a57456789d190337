"""Replication throttles (KIP-73), Kafka's names and behaviour: a byte rate for each side of replication.

The topic configs leader.replication.throttled.replicas and follower.replication.throttled.replicas name the
throttled replicas as "partition:broker" pairs (or "*" for all): a broker throttles partition p as leader when the
first lists p with its own id, as follower when the second does (kafka-reassign-partitions lists the replicas that
send under the leader key and the ones that receive under the follower key). The dynamic broker configs
leader.replication.throttled.rate and follower.replication.throttled.rate (bytes/s, default: none) bound each side's
rate over all its throttled partitions together (Kafka's ReplicationQuotaManager): the leader sends no records of
a throttled partition to a follower outside the ISR while its rate is over the bound (handlers/fetch.py), the
follower leaves a throttled partition it is not in sync for out of its fetches (replica_fetcher.py). In-sync
replicas are never held back, as in Kafka, so a throttle cannot shrink the ISR. The rate is Kafka's sampled Rate
(odradek/security/quotas.py) over replication.quota.window.num windows of replication.quota.window.size.seconds; the
bytes of every throttled partition count, in sync or not.
"""

from __future__ import annotations

from odradek.config import LONG_MAX
from odradek.security.quotas import Rate

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


def is_throttled(throttled_replicas: tuple[str, ...], partition: int, node_id: int) -> bool:
    """Whether a topic's throttled-replicas list names this broker's replica of `partition`."""
    return throttled_replicas == ("*",) or f"{partition}:{node_id}" in throttled_replicas


class ReplicationQuota:
    """One side's byte rate over this broker's throttled partitions; its bound (`rate_key`) is read from the
    broker's config at each check, so a dynamic change applies at once."""

    def __init__(self, broker, rate_key: str):
        self._broker = broker
        self._rate_key = rate_key
        config = broker.config
        self._rate = Rate(config["replication.quota.window.num"],
                          config["replication.quota.window.size.seconds"] * 1000)

    def throttles(self, partition, throttled_replicas: tuple[str, ...]) -> bool:
        """Whether the topic's list (leader's or follower's) names this broker's replica of `partition`."""
        return is_throttled(throttled_replicas, partition.index, self._broker.node_id)

    def holds_back(self, partition, throttled_replicas: tuple[str, ...], replica_id: int, now_ms: float) -> bool:
        """Whether replication of `partition` to `replica_id` waits now: throttled here, the replica not in sync,
        and the rate over its bound."""
        bound = self._broker.config[self._rate_key]
        return (bound < LONG_MAX and replica_id not in partition.assignment.isr
                and self.throttles(partition, throttled_replicas) and self._rate.rate(now_ms) > bound)

    def record(self, size: int, now_ms: float) -> None:
        """Bytes of throttled partitions sent (leader) or received (follower)."""
        self._rate.record(size, now_ms)
