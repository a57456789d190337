"""One classic consumer group (JoinGroup / SyncGroup / Heartbeat / LeaveGroup): Kafka's rebalance state machine.

Plain code: every method takes `now_ms` and nothing here sleeps or touches a socket, so the rules can be tested by
calling methods in order. A request that has to wait (JoinGroup until every member has rejoined, SyncGroup until the
leader's assignment) gets `Wait(member_id)` back; its answer appears later in `outbox` as (kind, member_id, result), produced by
another member's request or by `expire(now_ms)` once a deadline reported by `next_deadline()` has passed. The
asyncio layer (coordinator.py) owns the futures and the timer and delivers the outbox after every call.

States are Kafka's: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead once the coordinator
drops the group.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from typing import NamedTuple

from odradek.errors import ErrorCode, KafkaError

JOIN, SYNC = "join", "sync"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Wait(NamedTuple):
    """The answer to this member's request comes later, through the group's outbox."""

    member_id: str


class ClassicGroupConfig(NamedTuple):
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    initial_rebalance_delay_ms: int
    max_size: int


@dataclasses.dataclass
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = dataclasses.field(default_factory=list)
    skip_assignment: bool = False  # KIP-814: the leader of a Stable group, told not to run its assignor


@dataclasses.dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclasses.dataclass
class ClassicMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    heartbeat_deadline_ms: int = 0

    def metadata(self, protocol_name: str) -> bytes:
        return next((data for name, data in self.protocols if name == protocol_name), b"")


class ClassicGroup:
    def __init__(self, group_id: str, config: ClassicGroupConfig, now_ms: int):
        self.group_id = group_id
        self.config = config
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation = 0
        self.leader: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id handed out with MEMBER_ID_REQUIRED -> expiry
        self.join_deadline_ms: int | None = None
        self.initial_delay_cap_ms: int | None = None  # set while group.initial.rebalance.delay.ms is running
        self.member_joined_during_delay = False
        self.outbox: list[tuple[str, str, JoinResult | SyncResult]] = []
        self.metadata_changed = False  # the coordinator writes the group's metadata record and clears this

    @classmethod
    def restored(cls, group_id: str, config: ClassicGroupConfig, *, protocol_type: str | None, generation: int,
                 protocol_name: str | None, leader: str | None, members: list[ClassicMember],
                 state_timestamp_ms: int, now_ms: int) -> "ClassicGroup":
        """A group as its last metadata record left it: Stable when it had members (they resume heartbeating),
        Empty otherwise."""
        group = cls(group_id, config, now_ms)
        group.protocol_type, group.generation = protocol_type, generation
        group.protocol_name, group.leader = protocol_name, leader
        group.state_timestamp_ms = state_timestamp_ms if state_timestamp_ms >= 0 else now_ms
        for member in members:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        if members:
            group.state = GroupState.STABLE
        return group

    # ------------------------------------------------------------------------------------------ requests
    def join(self, *, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool, now_ms: int,
             supports_skip_assignment: bool = True) -> JoinResult | Wait:
        """supports_skip_assignment: the request is JoinGroup v9+, which can tell a leader to skip assigning."""
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            raise KafkaError(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not self._supports(protocol_type, protocols):
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        fresh = ClassicMember(member_id, instance_id, client_id, client_host, session_timeout_ms,
                              rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms,
                              protocol_type, list(protocols))
        if member_id == "":
            answer = self._join_unknown(fresh, require_known_member_id, now_ms, supports_skip_assignment)
        else:
            answer = self._join_known(fresh, now_ms)
        self._maybe_complete_join(now_ms)
        return answer

    def sync(self, *, member_id: str, instance_id: str | None, generation: int, protocol_type: str | None,
             protocol_name: str | None, assignments: dict[str, bytes], now_ms: int) -> SyncResult | Wait:
        member = self._validate_member(member_id, instance_id)
        if generation != self.generation:
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != self.protocol_type
                or protocol_name is not None and protocol_name != self.protocol_name):
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if self.state is GroupState.PREPARING_REBALANCE:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.STABLE:
            return self._sync_result(member)
        member.awaiting_sync = True
        if member_id == self.leader:
            for each in self.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            self._transition(GroupState.STABLE, now_ms)
            self.metadata_changed = True
            for each in self.members.values():
                if each.awaiting_sync:
                    each.awaiting_sync = False
                    self.outbox.append((SYNC, each.member_id, self._sync_result(each)))
        return Wait(member_id)

    def heartbeat(self, *, member_id: str, instance_id: str | None, generation: int, now_ms: int) -> None:
        """Returns when the member is in good standing; raises REBALANCE_IN_PROGRESS to make it rejoin."""
        member = self._validate_member(member_id, instance_id)
        if generation != self.generation:
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)

    def leave(self, members: list[tuple[str, str | None]], now_ms: int) -> list[ErrorCode]:
        """One error code per (member id, group.instance.id) leaving."""
        codes = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = self.static_members.get(instance_id)
                if known is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if self.pending_members.pop(member_id, None) is not None:
                codes.append(ErrorCode.NONE)
            elif member_id in self.members:
                self._remove_member(member_id, now_ms)
                codes.append(ErrorCode.NONE)
            else:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
        self._maybe_complete_join(now_ms)
        return codes

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int) -> None:
        """Kafka's rules: members commit in their generation; a commit without one only into an empty group (then
        whatever member id comes with it, as Kafka's ClassicGroup.validateOffsetCommit)."""
        if generation < 0 and self.state is GroupState.EMPTY:
            return
        if generation >= 0 or member_id or instance_id is not None:
            self._validate_member(member_id, instance_id)
            if generation != self.generation:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        elif self.state is not GroupState.EMPTY:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is GroupState.COMPLETING_REBALANCE:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)

    # -------------------------------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        deadlines = list(self.pending_members.values())
        deadlines += [m.heartbeat_deadline_ms for m in self.members.values() if not self._exempt_from_expiry(m)]
        if self.state is GroupState.PREPARING_REBALANCE and self.join_deadline_ms is not None:
            deadlines.append(self.join_deadline_ms)
        return min(deadlines, default=None)

    def expire(self, now_ms: int) -> None:
        """Drop members whose session ran out and finish a join phase whose time is up."""
        for member_id, deadline in list(self.pending_members.items()):
            if deadline <= now_ms:
                del self.pending_members[member_id]
        for member in list(self.members.values()):
            if not self._exempt_from_expiry(member) and member.heartbeat_deadline_ms <= now_ms:
                self._remove_member(member.member_id, now_ms)
        self._maybe_complete_join(now_ms)

    # -------------------------------------------------------------------------------------------- views
    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_member_protocols(self) -> list[bytes]:
        """Each member's metadata for the group's protocol (the consumer subscriptions when protocol_type is
        "consumer")."""
        if self.protocol_name is None:
            return []
        return [m.metadata(self.protocol_name) for m in self.members.values()]

    def describe_members(self) -> list[tuple[ClassicMember, bytes, bytes]]:
        """(member, metadata, assignment); Kafka shows the last two only once the group is Stable."""
        stable = self.state is GroupState.STABLE
        return [(m, m.metadata(self.protocol_name) if stable else b"", m.assignment if stable else b"")
                for m in self.members.values()]

    # ---------------------------------------------------------------------------------------- internals
    def _supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if self.is_empty:
            return True
        return protocol_type == self.protocol_type and bool(self._common_protocols() & {n for n, _ in protocols})

    def _common_protocols(self) -> set[str]:
        members = iter(self.members.values())
        common = {name for name, _ in next(members).protocols}
        for member in members:
            common &= {name for name, _ in member.protocols}
        return common

    def _join_unknown(self, fresh: ClassicMember, require_known_member_id: bool, now_ms: int,
                      supports_skip_assignment: bool):
        fresh.member_id = f"{fresh.instance_id or fresh.client_id}-{uuid.uuid4()}"
        if fresh.instance_id is not None and fresh.instance_id in self.static_members:
            return self._replace_static_member(fresh, now_ms, supports_skip_assignment)
        if len(self.members) >= self.config.max_size:
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if fresh.instance_id is None and require_known_member_id:
            self.pending_members[fresh.member_id] = now_ms + fresh.session_timeout_ms
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, fresh.member_id)
        self._add_member_and_rebalance(fresh, now_ms)
        return Wait(fresh.member_id)

    def _join_known(self, fresh: ClassicMember, now_ms: int):
        member_id = fresh.member_id
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            if len(self.members) >= self.config.max_size:
                raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED)
            self._add_member_and_rebalance(fresh, now_ms)
            return Wait(member_id)
        member = self._validate_member(member_id, fresh.instance_id)
        unchanged = member.protocols == fresh.protocols
        if self.state is GroupState.COMPLETING_REBALANCE and unchanged:
            return self._join_result(member)
        if self.state is GroupState.STABLE and unchanged and member_id != self.leader:
            return self._join_result(member)
        self._update_member(member, fresh)
        member.awaiting_join = True
        if self.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now_ms)
        return Wait(member_id)

    def _replace_static_member(self, fresh: ClassicMember, now_ms: int, supports_skip_assignment: bool):
        """A static member restarted: its new member id takes over the old one's place and assignment. In a Stable
        group whose protocol stays the one selected, that is all (Kafka's updateStaticMemberAndRebalance): no
        rebalance, even for the leader, which JoinGroup v9+ tells to skip its assignor (KIP-814) and older versions
        keep from assigning by naming the old leader id, so the other members see nothing."""
        old_id = self.static_members[fresh.instance_id]
        old = self.members.pop(old_id)
        self._answer_removed(old, ErrorCode.FENCED_INSTANCE_ID)
        fresh.assignment = old.assignment
        fresh.heartbeat_deadline_ms = now_ms + fresh.session_timeout_ms
        self.members[fresh.member_id] = fresh
        self.static_members[fresh.instance_id] = fresh.member_id
        old_leader = self.leader
        if self.leader == old_id:
            self.leader = fresh.member_id
        self.metadata_changed = True
        if self.state is GroupState.STABLE and self._select_protocol() == self.protocol_name:
            if fresh.member_id != self.leader:
                return self._join_result(fresh)
            if supports_skip_assignment:
                return dataclasses.replace(self._join_result(fresh), skip_assignment=True)
            return dataclasses.replace(self._join_result(fresh), leader=old_leader or "", members=[])
        fresh.awaiting_join = True
        if self.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now_ms)
        return Wait(fresh.member_id)

    def _add_member_and_rebalance(self, member: ClassicMember, now_ms: int) -> None:
        if self.is_empty:
            self.protocol_type = member.protocol_type
        member.awaiting_join = True
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id
        if self.state is GroupState.PREPARING_REBALANCE:
            self.member_joined_during_delay = True
        else:
            self._prepare_rebalance(now_ms)

    @staticmethod
    def _update_member(member: ClassicMember, fresh: ClassicMember) -> None:
        member.protocols = fresh.protocols
        member.session_timeout_ms = fresh.session_timeout_ms
        member.rebalance_timeout_ms = fresh.rebalance_timeout_ms
        member.client_id, member.client_host = fresh.client_id, fresh.client_host

    def _validate_member(self, member_id: str, instance_id: str | None) -> ClassicMember:
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:  # an instance id the group does not know, as Kafka's ClassicGroup.validateMember
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if known != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            for member in self.members.values():
                member.assignment = b""
                if member.awaiting_sync:
                    member.awaiting_sync = False
                    self.outbox.append((SYNC, member.member_id, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
        rebalance_timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        delay = self.config.initial_rebalance_delay_ms
        if self.state is GroupState.EMPTY and delay > 0:
            self.join_deadline_ms = now_ms + delay
            self.initial_delay_cap_ms = now_ms + max(rebalance_timeout, delay)
            self.member_joined_during_delay = False
        else:
            self.join_deadline_ms = now_ms + rebalance_timeout
            self.initial_delay_cap_ms = None
        self._transition(GroupState.PREPARING_REBALANCE, now_ms)

    def _maybe_complete_join(self, now_ms: int) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        due = self.join_deadline_ms is not None and self.join_deadline_ms <= now_ms
        if self.initial_delay_cap_ms is not None:
            if not due:
                return
            if self.member_joined_during_delay and now_ms < self.initial_delay_cap_ms:
                self.join_deadline_ms = min(now_ms + self.config.initial_rebalance_delay_ms,
                                            self.initial_delay_cap_ms)
                self.member_joined_during_delay = False
                return
        elif not due and not (all(m.awaiting_join for m in self.members.values()) and not self.pending_members):
            return
        self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        for member in list(self.members.values()):
            if not member.awaiting_join:
                self._remove_member(member.member_id, now_ms, rebalance=False)
        self.join_deadline_ms = self.initial_delay_cap_ms = None
        self.generation += 1
        self.metadata_changed = True
        if not self.members:
            self.protocol_name = None
            self.leader = None
            self._transition(GroupState.EMPTY, now_ms)
            return
        self.protocol_name = self._select_protocol()
        self._transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in self.members.values():
            member.awaiting_join = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self.outbox.append((JOIN, member.member_id, self._join_result(member)))

    def _select_protocol(self) -> str:
        """Each member votes for the first protocol in its own preference order that every member supports."""
        common = self._common_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=votes.__getitem__)

    def _join_result(self, member: ClassicMember) -> JoinResult:
        members = []
        if member.member_id == self.leader:
            members = [(m.member_id, m.instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]
        return JoinResult(ErrorCode.NONE, member.member_id, self.generation, self.protocol_type, self.protocol_name,
                          self.leader or "", members)

    def _sync_result(self, member: ClassicMember) -> SyncResult:
        return SyncResult(ErrorCode.NONE, self.protocol_type, self.protocol_name, member.assignment)

    def _remove_member(self, member_id: str, now_ms: int, *, rebalance: bool = True) -> None:
        member = self.members.pop(member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self._answer_removed(member, ErrorCode.UNKNOWN_MEMBER_ID)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        if rebalance and self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)

    def _answer_removed(self, member: ClassicMember, error: ErrorCode) -> None:
        if member.awaiting_join:
            self.outbox.append((JOIN, member.member_id, JoinResult(error, member.member_id)))
        if member.awaiting_sync:
            self.outbox.append((SYNC, member.member_id, SyncResult(error)))

    @staticmethod
    def _exempt_from_expiry(member: ClassicMember) -> bool:
        """A member with a JoinGroup or SyncGroup outstanding is waiting on us, not failing to heartbeat."""
        return member.awaiting_join or member.awaiting_sync

    def _transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms
