"""Partition administration: DescribeTopicPartitions, ElectLeaders, partition reassignments, AlterReplicaLogDirs.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.

Kafka 4.0 removed AlterReplicaLogDirs v0 from its JSON (v1 is the same message), which we keep valid.
"""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT8, STRING, UUID, array, field, message, struct

DescribeTopicPartitionsRequest = message(
    "DescribeTopicPartitionsRequest", api_key=75, valid_versions="0", flexible_versions="0+",
    fields=[
        field("topics", array(struct("TopicRequest", [
            field("name", STRING, "0+"),
        ])), "0+"),
        field("response_partition_limit", INT32, "0+", default=2000),
        field("cursor", struct("Cursor", [
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
        ]), "0+", nullable_versions="0+", default=None),
    ],
)

DescribeTopicPartitionsResponse = message(
    "DescribeTopicPartitionsResponse", api_key=75, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+", ignorable=True),
        field("topics", array(struct("DescribeTopicPartitionsResponseTopic", [
            field("error_code", INT16, "0+"),
            field("name", STRING, "0+", nullable_versions="0+"),
            field("topic_id", UUID, "0+", ignorable=True),
            field("is_internal", BOOL, "0+", default=False, ignorable=True),
            field("partitions", array(struct("DescribeTopicPartitionsResponsePartition", [
                field("error_code", INT16, "0+"),
                field("partition_index", INT32, "0+"),
                field("leader_id", INT32, "0+"),
                field("leader_epoch", INT32, "0+", default=-1, ignorable=True),
                field("replica_nodes", array(INT32), "0+"),
                field("isr_nodes", array(INT32), "0+"),
                field("eligible_leader_replicas", array(INT32), "0+", nullable_versions="0+", default=None),
                field("last_known_elr", array(INT32), "0+", nullable_versions="0+", default=None),
                field("offline_replicas", array(INT32), "0+", ignorable=True),
            ])), "0+"),
            field("topic_authorized_operations", INT32, "0+", default=-2147483648),
        ])), "0+"),
        field("next_cursor", struct("Cursor", [
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
        ]), "0+", nullable_versions="0+", default=None),
    ],
)

ElectLeadersRequest = message(
    "ElectLeadersRequest", api_key=43, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("election_type", INT8, "1+"),
        field("topic_partitions", array(struct("TopicPartitions", [
            field("topic", STRING, "0+"),
            field("partitions", array(INT32), "0+"),
        ])), "0+", nullable_versions="0+"),
        field("timeout_ms", INT32, "0+", default=60000),
    ],
)

ElectLeadersResponse = message(
    "ElectLeadersResponse", api_key=43, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "1+"),
        field("replica_election_results", array(struct("ReplicaElectionResult", [
            field("topic", STRING, "0+"),
            field("partition_result", array(struct("PartitionResult", [
                field("partition_id", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterPartitionReassignmentsRequest = message(
    "AlterPartitionReassignmentsRequest", api_key=45, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("timeout_ms", INT32, "0+", default=60000),
        field("allow_replication_factor_change", BOOL, "1+", default=True),
        field("topics", array(struct("ReassignableTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("ReassignablePartition", [
                field("partition_index", INT32, "0+"),
                field("replicas", array(INT32), "0+", nullable_versions="0+", default=None),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterPartitionReassignmentsResponse = message(
    "AlterPartitionReassignmentsResponse", api_key=45, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("allow_replication_factor_change", BOOL, "1+", default=True, ignorable=True),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("responses", array(struct("ReassignableTopicResponse", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("ReassignablePartitionResponse", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
            ])), "0+"),
        ])), "0+"),
    ],
)

ListPartitionReassignmentsRequest = message(
    "ListPartitionReassignmentsRequest", api_key=46, valid_versions="0", flexible_versions="0+",
    fields=[
        field("timeout_ms", INT32, "0+", default=60000),
        field("topics", array(struct("ListPartitionReassignmentsTopics", [
            field("name", STRING, "0+"),
            field("partition_indexes", array(INT32), "0+"),
        ])), "0+", nullable_versions="0+", default=None),
    ],
)

ListPartitionReassignmentsResponse = message(
    "ListPartitionReassignmentsResponse", api_key=46, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("topics", array(struct("OngoingTopicReassignment", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("OngoingPartitionReassignment", [
                field("partition_index", INT32, "0+"),
                field("replicas", array(INT32), "0+"),
                field("adding_replicas", array(INT32), "0+"),
                field("removing_replicas", array(INT32), "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterReplicaLogDirsRequest = message(
    "AlterReplicaLogDirsRequest", api_key=34, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("dirs", array(struct("AlterReplicaLogDir", [
            field("path", STRING, "0+"),
            field("topics", array(struct("AlterReplicaLogDirTopic", [
                field("name", STRING, "0+"),
                field("partitions", array(INT32), "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterReplicaLogDirsResponse = message(
    "AlterReplicaLogDirsResponse", api_key=34, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct("AlterReplicaLogDirTopicResult", [
            field("topic_name", STRING, "0+"),
            field("partitions", array(struct("AlterReplicaLogDirPartitionResult", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)
