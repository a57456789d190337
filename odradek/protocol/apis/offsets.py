"""Partition offset queries and log truncation from the front.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.

Kafka 4.0 removed the oldest versions of some of these from its JSON (ListOffsetsRequest below v1,
ListOffsetsResponse below v1, OffsetForLeaderEpochRequest below v2, OffsetForLeaderEpochResponse below v2) but kept
every field's version annotations, so the same declarations still describe them and we keep them valid from v0 for
the older clients that still send them.
"""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, INT8, STRING, array, field, message, struct

ListOffsetsRequest = message(
    "ListOffsetsRequest", api_key=2, valid_versions="0-11", flexible_versions="6+",
    fields=[
        field("replica_id", INT32, "0+"),
        field("isolation_level", INT8, "2+"),
        field("topics", array(struct("ListOffsetsTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("ListOffsetsPartition", [
                field("partition_index", INT32, "0+"),
                field("current_leader_epoch", INT32, "4+", default=-1, ignorable=True),
                field("timestamp", INT64, "0+"),
                field("max_num_offsets", INT32, "0", default=1),
            ])), "0+"),
        ])), "0+"),
        field("timeout_ms", INT32, "10+", ignorable=True),
    ],
)

ListOffsetsResponse = message(
    "ListOffsetsResponse", api_key=2, valid_versions="0-11", flexible_versions="6+",
    fields=[
        field("throttle_time_ms", INT32, "2+", ignorable=True),
        field("topics", array(struct("ListOffsetsTopicResponse", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("ListOffsetsPartitionResponse", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("old_style_offsets", array(INT64), "0"),
                field("timestamp", INT64, "1+", default=-1),
                field("offset", INT64, "1+", default=-1),
                field("leader_epoch", INT32, "4+", default=-1),
            ])), "0+"),
        ])), "0+"),
    ],
)

OffsetForLeaderEpochRequest = message(
    "OffsetForLeaderEpochRequest", api_key=23, valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("replica_id", INT32, "3+", default=-2, ignorable=True),
        field("topics", array(struct("OffsetForLeaderTopic", [
            field("topic", STRING, "0+"),
            field("partitions", array(struct("OffsetForLeaderPartition", [
                field("partition", INT32, "0+"),
                field("current_leader_epoch", INT32, "2+", default=-1, ignorable=True),
                field("leader_epoch", INT32, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

OffsetForLeaderEpochResponse = message(
    "OffsetForLeaderEpochResponse", api_key=23, valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("throttle_time_ms", INT32, "2+", ignorable=True),
        field("topics", array(struct("OffsetForLeaderTopicResult", [
            field("topic", STRING, "0+"),
            field("partitions", array(struct("EpochEndOffset", [
                field("error_code", INT16, "0+"),
                field("partition", INT32, "0+"),
                field("leader_epoch", INT32, "1+", default=-1, ignorable=True),
                field("end_offset", INT64, "0+", default=-1),
            ])), "0+"),
        ])), "0+"),
    ],
)

DeleteRecordsRequest = message(
    "DeleteRecordsRequest", api_key=21, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("topics", array(struct("DeleteRecordsTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("DeleteRecordsPartition", [
                field("partition_index", INT32, "0+"),
                field("offset", INT64, "0+"),
            ])), "0+"),
        ])), "0+"),
        field("timeout_ms", INT32, "0+"),
    ],
)

DeleteRecordsResponse = message(
    "DeleteRecordsResponse", api_key=21, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct("DeleteRecordsTopicResult", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("DeleteRecordsPartitionResult", [
                field("partition_index", INT32, "0+"),
                field("low_watermark", INT64, "0+"),
                field("error_code", INT16, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)
