"""Idempotent and transactional producers.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.
"""

from __future__ import annotations

from ..schema import BOOL, INT16, INT32, INT64, STRING, array, field, message, struct

_AddPartitionsToTxnTopic = struct('AddPartitionsToTxnTopic', [
    field("name", STRING, "0+"),
    field("partitions", array(INT32), "0+"),
])

_AddPartitionsToTxnPartitionResult = struct('AddPartitionsToTxnPartitionResult', [
    field("partition_index", INT32, "0+"),
    field("partition_error_code", INT16, "0+"),
])

_AddPartitionsToTxnTopicResult = struct('AddPartitionsToTxnTopicResult', [
    field("name", STRING, "0+"),
    field("results_by_partition", array(_AddPartitionsToTxnPartitionResult), "0+"),
])

InitProducerIdRequest = message(
    "InitProducerIdRequest", api_key=22, valid_versions="0-6", flexible_versions="2+",
    fields=[
        field("transactional_id", STRING, "0+", nullable_versions="0+"),
        field("transaction_timeout_ms", INT32, "0+"),
        field("producer_id", INT64, "3+", default=-1),
        field("producer_epoch", INT16, "3+", default=-1),
        field("enable2_pc", BOOL, "6+", default=False),
        field("keep_prepared_txn", BOOL, "6+", default=False),
    ],
)

InitProducerIdResponse = message(
    "InitProducerIdResponse", api_key=22, valid_versions="0-6", flexible_versions="2+",
    fields=[
        field("throttle_time_ms", INT32, "0+", ignorable=True),
        field("error_code", INT16, "0+"),
        field("producer_id", INT64, "0+", default=-1),
        field("producer_epoch", INT16, "0+"),
        field("ongoing_txn_producer_id", INT64, "6+", default=-1),
        field("ongoing_txn_producer_epoch", INT16, "6+", default=-1),
    ],
)

AddPartitionsToTxnRequest = message(
    "AddPartitionsToTxnRequest", api_key=24, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("transactions", array(struct("AddPartitionsToTxnTransaction", [
            field("transactional_id", STRING, "4+"),
            field("producer_id", INT64, "4+"),
            field("producer_epoch", INT16, "4+"),
            field("verify_only", BOOL, "4+", default=False),
            field("topics", array(_AddPartitionsToTxnTopic), "4+"),
        ])), "4+"),
        field("v3_and_below_transactional_id", STRING, "0-3"),
        field("v3_and_below_producer_id", INT64, "0-3"),
        field("v3_and_below_producer_epoch", INT16, "0-3"),
        field("v3_and_below_topics", array(_AddPartitionsToTxnTopic), "0-3"),
    ],
)

AddPartitionsToTxnResponse = message(
    "AddPartitionsToTxnResponse", api_key=24, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "4+", ignorable=True),
        field("results_by_transaction", array(struct("AddPartitionsToTxnResult", [
            field("transactional_id", STRING, "4+"),
            field("topic_results", array(_AddPartitionsToTxnTopicResult), "4+"),
        ])), "4+"),
        field("results_by_topic_v3_and_below", array(_AddPartitionsToTxnTopicResult), "0-3"),
    ],
)

AddOffsetsToTxnRequest = message(
    "AddOffsetsToTxnRequest", api_key=25, valid_versions="0-4", flexible_versions="3+",
    fields=[
        field("transactional_id", STRING, "0+"),
        field("producer_id", INT64, "0+"),
        field("producer_epoch", INT16, "0+"),
        field("group_id", STRING, "0+"),
    ],
)

AddOffsetsToTxnResponse = message(
    "AddOffsetsToTxnResponse", api_key=25, valid_versions="0-4", flexible_versions="3+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
    ],
)

EndTxnRequest = message(
    "EndTxnRequest", api_key=26, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("transactional_id", STRING, "0+"),
        field("producer_id", INT64, "0+"),
        field("producer_epoch", INT16, "0+"),
        field("committed", BOOL, "0+"),
    ],
)

EndTxnResponse = message(
    "EndTxnResponse", api_key=26, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("producer_id", INT64, "5+", default=-1, ignorable=True),
        field("producer_epoch", INT16, "5+", default=-1, ignorable=True),
    ],
)

WriteTxnMarkersRequest = message(
    "WriteTxnMarkersRequest", api_key=27, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("markers", array(struct("WritableTxnMarker", [
            field("producer_id", INT64, "0+"),
            field("producer_epoch", INT16, "0+"),
            field("transaction_result", BOOL, "0+"),
            field("topics", array(struct("WritableTxnMarkerTopic", [
                field("name", STRING, "0+"),
                field("partition_indexes", array(INT32), "0+"),
            ])), "0+"),
            field("coordinator_epoch", INT32, "0+"),
        ])), "0+"),
    ],
)

WriteTxnMarkersResponse = message(
    "WriteTxnMarkersResponse", api_key=27, valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("markers", array(struct("WritableTxnMarkerResult", [
            field("producer_id", INT64, "0+"),
            field("topics", array(struct("WritableTxnMarkerTopicResult", [
                field("name", STRING, "0+"),
                field("partitions", array(struct("WritableTxnMarkerPartitionResult", [
                    field("partition_index", INT32, "0+"),
                    field("error_code", INT16, "0+"),
                ])), "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

TxnOffsetCommitRequest = message(
    "TxnOffsetCommitRequest", api_key=28, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("transactional_id", STRING, "0+"),
        field("group_id", STRING, "0+"),
        field("producer_id", INT64, "0+"),
        field("producer_epoch", INT16, "0+"),
        field("generation_id", INT32, "3+", default=-1),
        field("member_id", STRING, "3+", default=""),
        field("group_instance_id", STRING, "3+", nullable_versions="3+", default=None),
        field("topics", array(struct("TxnOffsetCommitRequestTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("TxnOffsetCommitRequestPartition", [
                field("partition_index", INT32, "0+"),
                field("committed_offset", INT64, "0+"),
                field("committed_leader_epoch", INT32, "2+", default=-1, ignorable=True),
                field("committed_metadata", STRING, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

TxnOffsetCommitResponse = message(
    "TxnOffsetCommitResponse", api_key=28, valid_versions="0-5", flexible_versions="3+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct("TxnOffsetCommitResponseTopic", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("TxnOffsetCommitResponsePartition", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

DescribeProducersRequest = message(
    "DescribeProducersRequest", api_key=61, valid_versions="0", flexible_versions="0+",
    fields=[
        field("topics", array(struct("TopicRequest", [
            field("name", STRING, "0+"),
            field("partition_indexes", array(INT32), "0+"),
        ])), "0+"),
    ],
)

DescribeProducersResponse = message(
    "DescribeProducersResponse", api_key=61, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct("TopicResponse", [
            field("name", STRING, "0+"),
            field("partitions", array(struct("PartitionResponse", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
                field("active_producers", array(struct("ProducerState", [
                    field("producer_id", INT64, "0+"),
                    field("producer_epoch", INT32, "0+"),
                    field("last_sequence", INT32, "0+", default=-1),
                    field("last_timestamp", INT64, "0+", default=-1),
                    field("coordinator_epoch", INT32, "0+"),
                    field("current_txn_start_offset", INT64, "0+", default=-1),
                ])), "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

DescribeTransactionsRequest = message(
    "DescribeTransactionsRequest", api_key=65, valid_versions="0", flexible_versions="0+",
    fields=[
        field("transactional_ids", array(STRING), "0+"),
    ],
)

DescribeTransactionsResponse = message(
    "DescribeTransactionsResponse", api_key=65, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("transaction_states", array(struct("TransactionState", [
            field("error_code", INT16, "0+"),
            field("transactional_id", STRING, "0+"),
            field("transaction_state", STRING, "0+"),
            field("transaction_timeout_ms", INT32, "0+"),
            field("transaction_start_time_ms", INT64, "0+"),
            field("producer_id", INT64, "0+"),
            field("producer_epoch", INT16, "0+"),
            field("topics", array(struct("TopicData", [
                field("topic", STRING, "0+"),
                field("partitions", array(INT32), "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

ListTransactionsRequest = message(
    "ListTransactionsRequest", api_key=66, valid_versions="0-2", flexible_versions="0+",
    fields=[
        field("state_filters", array(STRING), "0+"),
        field("producer_id_filters", array(INT64), "0+"),
        field("duration_filter", INT64, "1+", default=-1),
        field("transactional_id_pattern", STRING, "2+", nullable_versions="2+", default=None),
    ],
)

ListTransactionsResponse = message(
    "ListTransactionsResponse", api_key=66, valid_versions="0-2", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("unknown_state_filters", array(STRING), "0+"),
        field("transaction_states", array(struct("TransactionState", [
            field("transactional_id", STRING, "0+"),
            field("producer_id", INT64, "0+"),
            field("transaction_state", STRING, "0+"),
        ])), "0+"),
    ],
)
