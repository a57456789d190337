"""One share group's membership (KIP-932 ShareGroupHeartbeat) and its assignor.

Plain code with explicit `now_ms`, as consumer.py for KIP-848 groups, whose EpochGroup (members, group and
assignment epochs) it shares. A share group has no exclusive ownership: records, not partitions, are what members
hold (share_partition.py), so there is no revocation step. The group epoch is bumped when a member joins or leaves,
a subscription changes or a subscribed topic's partition count does; the target assignment is then recomputed and
every member moves to it at its next heartbeat, its member epoch becoming the group epoch, as Kafka's share-group
coordinator does. Members generate their own member ids (Kafka 4's clients and librdkafka send a UUID with epoch 0).
A member that stops heartbeating for the session timeout is removed, and the coordinator releases the records it
held.

`assign` is Kafka's simple share assignor in shape: each subscribed partition goes to at least one member; with
fewer members than partitions they are spread round-robin, with more, the members are spread over the partitions
so several members share one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping

from odradek.coordinator.assignors import Assignment, TopicInfo
from odradek.coordinator.consumer import EpochGroup
from odradek.errors import ErrorCode, KafkaError

LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"


@dataclasses.dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = dataclasses.field(default_factory=list)
    member_epoch: int = 0
    assigned: Assignment = dataclasses.field(default_factory=dict)
    session_deadline_ms: int = 0


@dataclasses.dataclass
class ShareHeartbeatResult:
    member_id: str
    member_epoch: int
    assignment: Assignment | None  # None: unchanged


def assign(subscriptions: Mapping[str, set[str]], topics: Mapping[str, TopicInfo]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {member: {} for member in subscriptions}
    for name, info in sorted(topics.items()):
        subscribers = sorted(m for m, wanted in subscriptions.items() if name in wanted)
        if not subscribers or info.partitions <= 0:
            continue
        for i in range(max(len(subscribers), info.partitions)):
            member = subscribers[i % len(subscribers)]
            result[member].setdefault(info.topic_id, set()).add(i % info.partitions)
    return result


class ShareGroup(EpochGroup):
    members: dict[str, ShareMember]

    def __init__(self, group_id: str, *, session_timeout_ms: int, heartbeat_interval_ms: int, now_ms: int):
        super().__init__(group_id, session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                         now_ms=now_ms)
        self.topic_view: dict[str, TopicInfo] = {}

    def heartbeat(self, *, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, topics: Mapping[str, TopicInfo], client_id: str,
                  client_host: str, now_ms: int) -> ShareHeartbeatResult:
        if not member_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch == LEAVE_EPOCH:
            if member_id not in self.members:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            self.remove(member_id, now_ms)
            return ShareHeartbeatResult(member_id, LEAVE_EPOCH, None)
        joined = member_epoch == 0
        if joined:
            if subscribed_topic_names is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            member = self.members.get(member_id)
            if member is None:
                member = self.members[member_id] = ShareMember(member_id)
                self._bump_epoch(now_ms)
        else:
            member = self.members.get(member_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member_epoch != member.member_epoch:
                raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The member epoch {member_epoch} is not the expected {member.member_epoch}.")
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(subscribed_topic_names)
            self._bump_epoch(now_ms)
        view = self._topic_view(topics)
        if view != self.topic_view:
            self.topic_view = view
            self._bump_epoch(now_ms)
        if self.assignment_epoch < self.group_epoch:
            target = assign({m.member_id: set(m.subscribed_topic_names) for m in self.members.values()},
                            self.topic_view)
            for other in self.members.values():
                other.assigned = target.get(other.member_id, {})
            self.assignment_epoch = self.group_epoch
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        moved = member.member_epoch != self.assignment_epoch
        member.member_epoch = self.assignment_epoch
        send = joined or moved
        return ShareHeartbeatResult(member_id, member.member_epoch,
                                    {t: set(p) for t, p in member.assigned.items()} if send else None)

    def remove(self, member_id: str, now_ms: int) -> None:
        del self.members[member_id]
        self._bump_epoch(now_ms)
        self.topic_view = self._topic_view(self.topic_view)

    def expired_members(self, now_ms: int) -> list[str]:
        return [m.member_id for m in self.members.values() if m.session_deadline_ms <= now_ms]

    def holds(self, member_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        member = self.members.get(member_id)
        return member is not None and partition in member.assigned.get(topic_id, ())

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if any(m.member_epoch != self.group_epoch for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def _topic_view(self, topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
        wanted = {name for m in self.members.values() for name in m.subscribed_topic_names}
        return {name: topics[name] for name in sorted(wanted) if name in topics}
