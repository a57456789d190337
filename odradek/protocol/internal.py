"""Kafka's internal record schemas, in the same DSL: what goes into __consumer_offsets and __transaction_state
record keys and values, and the consumer protocol's subscription/assignment blobs inside JoinGroup/SyncGroup.

These are byte-for-byte what Kafka writes (transcribed from group-coordinator/, transaction-coordinator/ and
clients/ message JSON), so Kafka's tools and consumers reading these topics or blobs see the same bytes.  Each
is stored as an int16 version followed by the body (`encode_versioned` / `decode_versioned`).  For
__consumer_offsets keys the version doubles as the record type: 0 and 1 are offset commits, 2 group metadata;
`CONSUMER_OFFSETS_KEY` is that family (with 15, a share group's ShareGroupStatePartitionMetadata).  Kafka 4's coordinator-record JSON restates the keys as "record type +
version 0"; the bytes are the same, and we keep the classic numbering that tools print.
"""

from __future__ import annotations

import struct

from .codec import decoder, encoder, run_decoder
from .errors import ProtocolError
from .schema import BYTES, INT8, INT16, INT32, INT64, STRING, UUID, array, field, message, struct as struct_

_VERSION = struct.Struct(">h")

# __consumer_offsets -------------------------------------------------------------------------------------------

OffsetCommitKey = message(
    "OffsetCommitKey", valid_versions="0-1", flexible_versions="none",
    fields=[
        field("group", STRING, "0+"),
        field("topic", STRING, "0+"),
        field("partition", INT32, "0+"),
    ],
)

GroupMetadataKey = message(
    "GroupMetadataKey", valid_versions="2", flexible_versions="none",
    fields=[
        field("group", STRING, "2"),
    ],
)

OffsetCommitValue = message(
    "OffsetCommitValue", valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("offset", INT64, "0+"),
        field("leader_epoch", INT32, "3+", default=-1, ignorable=True),
        field("metadata", STRING, "0+"),
        field("commit_timestamp", INT64, "0+"),
        field("expire_timestamp", INT64, "1", default=-1, ignorable=True),
    ],
)

GroupMetadataValue = message(
    "GroupMetadataValue", valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("protocol_type", STRING, "0+"),
        field("generation", INT32, "0+"),
        field("protocol", STRING, "0+", nullable_versions="0+"),
        field("leader", STRING, "0+", nullable_versions="0+"),
        field("current_state_timestamp", INT64, "2+", default=-1, ignorable=True),
        field("members", array(struct_("MemberMetadata", [
            field("member_id", STRING, "0+"),
            field("group_instance_id", STRING, "3+", nullable_versions="3+", default=None, ignorable=True),
            field("client_id", STRING, "0+"),
            field("client_host", STRING, "0+"),
            field("rebalance_timeout", INT32, "1+", ignorable=True),
            field("session_timeout", INT32, "0+"),
            field("subscription", BYTES, "0+"),
            field("assignment", BYTES, "0+"),
        ])), "0+"),
    ],
)

ShareGroupStatePartitionMetadataKey = message(  # record type 15: which topics a share group has state for
    "ShareGroupStatePartitionMetadataKey", valid_versions="15", flexible_versions="none",
    fields=[
        field("group_id", STRING, "15"),
    ],
)

_ShareTopicPartitions = struct_("TopicPartitionsInfo", [
    field("topic_id", UUID, "0+"),
    field("topic_name", STRING, "0+"),
    field("partitions", array(INT32), "0+"),
])

ShareGroupStatePartitionMetadataValue = message(
    "ShareGroupStatePartitionMetadataValue", valid_versions="0", flexible_versions="0+",
    fields=[
        field("initialized_topics", array(_ShareTopicPartitions), "0+"),
        field("deleting_topics", array(struct_("TopicInfo", [
            field("topic_id", UUID, "0+"),
            field("topic_name", STRING, "0+"),
        ])), "0+"),
    ],
)

CONSUMER_OFFSETS_KEY = {0: OffsetCommitKey, 1: OffsetCommitKey, 2: GroupMetadataKey,
                        15: ShareGroupStatePartitionMetadataKey}

# __transaction_state ------------------------------------------------------------------------------------------

TransactionLogKey = message(
    "TransactionLogKey", valid_versions="0", flexible_versions="none",
    fields=[
        field("transactional_id", STRING, "0"),
    ],
)

TransactionLogValue = message(
    "TransactionLogValue", valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("producer_id", INT64, "0+"),
        field("previous_producer_id", INT64, "1+", tagged_versions="1+", tag=0, default=-1),
        field("next_producer_id", INT64, "1+", tagged_versions="1+", tag=1, default=-1),
        field("producer_epoch", INT16, "0+"),
        field("transaction_timeout_ms", INT32, "0+"),
        field("transaction_status", INT8, "0+"),
        field("transaction_partitions", array(struct_("PartitionsSchema", [
            field("topic", STRING, "0+"),
            field("partition_ids", array(INT32), "0+"),
        ])), "0+", nullable_versions="0+"),
        field("transaction_last_update_timestamp_ms", INT64, "0+"),
        field("transaction_start_timestamp_ms", INT64, "0+"),
        field("client_transaction_version", INT16, "1+", tagged_versions="1+", tag=2, default=0),
    ],
)

# consumer embedded protocol (JoinGroup metadata / SyncGroup assignment of protocol type "consumer") -------------

ConsumerProtocolSubscription = message(
    "ConsumerProtocolSubscription", valid_versions="0-3", flexible_versions="none",
    fields=[
        field("topics", array(STRING), "0+"),
        field("user_data", BYTES, "0+", nullable_versions="0+", default=None),
        field("owned_partitions", array(struct_("TopicPartition", [
            field("topic", STRING, "1+"),
            field("partitions", array(INT32), "1+"),
        ])), "1+", ignorable=True),
        field("generation_id", INT32, "2+", default=-1, ignorable=True),
        field("rack_id", STRING, "3+", nullable_versions="3+", default=None, ignorable=True),
    ],
)

ConsumerProtocolAssignment = message(
    "ConsumerProtocolAssignment", valid_versions="0-3", flexible_versions="none",
    fields=[
        field("assigned_partitions", array(struct_("TopicPartition", [
            field("topic", STRING, "0+"),
            field("partitions", array(INT32), "0+"),
        ])), "0+"),
        field("user_data", BYTES, "0+", nullable_versions="0+", default=None),
    ],
)


def encode_versioned(schema: type, version: int, obj) -> bytes:
    """`obj` (an instance of `schema`) as Kafka stores it: int16 version, then the body at that version."""
    if version not in schema._schema.valid_versions:
        raise ValueError(f"{schema.__name__} has no version {version}")
    w = [_VERSION.pack(version)]
    encoder(schema, version)(obj, w)
    return b"".join(w)


def decode_versioned(schema_family, data) -> tuple:
    """Read an int16 version and the body after it; returns (version, obj).

    `schema_family` is one schema class, or a dict from version to class (`CONSUMER_OFFSETS_KEY`).  Bytes after
    the body are ignored: Kafka's consumer protocol allows newer versions to append fields, and reading a
    version newer than we know as our newest is what Kafka's ConsumerProtocol does too."""
    mv = memoryview(data).cast("B")
    if len(mv) < 2:
        raise ProtocolError("versioned record shorter than its version")
    (version,) = _VERSION.unpack_from(mv, 0)
    if isinstance(schema_family, dict):
        schema = schema_family.get(version)
        if schema is None:
            raise ProtocolError(f"unknown record version {version}")
    else:
        schema = schema_family
    valid = schema._schema.valid_versions
    read_as = min(version, valid.hi)
    if read_as < valid.lo:
        raise ProtocolError(f"{schema.__name__} has no version {version}")
    obj, _ = run_decoder(decoder(schema, read_as), mv, 2, f"{schema.__name__} v{version}")
    return version, obj
