"""The classic rebalance protocol, driven by calling the state machine in order with explicit clocks."""

from __future__ import annotations

import pytest

from odradek.coordinator.classic import (JOIN, SYNC, ClassicGroup, ClassicGroupConfig, GroupState, JoinResult,
                                         SyncResult, Wait)
from odradek.errors import ErrorCode, KafkaError

CONFIG = ClassicGroupConfig(min_session_timeout_ms=6000, max_session_timeout_ms=1800000,
                            initial_rebalance_delay_ms=0, max_size=100)
RANGE = [("range", b"r-meta"), ("roundrobin", b"rr-meta")]


def join(group, member_id="", now=0, protocols=RANGE, instance_id=None, session=10000, rebalance=30000,
         require_known=True):
    return group.join(member_id=member_id, instance_id=instance_id, client_id="c", client_host="/127.0.0.1",
                      session_timeout_ms=session, rebalance_timeout_ms=rebalance, protocol_type="consumer",
                      protocols=protocols, require_known_member_id=require_known, now_ms=now)


def take(group, kind):
    answers = {member_id: result for k, member_id, result in group.outbox if k == kind}
    group.outbox = [entry for entry in group.outbox if entry[0] != kind]
    return answers


def new_member(group, now=0, **kwargs) -> str:
    """Join with an empty id, get MEMBER_ID_REQUIRED and rejoin with the id handed out; returns that id."""
    first = join(group, now=now, **kwargs)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert isinstance(join(group, first.member_id, now=now, **kwargs), Wait)
    return first.member_id


def stable_group(n=2):
    group = ClassicGroup("g", CONFIG, 0)
    ids = [new_member(group)]
    take(group, JOIN)
    group.sync(member_id=ids[0], instance_id=None, generation=1, protocol_type=None, protocol_name=None,
               assignments={ids[0]: b"a0"}, now_ms=0)
    take(group, SYNC)
    if n == 1:
        return group, ids
    for _ in range(n - 1):
        ids.append(new_member(group))
    assert isinstance(join(group, ids[0]), Wait)
    joins = take(group, JOIN)
    leader = group.leader
    generation = joins[leader].generation
    for member_id in ids:
        group.sync(member_id=member_id, instance_id=None, generation=generation, protocol_type="consumer",
                   protocol_name="range", assignments={m: m.encode() for m in ids} if member_id == leader else {},
                   now_ms=0)
    assert group.state is GroupState.STABLE
    take(group, SYNC)
    return group, ids


def test_member_id_required_then_join_completes_with_leader_and_protocol():
    group = ClassicGroup("g", CONFIG, 0)
    member_id = new_member(group)
    (answer,) = take(group, JOIN).values()
    assert answer == JoinResult(ErrorCode.NONE, member_id, 1, "consumer", "range", member_id,
                                [(member_id, None, b"r-meta")])
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.sync(member_id=member_id, instance_id=None, generation=1, protocol_type="consumer",
                      protocol_name="range", assignments={member_id: b"mine"}, now_ms=5) == Wait(member_id)
    assert take(group, SYNC) == {member_id: SyncResult(ErrorCode.NONE, "consumer", "range", b"mine")}
    assert group.state is GroupState.STABLE


def test_old_join_versions_get_a_member_id_without_the_extra_round_trip():
    group = ClassicGroup("g", CONFIG, 0)
    assert isinstance(join(group, require_known=False), Wait)
    (answer,) = take(group, JOIN).values()
    assert answer.error == ErrorCode.NONE and answer.member_id.startswith("c-")


def test_second_member_triggers_rebalance_and_followers_get_no_member_list():
    group, ids = stable_group(3)
    assert group.generation == 2
    new = new_member(group)
    assert group.state is GroupState.PREPARING_REBALANCE
    with pytest.raises(KafkaError) as err:
        group.heartbeat(member_id=ids[0], instance_id=None, generation=2, now_ms=1)
    assert err.value.code == ErrorCode.REBALANCE_IN_PROGRESS
    for member_id in ids:
        join(group, member_id, now=2)
    answers = take(group, JOIN)
    assert set(answers) == set(ids) | {new}
    assert all(a.generation == 3 for a in answers.values())
    assert len(answers[group.leader].members) == 4
    assert all(a.members == [] for m, a in answers.items() if m != group.leader)


def test_join_waits_for_members_until_rebalance_timeout_then_drops_the_silent_one():
    group, (a, b) = stable_group(2)
    join(group, a, now=100)
    assert take(group, JOIN) == {}
    for now in range(5000, 30000, 5000):  # b keeps heartbeating but never rejoins
        with pytest.raises(KafkaError):
            group.heartbeat(member_id=b, instance_id=None, generation=2, now_ms=now)
    assert group.next_deadline() == 100 + 30000
    group.expire(100 + 30000)
    answers = take(group, JOIN)
    assert list(answers) == [a] and b not in group.members
    assert group.leader == a


def test_session_expiry_removes_member_and_rebalances():
    group, (a, b) = stable_group(2)
    group.heartbeat(member_id=a, instance_id=None, generation=2, now_ms=9000)
    group.expire(10000)
    assert b not in group.members and group.state is GroupState.PREPARING_REBALANCE
    join(group, a, now=10001)
    assert take(group, JOIN)[a].generation == 3


def test_errors_for_unknown_member_and_stale_generation():
    group, (a, _) = stable_group(2)
    with pytest.raises(KafkaError) as err:
        group.heartbeat(member_id="nobody", instance_id=None, generation=2, now_ms=0)
    assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaError) as err:
        group.heartbeat(member_id=a, instance_id=None, generation=1, now_ms=0)
    assert err.value.code == ErrorCode.ILLEGAL_GENERATION
    with pytest.raises(KafkaError) as err:
        group.sync(member_id=a, instance_id=None, generation=1, protocol_type=None, protocol_name=None,
                   assignments={}, now_ms=0)
    assert err.value.code == ErrorCode.ILLEGAL_GENERATION
    with pytest.raises(KafkaError) as err:
        join(group, "nobody")
    assert err.value.code == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_bounds_and_protocol_mismatch():
    group, _ = stable_group(1)
    with pytest.raises(KafkaError) as err:
        join(group, session=1000)
    assert err.value.code == ErrorCode.INVALID_SESSION_TIMEOUT
    with pytest.raises(KafkaError) as err:
        join(group, protocols=[("sticky", b"")])
    assert err.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_common_protocol_is_chosen_by_vote():
    group = ClassicGroup("g", CONFIG, 0)
    a = new_member(group, protocols=[("roundrobin", b"1"), ("range", b"2")])
    take(group, JOIN)
    b = new_member(group, protocols=[("range", b"3")])
    join(group, a, protocols=[("roundrobin", b"1"), ("range", b"2")])
    answers = take(group, JOIN)
    assert answers[a].protocol_name == "range"
    assert sorted(answers[a].members) == sorted([(a, None, b"2"), (b, None, b"3")])


def test_leave_rebalances_at_once_and_last_leave_empties_group():
    group, (a, b) = stable_group(2)
    assert group.leave([(b, None)], now_ms=5) == [ErrorCode.NONE]
    assert group.state is GroupState.PREPARING_REBALANCE
    join(group, a, now=6)
    assert take(group, JOIN)[a].members == [(a, None, b"r-meta")]
    assert group.leave([(a, None), ("ghost", None)], now_ms=7) == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert group.state is GroupState.EMPTY and group.is_empty


def test_rebalance_during_completing_answers_waiting_syncs_with_rebalance_in_progress():
    group, (a, b) = stable_group(2)
    new = new_member(group)
    join(group, a)
    join(group, b)
    take(group, JOIN)
    follower = next(m for m in (a, b, new) if m != group.leader)
    assert group.sync(member_id=follower, instance_id=None, generation=3, protocol_type=None, protocol_name=None,
                      assignments={}, now_ms=0) == Wait(follower)
    group.leave([(new if new != follower and new != group.leader else a, None)], now_ms=1)
    assert take(group, SYNC)[follower].error == ErrorCode.REBALANCE_IN_PROGRESS


def test_static_member_restart_takes_over_without_rebalance_and_old_id_is_fenced():
    group = ClassicGroup("g", CONFIG, 0)
    leader_id = new_member(group)
    take(group, JOIN)
    assert isinstance(join(group, instance_id="static-1"), Wait)  # static members skip MEMBER_ID_REQUIRED
    join(group, leader_id)
    answers = take(group, JOIN)
    static_id = next(m for m in answers if m != leader_id)
    for member_id in (leader_id, static_id):
        group.sync(member_id=member_id, instance_id="static-1" if member_id == static_id else None,
                   generation=2, protocol_type=None, protocol_name=None,
                   assignments={leader_id: b"L", static_id: b"S"}, now_ms=0)
    take(group, SYNC)
    restarted = join(group, instance_id="static-1", now=50)
    assert restarted.error == ErrorCode.NONE and restarted.generation == 2 and restarted.member_id != static_id
    assert group.state is GroupState.STABLE
    assert group.sync(member_id=restarted.member_id, instance_id="static-1", generation=2, protocol_type=None,
                      protocol_name=None, assignments={}, now_ms=51).assignment == b"S"
    with pytest.raises(KafkaError) as err:
        group.heartbeat(member_id=static_id, instance_id="static-1", generation=2, now_ms=52)
    assert err.value.code == ErrorCode.FENCED_INSTANCE_ID
    assert group.leave([("", "static-1")], now_ms=53) == [ErrorCode.NONE]
    assert group.state is GroupState.PREPARING_REBALANCE


@pytest.mark.parametrize("supports_skip_assignment", [True, False], ids=["v9+", "before-v9"])
def test_static_leader_restart_keeps_the_group_stable(supports_skip_assignment):
    """KIP-814: the restarted static leader is told it leads but must skip its assignor (JoinGroup v9+); before v9
    the answer names the old leader id, so it does not think it leads and does not assign. No rebalance either way."""
    group = ClassicGroup("g", CONFIG, 0)
    assert isinstance(join(group, instance_id="lead"), Wait)
    [leader_id] = take(group, JOIN)
    group.sync(member_id=leader_id, instance_id="lead", generation=1, protocol_type=None, protocol_name=None,
               assignments={leader_id: b"L"}, now_ms=0)
    take(group, SYNC)
    restarted = group.join(member_id="", instance_id="lead", client_id="c", client_host="/127.0.0.1",
                           session_timeout_ms=10000, rebalance_timeout_ms=30000, protocol_type="consumer",
                           protocols=RANGE, require_known_member_id=True, now_ms=50,
                           supports_skip_assignment=supports_skip_assignment)
    assert restarted.error == ErrorCode.NONE and restarted.generation == 1 and restarted.member_id != leader_id
    assert group.state is GroupState.STABLE and group.leader == restarted.member_id
    if supports_skip_assignment:
        assert restarted.skip_assignment and restarted.leader == restarted.member_id
        assert [m for m, _, _ in restarted.members] == [restarted.member_id]
    else:
        assert not restarted.skip_assignment and restarted.leader == leader_id and restarted.members == []
    assert group.sync(member_id=restarted.member_id, instance_id="lead", generation=1, protocol_type=None,
                      protocol_name=None, assignments={}, now_ms=51).assignment == b"L"


def test_initial_rebalance_delay_waits_for_more_members_of_a_new_group():
    group = ClassicGroup("g", CONFIG._replace(initial_rebalance_delay_ms=3000), 0)
    a = new_member(group, now=0)
    assert group.next_deadline() == 3000
    group.expire(2999)
    assert take(group, JOIN) == {}
    b = new_member(group, now=1000)
    group.expire(3000)  # a member arrived during the delay: wait one more delay
    assert take(group, JOIN) == {}
    group.expire(6000)
    assert set(take(group, JOIN)) == {a, b}


def test_pending_member_that_never_rejoins_expires_and_join_completes():
    group, (a,) = stable_group(1)
    pending = join(group, now=0)
    assert pending.error == ErrorCode.MEMBER_ID_REQUIRED
    join(group, a, now=1)  # the leader rejoining forces a rebalance; it must wait for the pending member
    assert take(group, JOIN) == {}
    group.expire(10000)
    assert list(take(group, JOIN)) == [a]


def test_offset_commit_validation():
    group, (a, _) = stable_group(2)
    group.validate_offset_commit(a, None, 2)
    for member_id, generation, code in ((a, 1, ErrorCode.ILLEGAL_GENERATION), ("x", 2, ErrorCode.UNKNOWN_MEMBER_ID),
                                        ("", -1, ErrorCode.UNKNOWN_MEMBER_ID)):
        with pytest.raises(KafkaError) as err:
            group.validate_offset_commit(member_id, None, generation)
        assert err.value.code == code
    ClassicGroup("simple", CONFIG, 0).validate_offset_commit("", None, -1)
