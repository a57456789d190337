"""Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge and the share
group offsets APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).

Transcribed field by field from Kafka 4.3.1's JSON message definitions (kafka-clients-4.3.1.jar,
common/message/Share*.json), the versions 4.3 clients and librdkafka 2.16 send: the early-access v0 of Kafka 4.0 is
gone from those files (ShareGroupHeartbeat and ShareGroupDescribe are valid at v1 only, ShareFetch and
ShareAcknowledge at v1-v2; the offsets APIs from v0), but the fields keep their "0+" annotations, as Kafka's do.
"""

from __future__ import annotations

from ..schema import BOOL, INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, array, field, message, struct

_HeartbeatTopicPartitions = struct("TopicPartitions", [
    field("topic_id", UUID, "0+"),
    field("partitions", array(INT32), "0+"),
])

ShareGroupHeartbeatRequest = message(
    "ShareGroupHeartbeatRequest", api_key=76, valid_versions="1", flexible_versions="0+",
    fields=[
        field("group_id", STRING, "0+"),
        field("member_id", STRING, "0+"),
        field("member_epoch", INT32, "0+"),
        field("rack_id", STRING, "0+", nullable_versions="0+", default=None),
        field("subscribed_topic_names", array(STRING), "0+", nullable_versions="0+", default=None),
    ],
)

ShareGroupHeartbeatResponse = message(
    "ShareGroupHeartbeatResponse", api_key=76, valid_versions="1", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("member_id", STRING, "0+", nullable_versions="0+", default=None),
        field("member_epoch", INT32, "0+"),
        field("heartbeat_interval_ms", INT32, "0+"),
        field("assignment", struct("Assignment", [
            field("topic_partitions", array(_HeartbeatTopicPartitions), "0+"),
        ]), "0+", nullable_versions="0+", default=None),
    ],
)

_DescribeTopicPartitions = struct("TopicPartitions", [
    field("topic_id", UUID, "0+"),
    field("topic_name", STRING, "0+"),
    field("partitions", array(INT32), "0+"),
])

ShareGroupDescribeRequest = message(
    "ShareGroupDescribeRequest", api_key=77, valid_versions="1", flexible_versions="0+",
    fields=[
        field("group_ids", array(STRING), "0+"),
        field("include_authorized_operations", BOOL, "0+"),
    ],
)

ShareGroupDescribeResponse = message(
    "ShareGroupDescribeResponse", api_key=77, valid_versions="1", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("groups", array(struct("DescribedGroup", [
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+", default=None),
            field("group_id", STRING, "0+"),
            field("group_state", STRING, "0+"),
            field("group_epoch", INT32, "0+"),
            field("assignment_epoch", INT32, "0+"),
            field("assignor_name", STRING, "0+"),
            field("members", array(struct("Member", [
                field("member_id", STRING, "0+"),
                field("rack_id", STRING, "0+", nullable_versions="0+", default=None),
                field("member_epoch", INT32, "0+"),
                field("client_id", STRING, "0+"),
                field("client_host", STRING, "0+"),
                field("subscribed_topic_names", array(STRING), "0+"),
                field("assignment", struct("Assignment", [
                    field("topic_partitions", array(_DescribeTopicPartitions), "0+"),
                ]), "0+"),
            ])), "0+"),
            field("authorized_operations", INT32, "0+", default=-2147483648),
        ])), "0+"),
    ],
)

_AcknowledgementBatch = struct("AcknowledgementBatch", [
    field("first_offset", INT64, "0+"),
    field("last_offset", INT64, "0+"),
    field("acknowledge_types", array(INT8), "0+"),
])

_LeaderIdAndEpoch = struct("LeaderIdAndEpoch", [
    field("leader_id", INT32, "0+"),
    field("leader_epoch", INT32, "0+"),
])

_NodeEndpoint = struct("NodeEndpoint", [
    field("node_id", INT32, "0+"),
    field("host", STRING, "0+"),
    field("port", INT32, "0+"),
    field("rack", STRING, "0+", nullable_versions="0+", default=None),
])

ShareFetchRequest = message(
    "ShareFetchRequest", api_key=78, valid_versions="1-2", flexible_versions="0+",
    fields=[
        field("group_id", STRING, "0+", nullable_versions="0+", default=None),
        field("member_id", STRING, "0+", nullable_versions="0+"),
        field("share_session_epoch", INT32, "0+"),
        field("max_wait_ms", INT32, "0+"),
        field("min_bytes", INT32, "0+"),
        field("max_bytes", INT32, "0+", default=0x7FFFFFFF),
        field("max_records", INT32, "1+"),
        field("batch_size", INT32, "1+"),
        field("share_acquire_mode", INT8, "2+", default=0, ignorable=True),
        field("is_renew_ack", BOOL, "2+", default=False),
        field("topics", array(struct("FetchTopic", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("FetchPartition", [
                field("partition_index", INT32, "0+"),
                field("partition_max_bytes", INT32, "0"),
                field("acknowledgement_batches", array(_AcknowledgementBatch), "0+"),
            ])), "0+"),
        ])), "0+"),
        field("forgotten_topics_data", array(struct("ForgottenTopic", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(INT32), "0+"),
        ])), "0+"),
    ],
)

ShareFetchResponse = message(
    "ShareFetchResponse", api_key=78, valid_versions="1-2", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("acquisition_lock_timeout_ms", INT32, "1+"),
        field("responses", array(struct("ShareFetchableTopicResponse", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("PartitionData", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
                field("acknowledge_error_code", INT16, "0+"),
                field("acknowledge_error_message", STRING, "0+", nullable_versions="0+", default=None),
                field("current_leader", _LeaderIdAndEpoch, "0+"),
                field("records", RECORDS, "0+", nullable_versions="0"),
                field("acquired_records", array(struct("AcquiredRecords", [
                    field("first_offset", INT64, "0+"),
                    field("last_offset", INT64, "0+"),
                    field("delivery_count", INT16, "0+"),
                ])), "0+"),
            ])), "0+"),
        ])), "0+"),
        field("node_endpoints", array(_NodeEndpoint), "0+"),
    ],
)

ShareAcknowledgeRequest = message(
    "ShareAcknowledgeRequest", api_key=79, valid_versions="1-2", flexible_versions="0+",
    fields=[
        field("group_id", STRING, "0+", nullable_versions="0+", default=None),
        field("member_id", STRING, "0+", nullable_versions="0+"),
        field("share_session_epoch", INT32, "0+"),
        field("is_renew_ack", BOOL, "2+", default=False),
        field("topics", array(struct("AcknowledgeTopic", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("AcknowledgePartition", [
                field("partition_index", INT32, "0+"),
                field("acknowledgement_batches", array(_AcknowledgementBatch), "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

ShareAcknowledgeResponse = message(
    "ShareAcknowledgeResponse", api_key=79, valid_versions="1-2", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("acquisition_lock_timeout_ms", INT32, "2+", ignorable=True),
        field("responses", array(struct("ShareAcknowledgeTopicResponse", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("PartitionData", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
                field("current_leader", _LeaderIdAndEpoch, "0+"),
            ])), "0+"),
        ])), "0+"),
        field("node_endpoints", array(_NodeEndpoint), "0+"),
    ],
)


DescribeShareGroupOffsetsRequest = message(
    "DescribeShareGroupOffsetsRequest", api_key=90, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("groups", array(struct("DescribeShareGroupOffsetsRequestGroup", [
            field("group_id", STRING, "0+"),
            field("topics", array(struct("DescribeShareGroupOffsetsRequestTopic", [
                field("topic_name", STRING, "0+"),
                field("partitions", array(INT32), "0+"),
            ])), "0+", nullable_versions="0+"),
        ])), "0+"),
    ],
)

DescribeShareGroupOffsetsResponse = message(
    "DescribeShareGroupOffsetsResponse", api_key=90, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("groups", array(struct("DescribeShareGroupOffsetsResponseGroup", [
            field("group_id", STRING, "0+"),
            field("topics", array(struct("DescribeShareGroupOffsetsResponseTopic", [
                field("topic_name", STRING, "0+"),
                field("topic_id", UUID, "0+"),
                field("partitions", array(struct("DescribeShareGroupOffsetsResponsePartition", [
                    field("partition_index", INT32, "0+"),
                    field("start_offset", INT64, "0+"),
                    field("leader_epoch", INT32, "0+"),
                    field("lag", INT64, "1+", default=-1, ignorable=True),
                    field("error_code", INT16, "0+"),
                    field("error_message", STRING, "0+", nullable_versions="0+", default=None),
                ])), "0+"),
            ])), "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        ])), "0+"),
    ],
)

AlterShareGroupOffsetsRequest = message(
    "AlterShareGroupOffsetsRequest", api_key=91, valid_versions="0", flexible_versions="0+",
    fields=[
        field("group_id", STRING, "0+"),
        field("topics", array(struct("AlterShareGroupOffsetsRequestTopic", [
            field("topic_name", STRING, "0+"),
            field("partitions", array(struct("AlterShareGroupOffsetsRequestPartition", [
                field("partition_index", INT32, "0+"),
                field("start_offset", INT64, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterShareGroupOffsetsResponse = message(
    "AlterShareGroupOffsetsResponse", api_key=91, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("responses", array(struct("AlterShareGroupOffsetsResponseTopic", [
            field("topic_name", STRING, "0+"),
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("AlterShareGroupOffsetsResponsePartition", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
            ])), "0+"),
        ])), "0+"),
    ],
)

DeleteShareGroupOffsetsRequest = message(
    "DeleteShareGroupOffsetsRequest", api_key=92, valid_versions="0", flexible_versions="0+",
    fields=[
        field("group_id", STRING, "0+"),
        field("topics", array(struct("DeleteShareGroupOffsetsRequestTopic", [
            field("topic_name", STRING, "0+"),
        ])), "0+"),
    ],
)

DeleteShareGroupOffsetsResponse = message(
    "DeleteShareGroupOffsetsResponse", api_key=92, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("responses", array(struct("DeleteShareGroupOffsetsResponseTopic", [
            field("topic_name", STRING, "0+"),
            field("topic_id", UUID, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        ])), "0+"),
    ],
)
