"""The internal topic __share_group_state: where each share-partition's state is kept, in Kafka's record format.

Kafka's share coordinator keys a share-partition as "group:topicId:partition" and places it in partition
abs(hashCode) % share.coordinator.state.topic.num.partitions of __share_group_state (odradek/coordinator/
offsets_topic.py's Java hash); the topic is compacted, so the latest record of a key is its state. Records are
Kafka 4's coordinator records: the key is an int16 record type (0: ShareSnapshot) and the ShareSnapshotKey body
(GroupId string, TopicId uuid, Partition int32); the value an int16 version (0) and the flexible ShareSnapshotValue
(SnapshotEpoch, StateEpoch, LeaderEpoch int32, StartOffset int64, tagged DeliveryCompleteCount, CreateTimestamp and
WriteTimestamp int64, StateBatches of FirstOffset/LastOffset int64, DeliveryState int8 0/2/4, DeliveryCount int16).
A null value is the tombstone of a share-partition whose group's offsets were deleted. Kafka also writes
ShareUpdate records (type 1, deltas between snapshots); we write a whole snapshot at every change, which any
reader of Kafka's format reads as Kafka's own snapshots, and we read ShareUpdate records by applying their batches.
"""

from __future__ import annotations

import base64
import functools
import struct
import uuid
from typing import NamedTuple

from odradek.coordinator.offsets_topic import partition_for
from odradek.protocol.codec import decoder, encoder, run_decoder
from odradek.protocol.internal import decode_versioned, encode_versioned
from odradek.protocol.schema import INT8, INT16, INT32, INT64, STRING, UUID, array, field, message, struct as struct_

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_TYPE, UPDATE_TYPE = 0, 1
ACKNOWLEDGED_STATE, ARCHIVED_STATE = 2, 4  # DeliveryState in the state batches (0 is available)

_INT16 = struct.Struct(">h")

_StateBatch = struct_("StateBatch", [
    field("first_offset", INT64, "0+"),
    field("last_offset", INT64, "0+"),
    field("delivery_state", INT8, "0+"),
    field("delivery_count", INT16, "0+"),
])

ShareStateKey = message(  # ShareSnapshotKey and ShareUpdateKey have the same fields
    "ShareStateKey", valid_versions="0", flexible_versions="none",
    fields=[
        field("group_id", STRING, "0"),
        field("topic_id", UUID, "0"),
        field("partition", INT32, "0"),
    ],
)

ShareSnapshotValue = message(
    "ShareSnapshotValue", valid_versions="0", flexible_versions="0+",
    fields=[
        field("snapshot_epoch", INT32, "0+"),
        field("state_epoch", INT32, "0+"),
        field("leader_epoch", INT32, "0+"),
        field("start_offset", INT64, "0+"),
        field("delivery_complete_count", INT32, "0+", tagged_versions="0+", tag=0, default=-1),
        field("create_timestamp", INT64, "0+"),
        field("write_timestamp", INT64, "0+"),
        field("state_batches", array(_StateBatch), "0+"),
    ],
)

ShareUpdateValue = message(
    "ShareUpdateValue", valid_versions="0", flexible_versions="0+",
    fields=[
        field("snapshot_epoch", INT32, "0+"),
        field("leader_epoch", INT32, "0+"),
        field("start_offset", INT64, "0+"),
        field("delivery_complete_count", INT32, "0+", tagged_versions="0+", tag=0, default=-1),
        field("state_batches", array(_StateBatch), "0+"),
    ],
)


class ShareStateRecord(NamedTuple):
    key: tuple[str, uuid.UUID, int]  # (group, topic id, partition)
    kind: int  # SNAPSHOT_TYPE or UPDATE_TYPE
    start_offset: int
    batches: list[tuple[int, int, int, int]]  # (first, last, state, delivery count)
    snapshot_epoch: int
    deleted: bool
    state_epoch: int = 0  # a ShareUpdate carries none: the snapshot's before it holds
    leader_epoch: int = -1


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: the topic id in Kafka's base64 form."""
    return f"{group_id}:{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:{partition}"


@functools.lru_cache(maxsize=65536)  # asked at every state write; Java's string hash loops in Python
def state_partition_for(group_id: str, topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    return partition_for(coordinator_key(group_id, topic_id, partition), partitions)


def _key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    """The int16 record type, then the key body (version 0 for both types)."""
    out = [_INT16.pack(record_type)]
    encoder(ShareStateKey, 0)(ShareStateKey(group_id=group_id, topic_id=topic_id, partition=partition), out)
    return b"".join(out)


def snapshot_record(group_id: str, topic_id: uuid.UUID, partition: int, *, start_offset: int,
                    batches: list[tuple[int, int, int, int]], snapshot_epoch: int, create_ms: int,
                    write_ms: int, state_epoch: int = 0, leader_epoch: int = -1) -> tuple[bytes, bytes]:
    value = ShareSnapshotValue(
        snapshot_epoch=snapshot_epoch, state_epoch=state_epoch, leader_epoch=leader_epoch,
        start_offset=start_offset, delivery_complete_count=delivery_complete_count(batches),
        create_timestamp=create_ms, write_timestamp=write_ms,
        state_batches=[_StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                       for f, la, s, c in batches])
    return _key(SNAPSHOT_TYPE, group_id, topic_id, partition), encode_versioned(ShareSnapshotValue, 0, value)


def tombstone(group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[bytes, None]:
    return _key(SNAPSHOT_TYPE, group_id, topic_id, partition), None


def parse_record(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    """One __share_group_state record; None for a record type this broker does not know."""
    (record_type,) = _INT16.unpack_from(key, 0)
    if record_type not in (SNAPSHOT_TYPE, UPDATE_TYPE):
        return None
    k, _ = run_decoder(decoder(ShareStateKey, 0), memoryview(key), 2, "ShareStateKey")
    ident = (k.group_id, k.topic_id, k.partition)
    if value is None:
        return ShareStateRecord(ident, record_type, -1, [], 0, True)
    schema = ShareSnapshotValue if record_type == SNAPSHOT_TYPE else ShareUpdateValue
    _, v = decode_versioned(schema, value)
    batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches]
    return ShareStateRecord(ident, record_type, v.start_offset, batches, v.snapshot_epoch, False,
                            getattr(v, "state_epoch", 0), v.leader_epoch)


def delivery_complete_count(batches: list[tuple[int, int, int, int]]) -> int:
    """The records past the start offset that are done (acknowledged or archived): KIP-1226's count, which the
    share group's lag leaves out."""
    return sum(last - first + 1 for first, last, state, _ in batches if state in (ACKNOWLEDGED_STATE, ARCHIVED_STATE))


def merge_batches(old: list[tuple[int, int, int, int]], new: list[tuple[int, int, int, int]],
                  start_offset: int) -> list[tuple[int, int, int, int]]:
    """`old` with `new` written over it (a newer batch wins on the offsets it covers) and nothing below
    `start_offset`: how Kafka's share coordinator applies a write (a ShareUpdate) to the state it holds. Ranges,
    never offsets one by one: the batches are sorted and do not overlap within `old` or within `new`."""
    out = []
    pending = sorted(new)
    for first, last, state, count in sorted(old):
        for n_first, n_last, _, _ in pending:  # cut what any new batch covers out of this old one
            if n_last < first or n_first > last:
                continue
            if n_first > first:
                out.append((first, n_first - 1, state, count))
            first = n_last + 1
            if first > last:
                break
        if first <= last:
            out.append((first, last, state, count))
    merged = sorted(out + pending)
    return [(max(first, start_offset), last, state, count) for first, last, state, count in merged
            if last >= start_offset]
