"""Kafka's replica placement as plain functions: leaders spread evenly from the start index, followers shifted, and
with racks every partition's replicas on distinct racks while there are racks to spare."""

from __future__ import annotations

from collections import Counter

import pytest

from odradek.cluster.placement import assign_replicas, check_replication_factor, rack_alternated
from odradek.errors import KafkaError


def test_rack_unaware_assignment_is_kafka_s():
    # AdminUtils' documented example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0
    brokers = {b: None for b in range(5)}
    assert assign_replicas(brokers, 10, 3, start_index=0, shift=0) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]


def test_leaders_spread_evenly_from_a_random_start():
    brokers = {1: None, 2: None, 3: None}
    starts = set()
    for _ in range(30):
        assignment = assign_replicas(brokers, 6, 1)
        assert Counter(r[0] for r in assignment) == {1: 2, 2: 2, 3: 2}
        starts.add(assignment[0][0])
    assert starts == {1, 2, 3}


def test_rack_aware_assignment_puts_replicas_on_distinct_racks():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assert rack_alternated(racks) == [0, 2, 4, 1, 3, 5]
    assignment = assign_replicas(racks, 12, 3)
    for replicas in assignment:
        assert len({racks[b] for b in replicas}) == 3 and len(set(replicas)) == 3
    assert Counter(r[0] for r in assignment) == {b: 2 for b in racks}


def test_a_factor_above_the_live_brokers_is_refused_with_kafka_s_message():
    with pytest.raises(KafkaError, match="Replication factor: 4 larger than available brokers: 3."):
        check_replication_factor(4, [1, 2, 3])
