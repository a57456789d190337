"""Cluster and topic metadata.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.
"""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT8, STRING, UUID, array, field, message, struct

MetadataRequest = message(
    "MetadataRequest", api_key=3, valid_versions="0-13", flexible_versions="9+",
    fields=[
        field("topics", array(struct("MetadataRequestTopic", [
            field("topic_id", UUID, "10+", ignorable=True),
            field("name", STRING, "0+", nullable_versions="10+"),
        ])), "0+", nullable_versions="1+"),
        field("allow_auto_topic_creation", BOOL, "4+", default=True),
        field("include_cluster_authorized_operations", BOOL, "8-10"),
        field("include_topic_authorized_operations", BOOL, "8+"),
    ],
)

MetadataResponse = message(
    "MetadataResponse", api_key=3, valid_versions="0-13", flexible_versions="9+",
    fields=[
        field("throttle_time_ms", INT32, "3+", ignorable=True),
        field("brokers", array(struct("MetadataResponseBroker", [
            field("node_id", INT32, "0+"),
            field("host", STRING, "0+"),
            field("port", INT32, "0+"),
            field("rack", STRING, "1+", nullable_versions="1+", default=None, ignorable=True),
        ])), "0+"),
        field("cluster_id", STRING, "2+", nullable_versions="2+", default=None, ignorable=True),
        field("controller_id", INT32, "1+", default=-1, ignorable=True),
        field("topics", array(struct("MetadataResponseTopic", [
            field("error_code", INT16, "0+"),
            field("name", STRING, "0+", nullable_versions="12+"),
            field("topic_id", UUID, "10+", ignorable=True),
            field("is_internal", BOOL, "1+", default=False, ignorable=True),
            field("partitions", array(struct("MetadataResponsePartition", [
                field("error_code", INT16, "0+"),
                field("partition_index", INT32, "0+"),
                field("leader_id", INT32, "0+"),
                field("leader_epoch", INT32, "7+", default=-1, ignorable=True),
                field("replica_nodes", array(INT32), "0+"),
                field("isr_nodes", array(INT32), "0+"),
                field("offline_replicas", array(INT32), "5+", ignorable=True),
            ])), "0+"),
            field("topic_authorized_operations", INT32, "8+", default=-2147483648),
        ])), "0+"),
        field("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
        field("error_code", INT16, "13+", ignorable=True),
    ],
)

DescribeClusterRequest = message(
    "DescribeClusterRequest", api_key=60, valid_versions="0-2", flexible_versions="0+",
    fields=[
        field("include_cluster_authorized_operations", BOOL, "0+"),
        field("endpoint_type", INT8, "1+", default=1),
        field("include_fenced_brokers", BOOL, "2+"),
    ],
)

DescribeClusterResponse = message(
    "DescribeClusterResponse", api_key=60, valid_versions="0-2", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+", default=None),
        field("endpoint_type", INT8, "1+", default=1),
        field("cluster_id", STRING, "0+"),
        field("controller_id", INT32, "0+", default=-1),
        field("brokers", array(struct("DescribeClusterBroker", [
            field("broker_id", INT32, "0+"),
            field("host", STRING, "0+"),
            field("port", INT32, "0+"),
            field("rack", STRING, "0+", nullable_versions="0+", default=None),
            field("is_fenced", BOOL, "2+"),
        ])), "0+"),
        field("cluster_authorized_operations", INT32, "0+", default=-2147483648),
    ],
)
