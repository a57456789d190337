"""Consumer groups: coordinator lookup, classic and KIP-848 membership, committed offsets.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.

Kafka 4.0 removed the oldest versions of some of these from its JSON (OffsetCommitRequest below v2,
OffsetCommitResponse below v2, OffsetFetchRequest below v1, OffsetFetchResponse below v1) but kept every field's
version annotations, so the same declarations still describe them and we keep them valid from v0 for the older
clients that still send them.
"""

from __future__ import annotations

from ..schema import BOOL, BYTES, INT16, INT32, INT64, INT8, STRING, UUID, array, field, message, struct

_TopicPartitions = struct('TopicPartitions', [
    field("topic_id", UUID, "0+"),
    field("partitions", array(INT32), "0+"),
])

_TopicPartitions1 = struct('TopicPartitions', [
    field("topic_id", UUID, "0+"),
    field("topic_name", STRING, "0+"),
    field("partitions", array(INT32), "0+"),
])

_Assignment = struct('Assignment', [
    field("topic_partitions", array(_TopicPartitions1), "0+"),
])

FindCoordinatorRequest = message(
    "FindCoordinatorRequest", api_key=10, valid_versions="0-6", flexible_versions="3+",
    fields=[
        field("key", STRING, "0-3"),
        field("key_type", INT8, "1+", default=0),
        field("coordinator_keys", array(STRING), "4+"),
    ],
)

FindCoordinatorResponse = message(
    "FindCoordinatorResponse", api_key=10, valid_versions="0-6", flexible_versions="3+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("error_code", INT16, "0-3"),
        field("error_message", STRING, "1-3", nullable_versions="1-3", ignorable=True),
        field("node_id", INT32, "0-3"),
        field("host", STRING, "0-3"),
        field("port", INT32, "0-3"),
        field("coordinators", array(struct("Coordinator", [
            field("key", STRING, "4+"),
            field("node_id", INT32, "4+"),
            field("host", STRING, "4+"),
            field("port", INT32, "4+"),
            field("error_code", INT16, "4+"),
            field("error_message", STRING, "4+", nullable_versions="4+", ignorable=True),
        ])), "4+"),
    ],
)

JoinGroupRequest = message(
    "JoinGroupRequest", api_key=11, valid_versions="0-9", flexible_versions="6+",
    fields=[
        field("group_id", STRING, "0+"),
        field("session_timeout_ms", INT32, "0+"),
        field("rebalance_timeout_ms", INT32, "1+", default=-1, ignorable=True),
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "5+", nullable_versions="5+", default=None),
        field("protocol_type", STRING, "0+"),
        field("protocols", array(struct("JoinGroupRequestProtocol", [
            field("name", STRING, "0+"),
            field("metadata", BYTES, "0+"),
        ])), "0+"),
        field("reason", STRING, "8+", nullable_versions="8+", default=None, ignorable=True),
    ],
)

JoinGroupResponse = message(
    "JoinGroupResponse", api_key=11, valid_versions="0-9", flexible_versions="6+",
    fields=[
        field("throttle_time_ms", INT32, "2+", ignorable=True),
        field("error_code", INT16, "0+"),
        field("generation_id", INT32, "0+", default=-1),
        field("protocol_type", STRING, "7+", nullable_versions="7+", default=None, ignorable=True),
        field("protocol_name", STRING, "0+", nullable_versions="7+"),
        field("leader", STRING, "0+"),
        field("skip_assignment", BOOL, "9+", default=False),
        field("member_id", STRING, "0+"),
        field("members", array(struct("JoinGroupResponseMember", [
            field("member_id", STRING, "0+"),
            field("group_instance_id", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
            field("metadata", BYTES, "0+"),
        ])), "0+"),
    ],
)

HeartbeatRequest = message(
    "HeartbeatRequest", api_key=12, valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("group_id", STRING, "0+"),
        field("generation_id", INT32, "0+"),
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "3+", nullable_versions="3+", default=None),
    ],
)

HeartbeatResponse = message(
    "HeartbeatResponse", api_key=12, valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("error_code", INT16, "0+"),
    ],
)

LeaveGroupRequest = message(
    "LeaveGroupRequest", api_key=13, valid_versions="0-5", flexible_versions="4+",
    fields=[
        field("group_id", STRING, "0+"),
        field("member_id", STRING, "0-2"),
        field("members", array(struct("MemberIdentity", [
            field("member_id", STRING, "3+"),
            field("group_instance_id", STRING, "3+", nullable_versions="3+", default=None),
            field("reason", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
        ])), "3+"),
    ],
)

LeaveGroupResponse = message(
    "LeaveGroupResponse", api_key=13, valid_versions="0-5", flexible_versions="4+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("error_code", INT16, "0+"),
        field("members", array(struct("MemberResponse", [
            field("member_id", STRING, "3+"),
            field("group_instance_id", STRING, "3+", nullable_versions="3+"),
            field("error_code", INT16, "3+"),
        ])), "3+"),
    ],
)

SyncGroupRequest = message(
    "SyncGroupRequest", api_key=14, valid_versions="0-5", flexible_versions="4+",
    fields=[
        field("group_id", STRING, "0+"),
        field("generation_id", INT32, "0+"),
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "3+", nullable_versions="3+", default=None),
        field("protocol_type", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
        field("protocol_name", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
        field("assignments", array(struct("SyncGroupRequestAssignment", [
            field("member_id", STRING, "0+"),
            field("assignment", BYTES, "0+"),
        ])), "0+"),
    ],
)

SyncGroupResponse = message(
    "SyncGroupResponse", api_key=14, valid_versions="0-5", flexible_versions="4+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("error_code", INT16, "0+"),
        field("protocol_type", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
        field("protocol_name", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
        field("assignment", BYTES, "0+"),
    ],
)

DescribeGroupsRequest = message(
    "DescribeGroupsRequest", api_key=15, valid_versions="0-6", flexible_versions="5+",
    fields=[
        field("groups", array(STRING), "0+"),
        field("include_authorized_operations", BOOL, "3+"),
    ],
)

DescribeGroupsResponse = message(
    "DescribeGroupsResponse", api_key=15, valid_versions="0-6", flexible_versions="5+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("groups", array(struct("DescribedGroup", [
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "6+", nullable_versions="6+", default=None),
            field("group_id", STRING, "0+"),
            field("group_state", STRING, "0+"),
            field("protocol_type", STRING, "0+"),
            field("protocol_data", STRING, "0+"),
            field("members", array(struct("DescribedGroupMember", [
                field("member_id", STRING, "0+"),
                field("group_instance_id", STRING, "4+", nullable_versions="4+", default=None, ignorable=True),
                field("client_id", STRING, "0+"),
                field("client_host", STRING, "0+"),
                field("member_metadata", BYTES, "0+"),
                field("member_assignment", BYTES, "0+"),
            ])), "0+"),
            field("authorized_operations", INT32, "3+", default=-2147483648),
        ])), "0+"),
    ],
)

ListGroupsRequest = message(
    "ListGroupsRequest", api_key=16, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("states_filter", array(STRING), "4+"),
        field("types_filter", array(STRING), "5+"),
    ],
)

ListGroupsResponse = message(
    "ListGroupsResponse", api_key=16, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("error_code", INT16, "0+"),
        field("groups", array(struct("ListedGroup", [
            field("group_id", STRING, "0+"),
            field("protocol_type", STRING, "0+"),
            field("group_state", STRING, "4+", ignorable=True),
            field("group_type", STRING, "5+", ignorable=True),
        ])), "0+"),
    ],
)

DeleteGroupsRequest = message(
    "DeleteGroupsRequest", api_key=42, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("groups_names", array(STRING), "0+"),
    ],
)

DeleteGroupsResponse = message(
    "DeleteGroupsResponse", api_key=42, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct("DeletableGroupResult", [
            field("group_id", STRING, "0+"),
            field("error_code", INT16, "0+"),
        ])), "0+"),
    ],
)

OffsetCommitRequest = message(
    "OffsetCommitRequest", api_key=8, valid_versions="0-10", flexible_versions="8+",
    fields=[
        field("group_id", STRING, "0+"),
        field("generation_id_or_member_epoch", INT32, "1+", default=-1, ignorable=True),
        field("member_id", STRING, "1+", ignorable=True),
        field("group_instance_id", STRING, "7+", nullable_versions="7+", default=None),
        field("retention_time_ms", INT64, "2-4", default=-1, ignorable=True),
        field("topics", array(struct("OffsetCommitRequestTopic", [
            field("name", STRING, "0-9", ignorable=True),
            field("topic_id", UUID, "10+", ignorable=True),
            field("partitions", array(struct("OffsetCommitRequestPartition", [
                field("partition_index", INT32, "0+"),
                field("committed_offset", INT64, "0+"),
                field("committed_leader_epoch", INT32, "6+", default=-1, ignorable=True),
                field("commit_timestamp", INT64, "1", default=-1),
                field("committed_metadata", STRING, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

OffsetCommitResponse = message(
    "OffsetCommitResponse", api_key=8, valid_versions="0-10", flexible_versions="8+",
    fields=[
        field("throttle_time_ms", INT32, "3+", ignorable=True),
        field("topics", array(struct("OffsetCommitResponseTopic", [
            field("name", STRING, "0-9", ignorable=True),
            field("topic_id", UUID, "10+", ignorable=True),
            field("partitions", array(struct("OffsetCommitResponsePartition", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

OffsetFetchRequest = message(
    "OffsetFetchRequest", api_key=9, valid_versions="0-10", flexible_versions="6+",
    fields=[
        field("group_id", STRING, "0-7"),
        field("topics", array(struct("OffsetFetchRequestTopic", [
            field("name", STRING, "0-7"),
            field("partition_indexes", array(INT32), "0-7"),
        ])), "0-7", nullable_versions="2-7"),
        field("groups", array(struct("OffsetFetchRequestGroup", [
            field("group_id", STRING, "8+"),
            field("member_id", STRING, "9+", nullable_versions="9+", default=None, ignorable=True),
            field("member_epoch", INT32, "9+", default=-1, ignorable=True),
            field("topics", array(struct("OffsetFetchRequestTopics", [
                field("name", STRING, "8-9", ignorable=True),
                field("topic_id", UUID, "10+", ignorable=True),
                field("partition_indexes", array(INT32), "8+"),
            ])), "8+", nullable_versions="8+"),
        ])), "8+"),
        field("require_stable", BOOL, "7+", default=False),
    ],
)

OffsetFetchResponse = message(
    "OffsetFetchResponse", api_key=9, valid_versions="0-10", flexible_versions="6+",
    fields=[
        field("throttle_time_ms", INT32, "3+", ignorable=True),
        field("topics", array(struct("OffsetFetchResponseTopic", [
            field("name", STRING, "0-7"),
            field("partitions", array(struct("OffsetFetchResponsePartition", [
                field("partition_index", INT32, "0-7"),
                field("committed_offset", INT64, "0-7"),
                field("committed_leader_epoch", INT32, "5-7", default=-1, ignorable=True),
                field("metadata", STRING, "0-7", nullable_versions="0-7"),
                field("error_code", INT16, "0-7"),
            ])), "0-7"),
        ])), "0-7"),
        field("error_code", INT16, "2-7", default=0, ignorable=True),
        field("groups", array(struct("OffsetFetchResponseGroup", [
            field("group_id", STRING, "8+"),
            field("topics", array(struct("OffsetFetchResponseTopics", [
                field("name", STRING, "8-9", ignorable=True),
                field("topic_id", UUID, "10+", ignorable=True),
                field("partitions", array(struct("OffsetFetchResponsePartitions", [
                    field("partition_index", INT32, "8+"),
                    field("committed_offset", INT64, "8+"),
                    field("committed_leader_epoch", INT32, "8+", default=-1, ignorable=True),
                    field("metadata", STRING, "8+", nullable_versions="8+"),
                    field("error_code", INT16, "8+"),
                ])), "8+"),
            ])), "8+"),
            field("error_code", INT16, "8+", default=0),
        ])), "8+"),
    ],
)

OffsetDeleteRequest = message(
    "OffsetDeleteRequest", api_key=47, valid_versions="0", flexible_versions="none",
    fields=[
        field("group_id", STRING, "0+"),
        field("topics", array(struct("OffsetDeleteRequestTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("OffsetDeleteRequestPartition", [
                field("partition_index", INT32, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

OffsetDeleteResponse = message(
    "OffsetDeleteResponse", api_key=47, valid_versions="0", flexible_versions="none",
    fields=[
        field("error_code", INT16, "0+"),
        field("throttle_time_ms", INT32, "0+", ignorable=True),
        field("topics", array(struct("OffsetDeleteResponseTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("OffsetDeleteResponsePartition", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

ConsumerGroupHeartbeatRequest = message(
    "ConsumerGroupHeartbeatRequest", api_key=68, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("group_id", STRING, "0+"),
        field("member_id", STRING, "0+"),
        field("member_epoch", INT32, "0+"),
        field("instance_id", STRING, "0+", nullable_versions="0+", default=None),
        field("rack_id", STRING, "0+", nullable_versions="0+", default=None),
        field("rebalance_timeout_ms", INT32, "0+", default=-1),
        field("subscribed_topic_names", array(STRING), "0+", nullable_versions="0+", default=None),
        field("subscribed_topic_regex", STRING, "1+", nullable_versions="1+", default=None),
        field("server_assignor", STRING, "0+", nullable_versions="0+", default=None),
        field("topic_partitions", array(_TopicPartitions), "0+", nullable_versions="0+", default=None),
    ],
)

ConsumerGroupHeartbeatResponse = message(
    "ConsumerGroupHeartbeatResponse", api_key=68, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("member_id", STRING, "0+", nullable_versions="0+", default=None),
        field("member_epoch", INT32, "0+"),
        field("heartbeat_interval_ms", INT32, "0+"),
        field("assignment", struct("Assignment", [
            field("topic_partitions", array(_TopicPartitions), "0+"),
        ]), "0+", nullable_versions="0+", default=None),
    ],
)

ConsumerGroupDescribeRequest = message(
    "ConsumerGroupDescribeRequest", api_key=69, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("group_ids", array(STRING), "0+"),
        field("include_authorized_operations", BOOL, "0+"),
    ],
)

ConsumerGroupDescribeResponse = message(
    "ConsumerGroupDescribeResponse", api_key=69, valid_versions="0-1", flexible_versions="0+",
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
                field("instance_id", STRING, "0+", nullable_versions="0+", default=None),
                field("rack_id", STRING, "0+", nullable_versions="0+", default=None),
                field("member_epoch", INT32, "0+"),
                field("client_id", STRING, "0+"),
                field("client_host", STRING, "0+"),
                field("subscribed_topic_names", array(STRING), "0+"),
                field("subscribed_topic_regex", STRING, "0+", nullable_versions="0+", default=None),
                field("assignment", _Assignment, "0+"),
                field("target_assignment", _Assignment, "0+"),
                field("member_type", INT8, "1+", default=-1, ignorable=True),
            ])), "0+"),
            field("authorized_operations", INT32, "0+", default=-2147483648),
        ])), "0+"),
    ],
)
