"""ListOffsets, DeleteRecords and OffsetForLeaderEpoch: questions and changes about a partition's offset range.

ListOffsets answers the special timestamps Kafka defines (-1 latest, -2 earliest, -3 the record with the largest
timestamp, -4 earliest local, -5 latest tiered) and otherwise the first offset whose timestamp is at or after the
one asked, using the logs' time indexes. DeleteRecords refuses, as Kafka does, the internal topics and topics whose
cleanup.policy lacks delete. Version 0 asks instead for up to max_num_offsets "old-style offsets" by
segment: see `old_style_offsets`. OffsetForLeaderEpoch is answered from the partition's leader epoch cache
(odradek/storage/leader_epochs.py), for clients (KIP-320) and for followers finding where to truncate (KIP-101/279);
as Kafka (fetchOnlyFromLeader), only the leader answers.
"""

from __future__ import annotations

import time

from odradek.cluster.metadata import INTERNAL_TOPICS
from odradek.errors import ErrorCode, KafkaError, storage_error
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType

LIST_OFFSETS = api("ListOffsets")
DELETE_RECORDS = api("DeleteRecords")
OFFSET_FOR_LEADER_EPOCH = api("OffsetForLeaderEpoch")
ListOffsetsResponse = LIST_OFFSETS.response
DeleteRecordsResponse = DELETE_RECORDS.response
OffsetForLeaderEpochResponse = OFFSET_FOR_LEADER_EPOCH.response

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1


def old_style_offsets(offset_times: list[tuple[int, int]], timestamp: int, max_num_offsets: int,
                      high_watermark: int | None) -> list[int]:
    """ListOffsets v0's answer, as Kafka's Log.legacyFetchOffsetsBefore gives it: from `offset_times` (each
    segment's base offset and last modified time, then the log end's, in log order) the offsets of the latest point
    (LATEST), the first (EARLIEST) or the last one modified at or before `timestamp`, and those before it, at most
    `max_num_offsets`, in descending order. A consumer (`high_watermark` given) sees none above the high watermark:
    they are replaced by the high watermark itself, as Kafka's ReplicaManager does."""
    if timestamp == LATEST:
        start = len(offset_times) - 1
    elif timestamp == EARLIEST:
        start = 0 if offset_times else -1
    else:
        start = next((index for index in range(len(offset_times) - 1, -1, -1)
                      if offset_times[index][1] <= timestamp), -1)
    offsets = [offset for offset, _ in offset_times[max(0, start + 1 - max_num_offsets):start + 1]][::-1]
    if high_watermark is not None and offsets and offsets[0] > high_watermark:
        offsets = [high_watermark] + [offset for offset in offsets if offset <= high_watermark]
    return offsets


def handlers(broker) -> dict:
    def lookup(partition, timestamp: int, isolation_level: int) -> tuple[int, int]:
        """(offset, timestamp) for one ListOffsets query; (-1, -1) when no record qualifies."""
        log = partition.log
        if timestamp == LATEST:
            end = partition.last_stable_offset if isolation_level == READ_COMMITTED else partition.high_watermark
            return end, -1
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return log.log_start_offset, -1
        if timestamp == LATEST_TIERED:
            return -1, -1
        found = log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
        if found is None or found[0] >= partition.high_watermark:
            return -1, -1
        return found

    def answer_list_offsets(connection, header, request):
        version = header.api_version
        isolation = request.isolation_level if version >= 2 else 0
        access = broker.access(connection)
        topics = []
        for wanted in request.topics:
            partitions = []
            for query in wanted.partitions:
                answer = ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=query.partition_index, error_code=ErrorCode.NONE, timestamp=-1, offset=-1,
                    leader_epoch=-1, old_style_offsets=[])
                try:
                    access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted.name)
                    if version == 0 and query.timestamp < EARLIEST:
                        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)  # v0 knows only -1 and -2 among them
                    partition = broker.partition(wanted.name, query.partition_index)
                    partition.check_leader_epoch(query.current_leader_epoch if version >= 4 else -1)
                    if version == 0:
                        answer.old_style_offsets = old_style_offsets(
                            partition.log.offset_times(time.time_ns() // 1_000_000), query.timestamp,
                            query.max_num_offsets,
                            partition.high_watermark if request.replica_id == CONSUMER_REPLICA_ID else None)
                    else:
                        answer.offset, answer.timestamp = lookup(partition, query.timestamp, isolation)
                        if answer.offset != -1:  # no record found by timestamp: no epoch either, as Kafka
                            answer.leader_epoch = partition.leader_epoch
                except KafkaError as exc:
                    answer.error_code = exc.code
                except OSError as exc:  # a search by timestamp reads the segments
                    answer.error_code = storage_error(exc, f"{wanted.name}-{query.partition_index}").code
                partitions.append(answer)
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=wanted.name, partitions=partitions))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    def answer_delete_records(connection, header, request):
        access = broker.access(connection)
        topics = []
        for wanted in request.topics:
            partitions = []
            for query in wanted.partitions:
                answer = DeleteRecordsResponse.DeleteRecordsPartitionResult(
                    partition_index=query.partition_index, low_watermark=-1, error_code=ErrorCode.NONE)
                try:
                    access.require(AclOperation.DELETE, ResourceType.TOPIC, wanted.name)
                    if wanted.name in INTERNAL_TOPICS:  # Kafka's ReplicaManager refuses before looking further
                        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION)
                    partition = broker.partition(wanted.name, query.partition_index)
                    if not partition.log.config.delete:  # Partition.deleteRecordsOnLeader: compact-only topics
                        raise KafkaError(ErrorCode.POLICY_VIOLATION)
                    offset = partition.high_watermark if query.offset == -1 else query.offset
                    if offset < 0 or offset > partition.high_watermark:
                        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
                    answer.low_watermark = partition.log.delete_records_before(offset)
                except KafkaError as exc:
                    answer.error_code = exc.code
                except OSError as exc:
                    answer.error_code = storage_error(exc, f"{wanted.name}-{query.partition_index}").code
                partitions.append(answer)
            topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=wanted.name, partitions=partitions))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

    def answer_offset_for_leader_epoch(connection, header, request):
        access = broker.access(connection)
        every_topic = access.allows_cluster(AclOperation.CLUSTER_ACTION)  # a follower broker, as Kafka's KafkaApis
        topics = []
        for wanted in request.topics:
            partitions = []
            for query in wanted.partitions:
                answer = OffsetForLeaderEpochResponse.EpochEndOffset(
                    error_code=ErrorCode.NONE, partition=query.partition, leader_epoch=-1, end_offset=-1)
                try:
                    if not every_topic:
                        access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted.topic)
                    partition = broker.partition(wanted.topic, query.partition)
                    partition.check_leader_epoch(query.current_leader_epoch)
                    answer.leader_epoch, answer.end_offset = partition.last_offset_for_leader_epoch(query.leader_epoch)
                except KafkaError as exc:
                    answer.error_code = exc.code
                partitions.append(answer)
            topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=wanted.topic,
                                                                                  partitions=partitions))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    return {LIST_OFFSETS.key: answer_list_offsets, DELETE_RECORDS.key: answer_delete_records,
            OFFSET_FOR_LEADER_EPOCH.key: answer_offset_for_leader_epoch}

