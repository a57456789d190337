"""Administration: topics, partitions, configs, log dirs.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.

Kafka 4.0 removed the oldest versions of some of these from its JSON (CreateTopicsRequest below v2,
CreateTopicsResponse below v2, DeleteTopicsRequest below v1, DeleteTopicsResponse below v1, DescribeConfigsRequest
below v1, DescribeConfigsResponse below v1, DescribeLogDirsRequest below v1, DescribeLogDirsResponse below v1) but
kept every field's version annotations, so the same declarations still describe them and we keep them valid from v0
for the older clients that still send them.
"""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, INT8, STRING, UUID, array, field, message, struct

_AlterConfigsResourceResponse = struct('AlterConfigsResourceResponse', [
    field("error_code", INT16, "0+"),
    field("error_message", STRING, "0+", nullable_versions="0+"),
    field("resource_type", INT8, "0+"),
    field("resource_name", STRING, "0+"),
])

CreateTopicsRequest = message(
    "CreateTopicsRequest", api_key=19, valid_versions="0-7", flexible_versions="5+",
    fields=[
        field("topics", array(struct("CreatableTopic", [
            field("name", STRING, "0+"),
            field("num_partitions", INT32, "0+"),
            field("replication_factor", INT16, "0+"),
            field("assignments", array(struct("CreatableReplicaAssignment", [
                field("partition_index", INT32, "0+"),
                field("broker_ids", array(INT32), "0+"),
            ])), "0+"),
            field("configs", array(struct("CreatableTopicConfig", [
                field("name", STRING, "0+"),
                field("value", STRING, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
        field("timeout_ms", INT32, "0+", default=60000),
        field("validate_only", BOOL, "1+", default=False),
    ],
)

CreateTopicsResponse = message(
    "CreateTopicsResponse", api_key=19, valid_versions="0-7", flexible_versions="5+",
    fields=[
        field("throttle_time_ms", INT32, "2+", ignorable=True),
        field("topics", array(struct("CreatableTopicResult", [
            field("name", STRING, "0+"),
            field("topic_id", UUID, "7+", ignorable=True),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "1+", nullable_versions="0+", ignorable=True),
            field("topic_config_error_code", INT16, "5+", tagged_versions="5+", tag=0, ignorable=True),
            field("num_partitions", INT32, "5+", default=-1, ignorable=True),
            field("replication_factor", INT16, "5+", default=-1, ignorable=True),
            field("configs", array(struct("CreatableTopicConfigs", [
                field("name", STRING, "5+"),
                field("value", STRING, "5+", nullable_versions="5+"),
                field("read_only", BOOL, "5+"),
                field("config_source", INT8, "5+", default=-1, ignorable=True),
                field("is_sensitive", BOOL, "5+"),
            ])), "5+", nullable_versions="5+", ignorable=True),
        ])), "0+"),
    ],
)

DeleteTopicsRequest = message(
    "DeleteTopicsRequest", api_key=20, valid_versions="0-6", flexible_versions="4+",
    fields=[
        field("topics", array(struct("DeleteTopicState", [
            field("name", STRING, "6+", nullable_versions="6+", default=None),
            field("topic_id", UUID, "6+"),
        ])), "6+"),
        field("topic_names", array(STRING), "0-5", ignorable=True),
        field("timeout_ms", INT32, "0+"),
    ],
)

DeleteTopicsResponse = message(
    "DeleteTopicsResponse", api_key=20, valid_versions="0-6", flexible_versions="4+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("responses", array(struct("DeletableTopicResult", [
            field("name", STRING, "0+", nullable_versions="6+"),
            field("topic_id", UUID, "6+", ignorable=True),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "5+", nullable_versions="5+", default=None, ignorable=True),
        ])), "0+"),
    ],
)

CreatePartitionsRequest = message(
    "CreatePartitionsRequest", api_key=37, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("topics", array(struct("CreatePartitionsTopic", [
            field("name", STRING, "0+"),
            field("count", INT32, "0+"),
            field("assignments", array(struct("CreatePartitionsAssignment", [
                field("broker_ids", array(INT32), "0+"),
            ])), "0+", nullable_versions="0+"),
        ])), "0+"),
        field("timeout_ms", INT32, "0+"),
        field("validate_only", BOOL, "0+"),
    ],
)

CreatePartitionsResponse = message(
    "CreatePartitionsResponse", api_key=37, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct("CreatePartitionsTopicResult", [
            field("name", STRING, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        ])), "0+"),
    ],
)

DescribeConfigsRequest = message(
    "DescribeConfigsRequest", api_key=32, valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("resources", array(struct("DescribeConfigsResource", [
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configuration_keys", array(STRING), "0+", nullable_versions="0+"),
        ])), "0+"),
        field("include_synonyms", BOOL, "1+", default=False),
        field("include_documentation", BOOL, "3+", default=False),
    ],
)

DescribeConfigsResponse = message(
    "DescribeConfigsResponse", api_key=32, valid_versions="0-4", flexible_versions="4+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct("DescribeConfigsResult", [
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+"),
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configs", array(struct("DescribeConfigsResourceResult", [
                field("name", STRING, "0+"),
                field("value", STRING, "0+", nullable_versions="0+"),
                field("read_only", BOOL, "0+"),
                field("config_source", INT8, "1+", default=-1, ignorable=True),
                field("is_default", BOOL, "0"),
                field("is_sensitive", BOOL, "0+"),
                field("synonyms", array(struct("DescribeConfigsSynonym", [
                    field("name", STRING, "1+"),
                    field("value", STRING, "1+", nullable_versions="0+"),
                    field("source", INT8, "1+"),
                ])), "1+", ignorable=True),
                field("config_type", INT8, "3+", default=0, ignorable=True),
                field("documentation", STRING, "3+", nullable_versions="0+", ignorable=True),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterConfigsRequest = message(
    "AlterConfigsRequest", api_key=33, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("resources", array(struct("AlterConfigsResource", [
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configs", array(struct("AlterableConfig", [
                field("name", STRING, "0+"),
                field("value", STRING, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
        field("validate_only", BOOL, "0+"),
    ],
)

AlterConfigsResponse = message(
    "AlterConfigsResponse", api_key=33, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("responses", array(_AlterConfigsResourceResponse), "0+"),
    ],
)

IncrementalAlterConfigsRequest = message(
    "IncrementalAlterConfigsRequest", api_key=44, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("resources", array(struct("AlterConfigsResource", [
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configs", array(struct("AlterableConfig", [
                field("name", STRING, "0+"),
                field("config_operation", INT8, "0+"),
                field("value", STRING, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
        field("validate_only", BOOL, "0+"),
    ],
)

IncrementalAlterConfigsResponse = message(
    "IncrementalAlterConfigsResponse", api_key=44, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("responses", array(_AlterConfigsResourceResponse), "0+"),
    ],
)

DescribeLogDirsRequest = message(
    "DescribeLogDirsRequest", api_key=35, valid_versions="0-5", flexible_versions="2+",
    fields=[
        field("topics", array(struct("DescribableLogDirTopic", [
            field("topic", STRING, "0+"),
            field("partitions", array(INT32), "0+"),
        ])), "0+", nullable_versions="0+"),
    ],
)

DescribeLogDirsResponse = message(
    "DescribeLogDirsResponse", api_key=35, valid_versions="0-5", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "3+", ignorable=True),
        field("results", array(struct("DescribeLogDirsResult", [
            field("error_code", INT16, "0+"),
            field("log_dir", STRING, "0+"),
            field("topics", array(struct("DescribeLogDirsTopic", [
                field("name", STRING, "0+"),
                field("partitions", array(struct("DescribeLogDirsPartition", [
                    field("partition_index", INT32, "0+"),
                    field("partition_size", INT64, "0+"),
                    field("offset_lag", INT64, "0+"),
                    field("is_future_key", BOOL, "0+"),
                ])), "0+"),
            ])), "0+"),
            field("total_bytes", INT64, "4+", default=-1, ignorable=True),
            field("usable_bytes", INT64, "4+", default=-1, ignorable=True),
            field("is_cordoned", BOOL, "5+", default=False, ignorable=True),
        ])), "0+"),
    ],
)

ListConfigResourcesRequest = message(
    "ListConfigResourcesRequest", api_key=74, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("resource_types", array(INT8), "1+"),
    ],
)

ListConfigResourcesResponse = message(
    "ListConfigResourcesResponse", api_key=74, valid_versions="0-1", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("config_resources", array(struct("ConfigResource", [
            field("resource_name", STRING, "0+"),
            field("resource_type", INT8, "1+", default=16, ignorable=True),
        ])), "0+"),
    ],
)
