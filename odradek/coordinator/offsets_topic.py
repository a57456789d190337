"""The internal topic __consumer_offsets: which partition holds a group, and its records in Kafka's exact formats.

A group lives in partition abs(String.hashCode(group_id)) % offsets.topic.num.partitions, computed the Java way so
the layout matches Kafka's. Keys and values carry a leading int16 version, as Kafka writes them: key version 0/1 is
an offset commit (group, topic, partition), key version 2 a classic group's metadata (group); a null value is a
tombstone that compaction keeps until delete.retention.ms and then drops.

The key and value schemas are declared here in the protocol DSL because odradek/protocol/internal.py does not exist
yet; they are field-for-field Kafka's OffsetCommitKey/OffsetCommitValue/GroupMetadataKey/GroupMetadataValue JSON
and belong there once it lands.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.coordinator.classic import ClassicGroup, ClassicGroupConfig, ClassicMember
from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.protocol.codec import decoder, encoder
from odradek.protocol.schema import BYTES, INT32, INT64, STRING, array, field, message, struct as struct_

OFFSETS_TOPIC = "__consumer_offsets"

OffsetCommitKey = message("OffsetCommitKey", valid_versions="0-1", flexible_versions="none", fields=[
    field("group", STRING, "0+"),
    field("topic", STRING, "0+"),
    field("partition", INT32, "0+"),
])

OffsetCommitValue = message("OffsetCommitValue", valid_versions="0-3", flexible_versions="none", fields=[
    field("offset", INT64, "0+"),
    field("leader_epoch", INT32, "3+", default=-1),
    field("metadata", STRING, "0+"),
    field("commit_timestamp", INT64, "0+"),
    field("expire_timestamp", INT64, "1", default=-1),
])

GroupMetadataKey = message("GroupMetadataKey", valid_versions="2", flexible_versions="none", fields=[
    field("group", STRING, "2"),
])

GroupMetadataValue = message("GroupMetadataValue", valid_versions="0-3", flexible_versions="none", fields=[
    field("protocol_type", STRING, "0+"),
    field("generation", INT32, "0+"),
    field("protocol", STRING, "0+", nullable_versions="0+"),
    field("leader", STRING, "0+", nullable_versions="0+"),
    field("current_state_timestamp", INT64, "2+", default=-1),
    field("members", array(struct_("MemberMetadata", [
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "3+", nullable_versions="3+", default=None),
        field("client_id", STRING, "0+"),
        field("client_host", STRING, "0+"),
        field("rebalance_timeout", INT32, "1+"),
        field("session_timeout", INT32, "0+"),
        field("subscription", BYTES, "0+"),
        field("assignment", BYTES, "0+"),
    ])), "0+"),
])

_VERSION = struct.Struct(">h")
OFFSET_KEY_VERSION, GROUP_KEY_VERSION = 1, 2


class OffsetRecord(NamedTuple):
    group_id: str
    topic: str
    partition: int
    committed: OffsetAndMetadata | None  # None: tombstone


class GroupRecord(NamedTuple):
    group_id: str
    value: object | None  # a GroupMetadataValue, or None for a tombstone


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs (x & 0x7fffffff, not Math.abs) of the hash, modulo the partition count."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions


def _encode(cls, version: int, obj) -> bytes:
    out = [_VERSION.pack(version)]
    encoder(cls, version)(obj, out)
    return b"".join(out)


def offset_commit_record(group_id: str, topic: str, partition: int,
                         committed: OffsetAndMetadata | None) -> tuple[bytes, bytes | None]:
    """(key, value); value v1 when the commit carries an explicit expire timestamp (Kafka's rule: v1 has no
    leader epoch, so it is not kept), else v3."""
    key = _encode(OffsetCommitKey, OFFSET_KEY_VERSION, OffsetCommitKey(group=group_id, topic=topic,
                                                                       partition=partition))
    if committed is None:
        return key, None
    explicit_expiry = committed.expire_timestamp_ms >= 0
    value = OffsetCommitValue(offset=committed.offset, metadata=committed.metadata,
                              leader_epoch=-1 if explicit_expiry else committed.leader_epoch,
                              commit_timestamp=committed.commit_timestamp_ms,
                              expire_timestamp=committed.expire_timestamp_ms)
    return key, _encode(OffsetCommitValue, 1 if explicit_expiry else 3, value)


def group_metadata_record(group_id: str, group: ClassicGroup | None) -> tuple[bytes, bytes | None]:
    """(key, value) for a classic group's metadata (value v3), or its tombstone when `group` is None."""
    key = _encode(GroupMetadataKey, GROUP_KEY_VERSION, GroupMetadataKey(group=group_id))
    if group is None:
        return key, None
    members = [GroupMetadataValue.MemberMetadata(
        member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
        rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
        subscription=m.metadata(group.protocol_name) if group.protocol_name else b"", assignment=m.assignment)
        for m in group.members.values()]
    value = GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation,
                               protocol=group.protocol_name, leader=group.leader,
                               current_state_timestamp=group.state_timestamp_ms, members=members)
    return key, _encode(GroupMetadataValue, 3, value)


def parse_record(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord | None:
    """One __consumer_offsets record; None for key versions this broker does not keep (KIP-848 group records)."""
    view = memoryview(key)
    (version,) = _VERSION.unpack_from(view)
    if version in (0, 1):
        k, _ = decoder(OffsetCommitKey, version)(view, 2)
        committed = None
        if value is not None:
            (value_version,) = _VERSION.unpack_from(value)
            v, _ = decoder(OffsetCommitValue, min(value_version, 3))(memoryview(value), 2)
            committed = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                          v.expire_timestamp)
        return OffsetRecord(k.group, k.topic, k.partition, committed)
    if version == GROUP_KEY_VERSION:
        k, _ = decoder(GroupMetadataKey, version)(view, 2)
        if value is None:
            return GroupRecord(k.group, None)
        (value_version,) = _VERSION.unpack_from(value)
        v, _ = decoder(GroupMetadataValue, min(value_version, 3))(memoryview(value), 2)
        return GroupRecord(k.group, v)
    return None


def restore_classic_group(group_id: str, value, config: ClassicGroupConfig, now_ms: int) -> ClassicGroup:
    members = [ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                             m.rebalance_timeout, value.protocol_type, [(value.protocol or "", m.subscription)],
                             m.assignment) for m in value.members]
    return ClassicGroup.restored(group_id, config, protocol_type=value.protocol_type or None,
                                 generation=value.generation, protocol_name=value.protocol, leader=value.leader,
                                 members=members, state_timestamp_ms=value.current_state_timestamp, now_ms=now_ms)
