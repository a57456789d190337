"""One KIP-848 consumer group (ConsumerGroupHeartbeat): the broker computes the assignment, members reconcile.

Plain code with explicit `now_ms`, like classic.py. Every heartbeat is answered at once, so there is no outbox:
the group keeps a group epoch (bumped when membership, subscriptions or the subscribed topics change), a target
assignment computed by a server-side assignor at that epoch, and each member's current assignment and epoch.
A member moves to the target epoch only after it has given up (stopped reporting) the partitions it must revoke,
and it gets a partition only once no other member still holds it, so no partition ever has two owners.
A static member (group.instance.id) that leaves with epoch -2 steps away without a rebalance: it keeps its
assignment until a member with the same instance id takes its place (inheriting assignment and epoch, as Kafka's
static member replacement does) or its session times out.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Mapping

from odradek.coordinator.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment, TopicInfo
from odradek.errors import ErrorCode, KafkaError

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = "stable", "unrevoked_partitions", "unreleased_partitions"


@dataclasses.dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    assignment: Assignment | None  # None: unchanged, the client keeps what it has


@dataclasses.dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: list[str] = dataclasses.field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: Assignment = dataclasses.field(default_factory=dict)
    pending_revocation: Assignment = dataclasses.field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    away: bool = False  # a static member that left with epoch -2, holding its place until it returns or expires

    def subscribed_topics(self, topic_names) -> set[str]:
        topics = set(self.subscribed_topic_names)
        if self.subscribed_topic_regex:
            pattern = re.compile(self.subscribed_topic_regex)
            topics |= {name for name in topic_names if pattern.fullmatch(name) and not name.startswith("__")}
        return topics


class EpochGroup:
    """What a KIP-848 consumer group and a KIP-932 share group (share_group.py) keep alike: members by id, the
    group epoch, bumped with the state's timestamp at every change the assignment must follow, and the epoch the
    target assignment was computed at."""

    def __init__(self, group_id: str, *, session_timeout_ms: int, heartbeat_interval_ms: int, now_ms: int):
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict = {}
        self.state_timestamp_ms = now_ms

    def _bump_epoch(self, now_ms: int) -> None:
        self.group_epoch += 1
        self.state_timestamp_ms = now_ms


class ConsumerGroup(EpochGroup):
    members: dict[str, ConsumerMember]

    def __init__(self, group_id: str, *, session_timeout_ms: int, heartbeat_interval_ms: int, now_ms: int):
        super().__init__(group_id, session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                         now_ms=now_ms)
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.subscribed_topic_view: dict[str, TopicInfo] = {}  # what the target was computed from
        self.assignor_name = DEFAULT_ASSIGNOR

    # ------------------------------------------------------------------------------------------ requests
    def heartbeat(self, *, member_id: str, member_epoch: int, instance_id: str | None, rack_id: str | None,
                  rebalance_timeout_ms: int, subscribed_topic_names: list[str] | None,
                  subscribed_topic_regex: str | None, server_assignor: str | None,
                  owned: Assignment | None, topics: Mapping[str, TopicInfo], client_id: str, client_host: str,
                  now_ms: int) -> HeartbeatResult:
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"Assignor {server_assignor} is not supported; "
                                                             f"use one of {sorted(ASSIGNORS)}.")
        if member_epoch == STATIC_LEAVE_EPOCH and instance_id is not None:
            self._member_of(member_id, instance_id).away = True
            return HeartbeatResult(member_id, member_epoch, None)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            self._remove(self._member_of(member_id, instance_id).member_id, now_ms)
            return HeartbeatResult(member_id, member_epoch, None)
        replaced = False
        if member_epoch == 0:
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            member, replaced = self._join(member_id or uuid.uuid4().hex, instance_id, now_ms)
        else:
            member = self.members.get(member_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member_epoch != member.member_epoch and not (
                    member_epoch == member.previous_member_epoch and _within(owned, member.assigned)):
                raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The member epoch {member_epoch} is not the expected {member.member_epoch}.")
            member.away = False
        full_request = member_epoch == 0 or (owned is not None and subscribed_topic_names is not None
                                             and rebalance_timeout_ms != -1)
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None:
            member.server_assignor = server_assignor
        changed = member_epoch == 0 and not replaced
        if subscribed_topic_names is not None and subscribed_topic_names != member.subscribed_topic_names:
            member.subscribed_topic_names, changed = list(subscribed_topic_names), True
        if subscribed_topic_regex is not None and subscribed_topic_regex != member.subscribed_topic_regex:
            member.subscribed_topic_regex, changed = subscribed_topic_regex or None, True
        view = self._subscribed_topic_view(topics)
        if changed or view != self.subscribed_topic_view:
            self.subscribed_topic_view = view
            self._bump_epoch(now_ms)
        if self.assignment_epoch < self.group_epoch:
            self._compute_target(topics)
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        before = (member.member_epoch, _copy(member.assigned))
        self._reconcile(member, owned, now_ms)
        send = full_request or (member.member_epoch, _copy(member.assigned)) != before or (
            owned is not None and owned != member.assigned)
        return HeartbeatResult(member.member_id, member.member_epoch, _copy(member.assigned) if send else None)

    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit: without an epoch, a commit goes into a group with no members
        (whatever member id comes with it); otherwise the member must exist and be at its epoch."""
        if member_epoch < 0 and not self.members:
            return
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            if api_version < 9:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH if member_epoch > member.member_epoch
                             else ErrorCode.STALE_MEMBER_EPOCH)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        if member_id is None or (member_epoch < 0 and not member_id):
            return
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            raise KafkaError(ErrorCode.STALE_MEMBER_EPOCH)

    # -------------------------------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.revocation_deadline_ms for m in self.members.values() if m.revocation_deadline_ms]
        return min(deadlines, default=None)

    def expire(self, now_ms: int) -> None:
        """Fence members that stopped heartbeating, or that did not give up partitions within their rebalance
        timeout."""
        for member in list(self.members.values()):
            if member.session_deadline_ms <= now_ms or (
                    member.revocation_deadline_ms is not None and member.revocation_deadline_ms <= now_ms):
                self._remove(member.member_id, now_ms)

    # -------------------------------------------------------------------------------------------- views
    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> set[str]:
        return set(self.subscribed_topic_view)

    # ---------------------------------------------------------------------------------------- internals
    def _join(self, member_id: str, instance_id: str | None, now_ms: int) -> tuple[ConsumerMember, bool]:
        """The joining member, and whether it took the place of a static member that had stepped away (then it
        inherits that member's assignment and epoch, and the group does not rebalance)."""
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                previous = self.members[holder]
                if not previous.away:
                    raise KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                     f"Static member {instance_id} is still held by {holder}.")
                del self.members[holder]
                member = dataclasses.replace(previous, member_id=member_id, away=False)
                self.members[member_id] = member
                if holder in self.target:
                    self.target[member_id] = self.target.pop(holder)
                self.static_members[instance_id] = member_id
                return member, True
        if member_id in self.members:  # rejoining with epoch 0 after an error: start over
            self._remove(member_id, now_ms)
        member = ConsumerMember(member_id, instance_id)
        self.members[member_id] = member
        if instance_id is not None:
            self.static_members[instance_id] = member_id
        return member, False

    def _member_of(self, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The member a leave names, by member id or (static members) by instance id."""
        if instance_id is not None and not member_id:
            member_id = self.static_members.get(instance_id, "")
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def _remove(self, member_id: str, now_ms: int) -> None:
        member = self.members.pop(member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self._bump_epoch(now_ms)

    def _subscribed_topic_view(self, topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
        wanted: set[str] = set()
        for member in self.members.values():
            wanted |= member.subscribed_topics(topics)
        return {name: topics[name] for name in sorted(wanted) if name in topics}

    def _compute_target(self, topics: Mapping[str, TopicInfo]) -> None:
        chosen = [m.server_assignor for m in self.members.values() if m.server_assignor]
        self.assignor_name = max(set(chosen), key=chosen.count) if chosen else DEFAULT_ASSIGNOR
        subscriptions = {m.member_id: m.subscribed_topics(topics) for m in self.members.values()}
        self.target = ASSIGNORS[self.assignor_name](subscriptions, self.subscribed_topic_view, self.target)
        self.assignment_epoch = self.group_epoch

    def _reconcile(self, member: ConsumerMember, owned: Assignment | None, now_ms: int) -> None:
        """Kafka's CurrentAssignmentBuilder: revoke first, then move to the target epoch, then take partitions as
        their previous owners release them."""
        if member.state == UNREVOKED_PARTITIONS:
            if owned is None or _overlaps(owned, member.pending_revocation):
                return
            member.pending_revocation = {}
            member.revocation_deadline_ms = None
        elif member.state == STABLE and member.member_epoch == self.assignment_epoch:
            return
        target = self.target.get(member.member_id, {})
        keep = _intersect(member.assigned, target)
        revoke = _subtract(member.assigned, target)
        if revoke:
            member.assigned, member.pending_revocation = keep, revoke
            member.state = UNREVOKED_PARTITIONS
            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
            return
        held_by_others = self._held_by_others(member.member_id)
        for topic_id, indexes in _subtract(target, keep).items():
            free = {i for i in indexes if (topic_id, i) not in held_by_others}
            if free:
                keep.setdefault(topic_id, set()).update(free)
        member.assigned = keep
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, self.assignment_epoch
        member.state = UNRELEASED_PARTITIONS if _subtract(target, keep) else STABLE

    def _held_by_others(self, member_id: str) -> set[tuple[uuid.UUID, int]]:
        held = set()
        for other in self.members.values():
            if other.member_id != member_id:
                for assignment in (other.assigned, other.pending_revocation):
                    held.update((topic_id, i) for topic_id, indexes in assignment.items() for i in indexes)
        return held


def _copy(assignment: Assignment) -> Assignment:
    return {topic_id: set(indexes) for topic_id, indexes in assignment.items() if indexes}


def _intersect(a: Assignment, b: Assignment) -> Assignment:
    return {t: a[t] & b[t] for t in a if t in b and a[t] & b[t]}


def _subtract(a: Assignment, b: Assignment) -> Assignment:
    return {t: a[t] - b.get(t, set()) for t in a if a[t] - b.get(t, set())}


def _overlaps(a: Assignment, b: Assignment) -> bool:
    return bool(_intersect(a, b))


def _within(owned: Assignment | None, assigned: Assignment) -> bool:
    return owned is None or not _subtract(owned, assigned)
