"""The share coordinator's state APIs (KIP-932), between brokers: InitializeShareGroupState (83),
ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86), ReadShareGroupStateSummary (87).

A share-partition's leader (the broker leading the data partition) keeps its state with the broker leading the
__share_group_state partition the share-partition hashes to, through these requests; the group coordinator uses them
for the share group offsets APIs. Transcribed field by field from Kafka 4.3.1's JSON message definitions
(kafka-clients-4.3.1.jar, common/message/*ShareGroupState*.json): Write and ReadSummary gained
DeliveryCompleteCount at v1 (KIP-1226), the others are at v0.
"""

from __future__ import annotations

from ..schema import INT8, INT16, INT32, INT64, STRING, UUID, array, field, message, struct

_StateBatch = struct("StateBatch", [
    field("first_offset", INT64, "0+"),
    field("last_offset", INT64, "0+"),
    field("delivery_state", INT8, "0+"),
    field("delivery_count", INT16, "0+"),
])


def _request(name: str, api_key: int, versions: str, partition_fields: list):
    return message(name, api_key=api_key, valid_versions=versions, flexible_versions="0+", fields=[
        field("group_id", STRING, "0+"),
        field("topics", array(struct("StateData", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("PartitionData", [field("partition", INT32, "0+"), *partition_fields])),
                  "0+"),
        ])), "0+"),
    ])


def _response(name: str, api_key: int, versions: str, partition_fields: list):
    return message(name, api_key=api_key, valid_versions=versions, flexible_versions="0+", fields=[
        field("results", array(struct("StateResult", [
            field("topic_id", UUID, "0+"),
            field("partitions", array(struct("PartitionResult", [
                field("partition", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable_versions="0+", default=None),
                *partition_fields,
            ])), "0+"),
        ])), "0+"),
    ])


InitializeShareGroupStateRequest = _request("InitializeShareGroupStateRequest", 83, "0", [
    field("state_epoch", INT32, "0+"),
    field("start_offset", INT64, "0+"),
])
InitializeShareGroupStateResponse = _response("InitializeShareGroupStateResponse", 83, "0", [])

ReadShareGroupStateRequest = _request("ReadShareGroupStateRequest", 84, "0", [
    field("leader_epoch", INT32, "0+"),
])
ReadShareGroupStateResponse = _response("ReadShareGroupStateResponse", 84, "0", [
    field("state_epoch", INT32, "0+"),
    field("start_offset", INT64, "0+"),
    field("state_batches", array(_StateBatch), "0+"),
])

WriteShareGroupStateRequest = _request("WriteShareGroupStateRequest", 85, "0-1", [
    field("state_epoch", INT32, "0+"),
    field("leader_epoch", INT32, "0+"),
    field("start_offset", INT64, "0+"),
    field("delivery_complete_count", INT32, "1+", default=-1, ignorable=True),
    field("state_batches", array(_StateBatch), "0+"),
])
WriteShareGroupStateResponse = _response("WriteShareGroupStateResponse", 85, "0-1", [])

DeleteShareGroupStateRequest = _request("DeleteShareGroupStateRequest", 86, "0", [])
DeleteShareGroupStateResponse = _response("DeleteShareGroupStateResponse", 86, "0", [])

ReadShareGroupStateSummaryRequest = _request("ReadShareGroupStateSummaryRequest", 87, "0-1", [
    field("leader_epoch", INT32, "0+"),
])
ReadShareGroupStateSummaryResponse = _response("ReadShareGroupStateSummaryResponse", 87, "0-1", [
    field("state_epoch", INT32, "0+"),
    field("leader_epoch", INT32, "0+"),
    field("start_offset", INT64, "0+"),
    field("delivery_complete_count", INT32, "1+", default=-1, ignorable=True),
])

__all__ = [name for name in dir() if name.endswith(("Request", "Response")) and not name.startswith("_")]
