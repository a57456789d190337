"""Produce: the write path.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.

Kafka 4.0 removed the oldest versions of some of these from its JSON (ProduceRequest below v3, ProduceResponse
below v3) but kept every field's version annotations, so the same declarations still describe them and we keep them
valid from v0 for the older clients that still send them.
"""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, RECORDS, STRING, UUID, array, field, message, struct

ProduceRequest = message(
    "ProduceRequest", api_key=0, valid_versions="0-13", flexible_versions="9+",
    fields=[
        field("transactional_id", STRING, "3+", nullable_versions="3+", default=None),
        field("acks", INT16, "0+"),
        field("timeout_ms", INT32, "0+"),
        field("topic_data", array(struct("TopicProduceData", [
            field("name", STRING, "0-12", ignorable=True),
            field("topic_id", UUID, "13+", ignorable=True),
            field("partition_data", array(struct("PartitionProduceData", [
                field("index", INT32, "0+"),
                field("records", RECORDS, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

ProduceResponse = message(
    "ProduceResponse", api_key=0, valid_versions="0-13", flexible_versions="9+",
    fields=[
        field("responses", array(struct("TopicProduceResponse", [
            field("name", STRING, "0-12", ignorable=True),
            field("topic_id", UUID, "13+", ignorable=True),
            field("partition_responses", array(struct("PartitionProduceResponse", [
                field("index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("base_offset", INT64, "0+"),
                field("log_append_time_ms", INT64, "2+", default=-1, ignorable=True),
                field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                field("record_errors", array(struct("BatchIndexAndErrorMessage", [
                    field("batch_index", INT32, "8+"),
                    field("batch_index_error_message", STRING, "8+", nullable_versions="8+", default=None),
                ])), "8+", ignorable=True),
                field("error_message", STRING, "8+", nullable_versions="8+", default=None, ignorable=True),
                field("current_leader", struct("LeaderIdAndEpoch", [
                    field("leader_id", INT32, "10+", default=-1),
                    field("leader_epoch", INT32, "10+", default=-1),
                ]), "10+", tagged_versions="10+", tag=0),
            ])), "0+"),
        ])), "0+"),
        field("throttle_time_ms", INT32, "1+", default=0, ignorable=True),
        field("node_endpoints", array(struct("NodeEndpoint", [
            field("node_id", INT32, "10+"),
            field("host", STRING, "10+"),
            field("port", INT32, "10+"),
            field("rack", STRING, "10+", nullable_versions="10+", default=None),
        ])), "10+", tagged_versions="10+", tag=0),
    ],
)
