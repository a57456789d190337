"""Client quotas: DescribeClientQuotas (48) and AlterClientQuotas (49).

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.
"""

from __future__ import annotations

from ..schema import BOOL, FLOAT64, INT16, INT32, INT8, STRING, array, field, message, struct

_EntityData = struct("EntityData", [
    field("entity_type", STRING, "0+"),
    field("entity_name", STRING, "0+", nullable_versions="0+"),
])

DescribeClientQuotasRequest = message(
    "DescribeClientQuotasRequest", api_key=48, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("components", array(struct("ComponentData", [
            field("entity_type", STRING, "0+"),
            field("match_type", INT8, "0+"),
            field("match", STRING, "0+", nullable_versions="0+"),
        ])), "0+"),
        field("strict", BOOL, "0+"),
    ],
)

DescribeClientQuotasResponse = message(
    "DescribeClientQuotasResponse", api_key=48, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+"),
        field("entries", array(struct("EntryData", [
            field("entity", array(_EntityData), "0+"),
            field("values", array(struct("ValueData", [
                field("key", STRING, "0+"),
                field("value", FLOAT64, "0+"),
            ])), "0+"),
        ])), "0+", nullable_versions="0+"),
    ],
)

AlterClientQuotasRequest = message(
    "AlterClientQuotasRequest", api_key=49, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("entries", array(struct("EntryData", [
            field("entity", array(_EntityData), "0+"),
            field("ops", array(struct("OpData", [
                field("key", STRING, "0+"),
                field("value", FLOAT64, "0+"),
                field("remove", BOOL, "0+"),
            ])), "0+"),
        ])), "0+"),
        field("validate_only", BOOL, "0+"),
    ],
)

AlterClientQuotasResponse = message(
    "AlterClientQuotasResponse", api_key=49, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("entries", array(struct("EntryData", [
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+"),
            field("entity", array(_EntityData), "0+"),
        ])), "0+"),
    ],
)
