"""KIP-848 consumer groups: epochs, server-side assignment, and revoke-before-reassign reconciliation."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.assignors import TopicInfo
from odradek.coordinator.consumer import ConsumerGroup
from odradek.errors import ErrorCode, KafkaError

T = uuid.uuid4()
TOPICS = {"t": TopicInfo(T, 6)}


def beat(group, member_id, epoch, owned=None, now=0, topics=("t",), assignor=None, **kwargs):
    return group.heartbeat(member_id=member_id, member_epoch=epoch, instance_id=kwargs.get("instance_id"),
                           rack_id=None, rebalance_timeout_ms=kwargs.get("rebalance", 10000),
                           subscribed_topic_names=list(topics) if epoch == 0 else None, subscribed_topic_regex=None,
                           server_assignor=assignor, owned=owned, topics=TOPICS, client_id="c",
                           client_host="/127.0.0.1", now_ms=now)


def new_group():
    return ConsumerGroup("g", session_timeout_ms=45000, heartbeat_interval_ms=5000, now_ms=0)


def test_first_member_gets_everything_at_epoch_one():
    group = new_group()
    result = beat(group, "m1", 0, owned={})
    assert result.member_epoch == 1 and result.assignment == {T: set(range(6))}
    assert group.state_name == "Stable"
    again = beat(group, "m1", 1, owned={T: set(range(6))})
    assert again.member_epoch == 1 and again.assignment is None


def test_second_member_waits_for_revocation_before_taking_partitions():
    group = new_group()
    beat(group, "m1", 0, owned={})
    joined = beat(group, "m2", 0, owned={})
    assert joined.member_epoch == 2 and joined.assignment == {}  # its target is still held by m1
    assert group.state_name == "Reconciling"
    revoking = beat(group, "m1", 1, owned={T: set(range(6))})
    assert revoking.member_epoch == 1 and len(revoking.assignment[T]) == 3  # keep half, revoke the rest
    done = beat(group, "m1", 1, owned=revoking.assignment)
    assert done.member_epoch == 2
    taken = beat(group, "m2", 2, owned={})
    assert taken.assignment[T] == set(range(6)) - revoking.assignment[T]
    assert group.state_name == "Stable"


def test_fencing_and_unknown_member():
    group = new_group()
    beat(group, "m1", 0, owned={})
    with pytest.raises(KafkaError) as err:
        beat(group, "m1", 7)
    assert err.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(KafkaError) as err:
        beat(group, "ghost", 1)
    assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaError) as err:
        beat(group, "m2", 0, assignor="sticky")
    assert err.value.code == ErrorCode.UNSUPPORTED_ASSIGNOR


def test_leave_and_session_expiry_release_partitions():
    group = new_group()
    beat(group, "m1", 0, owned={})
    beat(group, "m2", 0, owned={}, now=1)
    kept = beat(group, "m1", 1, owned={T: set(range(6))}, now=2).assignment
    beat(group, "m1", 1, owned=kept, now=3)
    beat(group, "m2", 2, owned={}, now=4)
    assert beat(group, "m2", -1).member_epoch == -1
    assert beat(group, "m1", 2, owned=kept, now=5).assignment == {T: set(range(6))}
    beat(group, "m3", 0, owned={}, now=10)
    group.expire(5 + 45000)  # m1 stopped heartbeating; m3 did not
    assert set(group.members) == {"m3"}
    assert beat(group, "m3", 4, owned={}, now=45006).assignment == {T: set(range(6))}


def test_commit_validation_uses_member_epoch():
    group = new_group()
    beat(group, "m1", 0, owned={})
    group.validate_offset_commit("m1", 1, 9)
    with pytest.raises(KafkaError) as err:
        group.validate_offset_commit("m1", 0, 9)
    assert err.value.code == ErrorCode.STALE_MEMBER_EPOCH
    with pytest.raises(KafkaError) as err:
        group.validate_offset_commit("", -1, 9)
    assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID


def test_range_assignor_is_used_when_members_ask_for_it():
    group = new_group()
    beat(group, "m1", 0, owned={}, assignor="range")
    assert group.assignor_name == "range"


def settled_pair():
    """Static members s1 and s2 sharing the six partitions, both stable."""
    group = new_group()
    first = beat(group, "s1", 0, owned={}, instance_id="a")
    second = beat(group, "s2", 0, owned={}, instance_id="b")
    kept = beat(group, "s1", first.member_epoch, owned=first.assignment, instance_id="a").assignment
    beat(group, "s1", first.member_epoch, owned=kept, instance_id="a")
    taken = beat(group, "s2", second.member_epoch, owned={}, instance_id="b").assignment
    assert group.state_name == "Stable" and kept[T] | taken[T] == set(range(6))
    return group, kept, taken


def test_static_member_stepping_away_keeps_its_partitions_for_its_replacement():
    group, kept, taken = settled_pair()
    epoch = group.group_epoch
    assert beat(group, "s1", group.members["s1"].member_epoch, instance_id="a").assignment is None
    assert beat(group, "s1", -2, instance_id="a").member_epoch == -2  # steps away: no rebalance
    assert group.group_epoch == epoch and group.state_name == "Stable"
    assert beat(group, "s2", group.members["s2"].member_epoch, owned=taken, instance_id="b").assignment is None
    back = beat(group, "s1-restarted", 0, owned={}, instance_id="a", now=1000)
    assert back.assignment == kept and back.member_epoch == group.members["s2"].member_epoch
    assert group.group_epoch == epoch and set(group.members) == {"s1-restarted", "s2"}


def test_static_member_away_too_long_is_removed_and_a_live_one_cannot_be_replaced():
    group, kept, taken = settled_pair()
    with pytest.raises(KafkaError) as err:
        beat(group, "intruder", 0, owned={}, instance_id="b")  # s2 has not left
    assert err.value.code == ErrorCode.UNRELEASED_INSTANCE_ID
    beat(group, "s1", -2, instance_id="a")
    epoch = group.members["s2"].member_epoch
    beat(group, "s2", epoch, owned=taken, instance_id="b", now=30000)
    group.expire(now_ms=45000)  # s1's session ran out while it was away; s2's did not
    assert set(group.members) == {"s2"}
    grown = beat(group, "s2", epoch, owned=taken, instance_id="b", now=45000)
    assert grown.assignment == {T: set(range(6))} and grown.member_epoch > epoch
