"""The internal topic __consumer_offsets: which partition holds a group, and its records in Kafka's exact formats.

A group lives in partition abs(String.hashCode(group_id)) % the partition count of __consumer_offsets, computed the
Java way so the layout matches Kafka's; offsets.topic.num.partitions only sizes the topic when it is created. Keys
and values carry a leading int16 version, as Kafka writes them: key version 0/1 is an offset commit (group, topic,
partition), key version 2 a classic group's metadata (group), 15 the topics a share group has state for (Kafka's
ShareGroupStatePartitionMetadata: the share coordinator's record of where to look); a null value is a tombstone that compaction keeps
until delete.retention.ms and then drops.

The key and value schemas are Kafka's, declared once in odradek/protocol/internal.py.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from odradek.coordinator.classic import ClassicGroup, ClassicGroupConfig, ClassicMember
from odradek.coordinator.offsets import OffsetAndMetadata
from odradek.protocol.internal import (CONSUMER_OFFSETS_KEY, GroupMetadataKey, GroupMetadataValue, OffsetCommitKey,
                                       OffsetCommitValue, ShareGroupStatePartitionMetadataKey,
                                       ShareGroupStatePartitionMetadataValue, decode_versioned, encode_versioned)

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION, GROUP_KEY_VERSION, SHARE_TOPICS_KEY_VERSION = 1, 2, 15


class OffsetRecord(NamedTuple):
    group_id: str
    topic: str
    partition: int
    committed: OffsetAndMetadata | None  # None: tombstone


class GroupRecord(NamedTuple):
    group_id: str
    value: object | None  # a GroupMetadataValue, or None for a tombstone


class ShareTopicsRecord(NamedTuple):
    group_id: str
    topics: dict[uuid.UUID, str] | None  # topic id -> name; None for a tombstone


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


def partition_count(topics, topic: str, configured: int) -> int:
    """The partitions a coordinator's topic spreads its keys over: those the topic has in the catalogue `topics`
    once it exists, `configured` (what it is created with) before."""
    existing = topics.get(topic)
    return len(existing.partitions) if existing is not None else configured


def offset_commit_record(group_id: str, topic: str, partition: int,
                         committed: OffsetAndMetadata | None) -> tuple[bytes, bytes | None]:
    """(key, value); value v1 when the commit carries an explicit expire timestamp (Kafka's rule: v1 has no
    leader epoch, so it is not kept), else v3."""
    key = encode_versioned(OffsetCommitKey, OFFSET_KEY_VERSION, OffsetCommitKey(group=group_id, topic=topic,
                                                                       partition=partition))
    if committed is None:
        return key, None
    explicit_expiry = committed.expire_timestamp_ms >= 0
    value = OffsetCommitValue(offset=committed.offset, metadata=committed.metadata,
                              leader_epoch=-1 if explicit_expiry else committed.leader_epoch,
                              commit_timestamp=committed.commit_timestamp_ms,
                              expire_timestamp=committed.expire_timestamp_ms)
    return key, encode_versioned(OffsetCommitValue, 1 if explicit_expiry else 3, value)


def group_metadata_record(group_id: str, group: ClassicGroup | None) -> tuple[bytes, bytes | None]:
    """(key, value) for a classic group's metadata (value v3), or its tombstone when `group` is None."""
    key = encode_versioned(GroupMetadataKey, GROUP_KEY_VERSION, GroupMetadataKey(group=group_id))
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
    return key, encode_versioned(GroupMetadataValue, 3, value)


def share_topics_record(group_id: str, topics: dict[uuid.UUID, tuple[str, int]] | None
                        ) -> tuple[bytes, bytes | None]:
    """(key, value) naming the topics (id -> (name, partition count)) a share group has state for; the tombstone
    when `topics` is None."""
    key = encode_versioned(ShareGroupStatePartitionMetadataKey, SHARE_TOPICS_KEY_VERSION,
                           ShareGroupStatePartitionMetadataKey(group_id=group_id))
    if topics is None:
        return key, None
    Topic = ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo
    value = ShareGroupStatePartitionMetadataValue(initialized_topics=[
        Topic(topic_id=topic_id, topic_name=name, partitions=list(range(count)))
        for topic_id, (name, count) in sorted(topics.items())], deleting_topics=[])
    return key, encode_versioned(ShareGroupStatePartitionMetadataValue, 0, value)


def parse_record(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord | ShareTopicsRecord | None:
    """One __consumer_offsets record; None for key versions this broker does not keep (KIP-848 group records)."""
    if int.from_bytes(key[:2], "big", signed=True) not in CONSUMER_OFFSETS_KEY:
        return None
    version, k = decode_versioned(CONSUMER_OFFSETS_KEY, key)
    if version == SHARE_TOPICS_KEY_VERSION:
        if value is None:
            return ShareTopicsRecord(k.group_id, None)
        v = decode_versioned(ShareGroupStatePartitionMetadataValue, value)[1]
        return ShareTopicsRecord(k.group_id, {t.topic_id: t.topic_name for t in v.initialized_topics})
    if version == GROUP_KEY_VERSION:
        return GroupRecord(k.group, None if value is None else decode_versioned(GroupMetadataValue, value)[1])
    committed = None
    if value is not None:
        _, v = decode_versioned(OffsetCommitValue, value)
        committed = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
    return OffsetRecord(k.group, k.topic, k.partition, committed)


def restore_classic_group(group_id: str, value, config: ClassicGroupConfig, now_ms: int) -> ClassicGroup:
    members = [ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                             m.rebalance_timeout, value.protocol_type, [(value.protocol or "", m.subscription)],
                             m.assignment) for m in value.members]
    return ClassicGroup.restored(group_id, config, protocol_type=value.protocol_type or None,
                                 generation=value.generation, protocol_name=value.protocol, leader=value.leader,
                                 members=members, state_timestamp_ms=value.current_state_timestamp, now_ms=now_ms)
