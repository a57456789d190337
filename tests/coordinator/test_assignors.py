"""The server-side assignors: balance, stickiness, and respect for subscriptions."""

from __future__ import annotations

import uuid

from odradek.coordinator.assignors import TopicInfo, range_, uniform

A, B = uuid.uuid4(), uuid.uuid4()
TOPICS = {"a": TopicInfo(A, 6), "b": TopicInfo(B, 3)}


def counts(assignment):
    return {m: sum(len(p) for p in parts.values()) for m, parts in assignment.items()}


def every_partition_once(assignment, topics=TOPICS, subscribed=("a", "b")):
    seen = [(t, i) for parts in assignment.values() for t, indexes in parts.items() for i in indexes]
    expected = [(topics[n].topic_id, i) for n in subscribed for i in range(topics[n].partitions)]
    return sorted(seen) == sorted(expected)


def test_uniform_balances_and_covers_every_partition():
    subscriptions = {m: {"a", "b"} for m in ("m1", "m2", "m3", "m4")}
    result = uniform(subscriptions, TOPICS, {})
    assert every_partition_once(result)
    assert sorted(counts(result).values()) == [2, 2, 2, 3]


def test_uniform_is_sticky_when_a_member_joins():
    before = uniform({"m1": {"a"}, "m2": {"a"}}, TOPICS, {})
    after = uniform({"m1": {"a"}, "m2": {"a"}, "m3": {"a"}}, TOPICS, before)
    assert every_partition_once(after, subscribed=("a",))
    assert counts(after) == {"m1": 2, "m2": 2, "m3": 2}
    for member in ("m1", "m2"):
        assert after[member][A] <= before[member][A]


def test_uniform_respects_heterogeneous_subscriptions():
    result = uniform({"m1": {"a"}, "m2": {"a", "b"}}, TOPICS, {})
    assert every_partition_once(result)
    assert B not in result["m1"]
    assert counts(result) in ({"m1": 5, "m2": 4}, {"m1": 4, "m2": 5})


def test_range_gives_contiguous_runs_in_member_order():
    result = range_({"m2": {"a", "b"}, "m1": {"a", "b"}}, TOPICS, {})
    assert result["m1"] == {A: {0, 1, 2}, B: {0, 1}}
    assert result["m2"] == {A: {3, 4, 5}, B: {2}}
