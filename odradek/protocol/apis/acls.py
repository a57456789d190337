"""ACLs: CreateAcls (30), DescribeAcls (29), DeleteAcls (31).

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case. v0 has no pattern type (always LITERAL, 3).
"""

from __future__ import annotations

from ..schema import INT16, INT32, INT8, STRING, array, field, message, struct

CreateAclsRequest = message(
    "CreateAclsRequest", api_key=30, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("creations", array(struct("AclCreation", [
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("resource_pattern_type", INT8, "1+", default=3),
            field("principal", STRING, "0+"),
            field("host", STRING, "0+"),
            field("operation", INT8, "0+"),
            field("permission_type", INT8, "0+"),
        ])), "0+"),
    ],
)

CreateAclsResponse = message(
    "CreateAclsResponse", api_key=30, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct("AclCreationResult", [
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+"),
        ])), "0+"),
    ],
)

DescribeAclsRequest = message(
    "DescribeAclsRequest", api_key=29, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("resource_type_filter", INT8, "0+"),
        field("resource_name_filter", STRING, "0+", nullable_versions="0+"),
        field("pattern_type_filter", INT8, "1+", default=3),
        field("principal_filter", STRING, "0+", nullable_versions="0+"),
        field("host_filter", STRING, "0+", nullable_versions="0+"),
        field("operation", INT8, "0+"),
        field("permission_type", INT8, "0+"),
    ],
)

DescribeAclsResponse = message(
    "DescribeAclsResponse", api_key=29, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+"),
        field("resources", array(struct("DescribeAclsResource", [
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("pattern_type", INT8, "1+", default=3),
            field("acls", array(struct("AclDescription", [
                field("principal", STRING, "0+"),
                field("host", STRING, "0+"),
                field("operation", INT8, "0+"),
                field("permission_type", INT8, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

DeleteAclsRequest = message(
    "DeleteAclsRequest", api_key=31, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("filters", array(struct("DeleteAclsFilter", [
            field("resource_type_filter", INT8, "0+"),
            field("resource_name_filter", STRING, "0+", nullable_versions="0+"),
            field("pattern_type_filter", INT8, "1+", default=3),
            field("principal_filter", STRING, "0+", nullable_versions="0+"),
            field("host_filter", STRING, "0+", nullable_versions="0+"),
            field("operation", INT8, "0+"),
            field("permission_type", INT8, "0+"),
        ])), "0+"),
    ],
)

DeleteAclsResponse = message(
    "DeleteAclsResponse", api_key=31, valid_versions="0-3", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("filter_results", array(struct("DeleteAclsFilterResult", [
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+"),
            field("matching_acls", array(struct("DeleteAclsMatchingAcl", [
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+"),
                field("resource_type", INT8, "0+"),
                field("resource_name", STRING, "0+"),
                field("pattern_type", INT8, "1+", default=3),
                field("principal", STRING, "0+"),
                field("host", STRING, "0+"),
                field("operation", INT8, "0+"),
                field("permission_type", INT8, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)
