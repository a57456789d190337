"""The controller's decisions (controller.next_state) over ISR and live brokers: who leads after a loss, who stays in
the ISR, and what unclean.leader.election.enable changes."""

from __future__ import annotations

from odradek.cluster.controller import next_state
from odradek.cluster.zk_catalogue import NO_LEADER, PartitionState


def test_a_new_partition_starts_with_every_live_replica_in_sync():
    assert next_state([2, 3, 1], None, {1, 2, 3}, 5) == PartitionState(2, 0, [2, 3, 1], 5)
    assert next_state([2, 3, 1], None, {1, 3}, 5) == PartitionState(3, 0, [3, 1], 5)


def test_a_lost_leader_is_replaced_from_the_isr_and_a_lost_follower_leaves_it():
    current = PartitionState(1, 4, [1, 2, 3], 5)
    assert next_state([1, 2, 3], current, {2, 3}, 6) == PartitionState(2, 5, [2, 3], 6)
    assert next_state([1, 2, 3], current, {1, 3}, 6) == PartitionState(1, 4, [1, 3], 6)  # same leader, same epoch
    assert next_state([1, 2, 3], current, {1, 2, 3}, 6) is None


def test_without_an_in_sync_replica_the_partition_goes_offline_unless_unclean_election_is_on():
    current = PartitionState(1, 4, [1], 5)  # 2 and 3 fell out of the ISR, then 1 died
    assert next_state([1, 2, 3], current, {2, 3}, 6) == PartitionState(NO_LEADER, 5, [1], 6)
    assert next_state([1, 2, 3], current, {2, 3}, 6, unclean=True) == PartitionState(2, 5, [2], 6)
    offline = PartitionState(NO_LEADER, 5, [1], 6)
    assert next_state([1, 2, 3], offline, {2, 3}, 6) is None
    assert next_state([1, 2, 3], offline, {1, 2, 3}, 6) == PartitionState(1, 6, [1], 6)
