"""Share-group membership and its assignor (odradek/coordinator/share_group.py): partitions spread over members
and shared once there are more members than partitions, epochs moving on joins and leaves, fencing."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.assignors import TopicInfo
from odradek.coordinator.share_group import ShareGroup, assign
from odradek.errors import ErrorCode, KafkaError

TOPIC = TopicInfo(uuid.uuid4(), 2)
TOPICS = {"jobs": TOPIC}


def test_the_assignor_gives_every_partition_to_at_least_one_member():
    assert assign({"a": {"jobs"}}, TOPICS) == {"a": {TOPIC.topic_id: {0, 1}}}
    three = assign({"a": {"jobs"}, "b": {"jobs"}, "c": {"jobs"}}, TOPICS)
    assert three == {"a": {TOPIC.topic_id: {0}}, "b": {TOPIC.topic_id: {1}}, "c": {TOPIC.topic_id: {0}}}
    assert assign({"a": {"jobs"}, "b": {"other"}}, TOPICS) == {"a": {TOPIC.topic_id: {0, 1}}, "b": {}}


def beat(group, member, epoch, now=0, topics=("jobs",)):
    return group.heartbeat(member_id=member, member_epoch=epoch, rack_id=None,
                           subscribed_topic_names=list(topics) if epoch == 0 else None, topics=TOPICS,
                           client_id="c", client_host="/h", now_ms=now)


def test_members_move_to_the_new_assignment_at_their_next_heartbeat():
    group = ShareGroup("g", session_timeout_ms=1000, heartbeat_interval_ms=100, now_ms=0)
    first = beat(group, "a", 0)
    assert first.assignment == {TOPIC.topic_id: {0, 1}}
    second = beat(group, "b", 0)
    assert second.member_epoch > first.member_epoch and second.assignment == {TOPIC.topic_id: {1}}
    moved = beat(group, "a", first.member_epoch)
    assert moved.member_epoch == second.member_epoch and moved.assignment == {TOPIC.topic_id: {0}}
    assert beat(group, "a", moved.member_epoch).assignment is None  # unchanged: not sent
    assert group.state_name == "Stable"
    beat(group, "b", -1)
    assert beat(group, "a", moved.member_epoch).assignment == {TOPIC.topic_id: {0, 1}}


def test_a_wrong_epoch_is_fenced_and_an_unknown_member_refused():
    group = ShareGroup("g", session_timeout_ms=1000, heartbeat_interval_ms=100, now_ms=0)
    beat(group, "a", 0)
    for member, epoch, code in (("a", 99, ErrorCode.FENCED_MEMBER_EPOCH), ("x", 1, ErrorCode.UNKNOWN_MEMBER_ID),
                                ("", 0, ErrorCode.INVALID_REQUEST)):
        with pytest.raises(KafkaError) as refused:
            beat(group, member, epoch)
        assert refused.value.code == code
    assert group.expired_members(999) == [] and group.expired_members(1000) == ["a"]
