"""Fetch: the read path, for consumers and followers.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.

Kafka 4.0 removed the oldest versions of some of these from its JSON (FetchRequest below v4, FetchResponse below
v4) but kept every field's version annotations, so the same declarations still describe them and we keep them valid
from v0 for the older clients that still send them.
"""

from __future__ import annotations

from ..schema import INT16, INT32, INT64, INT8, RECORDS, STRING, UUID, array, field, message, struct

FetchRequest = message(
    "FetchRequest", api_key=1, valid_versions="0-18", flexible_versions="12+",
    fields=[
        field("cluster_id", STRING, "12+", nullable_versions="12+", tagged_versions="12+", tag=0, default=None, ignorable=True),
        field("replica_id", INT32, "0-14", default=-1),
        field("replica_state", struct("ReplicaState", [
            field("replica_id", INT32, "15+", default=-1),
            field("replica_epoch", INT64, "15+", default=-1),
        ]), "15+", tagged_versions="15+", tag=1),
        field("max_wait_ms", INT32, "0+"),
        field("min_bytes", INT32, "0+"),
        field("max_bytes", INT32, "3+", default=2147483647, ignorable=True),
        field("isolation_level", INT8, "4+", default=0, ignorable=True),
        field("session_id", INT32, "7+", default=0, ignorable=True),
        field("session_epoch", INT32, "7+", default=-1, ignorable=True),
        field("topics", array(struct("FetchTopic", [
            field("topic", STRING, "0-12", ignorable=True),
            field("topic_id", UUID, "13+", ignorable=True),
            field("partitions", array(struct("FetchPartition", [
                field("partition", INT32, "0+"),
                field("current_leader_epoch", INT32, "9+", default=-1, ignorable=True),
                field("fetch_offset", INT64, "0+"),
                field("last_fetched_epoch", INT32, "12+", default=-1),
                field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                field("partition_max_bytes", INT32, "0+"),
                field("replica_directory_id", UUID, "17+", tagged_versions="17+", tag=0, ignorable=True),
                field("high_watermark", INT64, "18+", tagged_versions="18+", tag=1, default=9223372036854775807, ignorable=True),
            ])), "0+"),
        ])), "0+"),
        field("forgotten_topics_data", array(struct("ForgottenTopic", [
            field("topic", STRING, "7-12", ignorable=True),
            field("topic_id", UUID, "13+", ignorable=True),
            field("partitions", array(INT32), "7+"),
        ])), "7+"),
        field("rack_id", STRING, "11+", default="", ignorable=True),
    ],
)

FetchResponse = message(
    "FetchResponse", api_key=1, valid_versions="0-18", flexible_versions="12+",
    fields=[
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("error_code", INT16, "7+", ignorable=True),
        field("session_id", INT32, "7+", default=0),
        field("responses", array(struct("FetchableTopicResponse", [
            field("topic", STRING, "0-12", ignorable=True),
            field("topic_id", UUID, "13+", ignorable=True),
            field("partitions", array(struct("PartitionData", [
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("high_watermark", INT64, "0+"),
                field("last_stable_offset", INT64, "4+", default=-1, ignorable=True),
                field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                field("diverging_epoch", struct("EpochEndOffset", [
                    field("epoch", INT32, "12+", default=-1),
                    field("end_offset", INT64, "12+", default=-1),
                ]), "12+", tagged_versions="12+", tag=0),
                field("current_leader", struct("LeaderIdAndEpoch", [
                    field("leader_id", INT32, "12+", default=-1),
                    field("leader_epoch", INT32, "12+", default=-1),
                ]), "12+", tagged_versions="12+", tag=1),
                field("snapshot_id", struct("SnapshotId", [
                    field("end_offset", INT64, "0+", default=-1),
                    field("epoch", INT32, "0+", default=-1),
                ]), "12+", tagged_versions="12+", tag=2),
                field("aborted_transactions", array(struct("AbortedTransaction", [
                    field("producer_id", INT64, "4+"),
                    field("first_offset", INT64, "4+"),
                ])), "4+", nullable_versions="4+", ignorable=True),
                field("preferred_read_replica", INT32, "11+", default=-1),
                field("records", RECORDS, "0+", nullable_versions="0+"),
            ])), "0+"),
        ])), "0+"),
        field("node_endpoints", array(struct("NodeEndpoint", [
            field("node_id", INT32, "16+"),
            field("host", STRING, "16+"),
            field("port", INT32, "16+"),
            field("rack", STRING, "16+", nullable_versions="16+", default=None),
        ])), "16+", tagged_versions="16+", tag=0),
    ],
)
