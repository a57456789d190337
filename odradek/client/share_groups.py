"""Share groups (KIP-932) through the Admin: list them, describe their members, read and move their start offsets,
delete them; what `odradek share-groups` and the console's share-group pages both ask.

confluent-kafka's AdminClient has no share-group calls, so these go over Admin.call (odradek.client.connection, at
the versions below, logged in with the Admin's security settings) to the first bootstrap server, the coordinator of
every share group on a single node. A broker's error is raised as a ClientError named after its code.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping

from odradek.client.admin import Admin, raise_for_error
from odradek.protocol import api

VERSIONS = {"ListGroups": (5, 5), "ShareGroupDescribe": (1, 1), "DescribeShareGroupOffsets": (0, 1),
            "AlterShareGroupOffsets": (0, 0), "DeleteGroups": (0, 2)}


@dataclasses.dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    partitions: list[tuple[str, int]]  # assigned (topic, partition), in order


@dataclasses.dataclass(frozen=True)
class ShareGroupInfo:
    group_id: str
    state: str  # as the broker names it: Empty, Stable, Dead
    epoch: int
    assignor: str
    members: list[ShareMember]


@dataclasses.dataclass(frozen=True)
class ShareOffset:
    """A share-partition's start offset (every record before it is done) and lag (records from it to the high
    watermark not done yet); None where the broker has none."""
    topic: str
    topic_id: uuid.UUID
    partition: int
    start_offset: int | None
    lag: int | None


def _call(admin: Admin, name: str, **fields):
    return admin.call(name, VERSIONS[name], **fields)


def list_share_groups(admin: Admin) -> list[tuple[str, str]]:
    """(group id, state) of every share group, by id (ListGroups of type share)."""
    answer = _call(admin, "ListGroups", states_filter=[], types_filter=["share"])
    raise_for_error(answer.error_code, None)
    return sorted((g.group_id, g.group_state) for g in answer.groups)


def describe_share_groups(admin: Admin, group_ids: Iterable[str]) -> list[ShareGroupInfo]:
    """The groups' states and members, in one ShareGroupDescribe; a group the broker does not know raises
    GROUP_ID_NOT_FOUND."""
    group_ids = list(group_ids)
    if not group_ids:
        return []
    answer = _call(admin, "ShareGroupDescribe", group_ids=group_ids, include_authorized_operations=False)
    described = []
    for group in answer.groups:
        raise_for_error(group.error_code, group.error_message)
        members = [ShareMember(m.member_id, m.client_id, m.client_host,
                               [(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions])
                   for m in group.members]
        described.append(ShareGroupInfo(group.group_id, group.group_state, group.group_epoch, group.assignor_name,
                                        sorted(members, key=lambda m: m.member_id)))
    return described


def share_group_offsets(admin: Admin, group_id: str) -> list[ShareOffset]:
    """Every share-partition the group has state for, with its start offset and lag (DescribeShareGroupOffsets)."""
    Request = api("DescribeShareGroupOffsets").request
    answer = _call(admin, "DescribeShareGroupOffsets", groups=[
        Request.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]).groups[0]
    raise_for_error(answer.error_code, answer.error_message)
    return sorted((ShareOffset(t.topic_name, t.topic_id, p.partition_index,
                               p.start_offset if p.start_offset >= 0 else None, p.lag if p.lag >= 0 else None)
                   for t in answer.topics for p in t.partitions), key=lambda o: (o.topic, o.partition))


def alter_share_group_offsets(admin: Admin, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """New start offsets for an empty share group (NON_EMPTY_GROUP while it has members)."""
    Request = api("AlterShareGroupOffsets").request
    by_topic: dict[str, list] = {}
    for (topic, index), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            Request.AlterShareGroupOffsetsRequestPartition(partition_index=index, start_offset=offset))
    answer = _call(admin, "AlterShareGroupOffsets", group_id=group_id, topics=[
        Request.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=parts) for t, parts in by_topic.items()])
    raise_for_error(answer.error_code, answer.error_message)
    for topic in answer.responses:
        for p in topic.partitions:
            raise_for_error(p.error_code, p.error_message)


def delete_share_group(admin: Admin, group_id: str) -> None:
    """Delete an empty share group and its share-partitions' state (NON_EMPTY_GROUP while it has members)."""
    result = _call(admin, "DeleteGroups", groups_names=[group_id]).results[0]
    raise_for_error(result.error_code, None)
