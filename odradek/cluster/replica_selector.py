"""Which replica a consumer should read a partition from (KIP-392, fetch from the closest replica).

The leader decides, on every Fetch v11+ from a consumer (the request names the consumer's rack, client.rack): with
replica.selector.class = org.apache.kafka.common.replica.RackAwareReplicaSelector it names a replica in the
consumer's rack as the preferred read replica, and the consumer then fetches from that broker, which serves it up to
its own high watermark. Without a selector (Kafka's default) the leader serves everyone. This module is the choice
alone, over plain values, so it is tested without a cluster; odradek/broker/handlers/fetch.py gathers the values
(the ISR, each follower's log end offset and last catch-up from Partition.followers, racks from the live brokers).

As Kafka's ReplicaManager.findPreferredReadReplica, only in-sync followers that already have the fetch offset are
candidates (an out-of-sync follower would keep the consumer behind for as long as it lags), a broker that is not
registered is none, and the leader stays the choice when it is in the consumer's rack or no candidate is. Among
several candidates in the rack RackAwareReplicaSelector takes the one with the largest log end offset, then the one
caught up most recently.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

from odradek.config import RACK_AWARE_SELECTOR

NO_PREFERRED_REPLICA = -1  # Fetch's preferred_read_replica when the consumer should stay where it is


class FollowerView(NamedTuple):
    """What the leader knows of one follower when a consumer's fetch arrives."""

    node_id: int
    log_end_offset: int
    last_caught_up_ms: int


def preferred_read_replica(selector: str, client_rack: str | None, leader_id: int, fetch_offset: int,
                           followers: Collection[FollowerView], isr: Collection[int],
                           racks: Mapping[int, str | None], now_ms: int) -> int:
    """The broker the consumer in `client_rack` should fetch from, or NO_PREFERRED_REPLICA for the leader itself.
    `racks` has every live broker's rack (None: none set); a broker missing from it is not live."""
    if selector != RACK_AWARE_SELECTOR or not client_rack or racks.get(leader_id) == client_rack:
        return NO_PREFERRED_REPLICA
    candidates = [f for f in followers
                  if f.node_id in isr and f.node_id in racks and racks[f.node_id] == client_rack
                  and f.log_end_offset >= fetch_offset]
    if not candidates:
        return NO_PREFERRED_REPLICA
    best = max(candidates, key=lambda f: (f.log_end_offset, f.last_caught_up_ms - now_ms))
    return best.node_id
