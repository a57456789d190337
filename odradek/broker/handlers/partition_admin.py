"""DescribeTopicPartitions, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: the partition
admin calls, answered per partition as Kafka's controller and metadata cache answer them.

The decisions belong to the partition (odradek/cluster/partition.py: elect_leader, reassign, reassignment), so when
replication and a controller arrive they change there and these handlers stay as they are. With one broker every
partition's leader is its preferred replica (ElectLeaders: ELECTION_NOT_NEEDED, left out when all partitions were
asked for, as Kafka does), the only valid reassignment target is the current replica set (a no-op; cancelling:
NO_REASSIGNMENT_IN_PROGRESS) and no reassignment is ever listed. DescribeTopicPartitions pages through topics in name
order with response_partition_limit (at most max.request.partition.size.limit, 2000) and a cursor, as Kafka's
DescribeTopicPartitionsRequestHandler does. With an authorizer, as KafkaApis: DescribeTopicPartitions lists only
topics the principal may describe (a named other one is TOPIC_AUTHORIZATION_FAILED), ElectLeaders and
AlterPartitionReassignments need ALTER on the cluster, ListPartitionReassignments DESCRIBE
(CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from odradek.cluster.metadata import validate_topic_name
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.protocol.schema import ZERO_UUID

DESCRIBE_TOPIC_PARTITIONS = api("DescribeTopicPartitions")
ELECT_LEADERS = api("ElectLeaders")
ALTER_PARTITION_REASSIGNMENTS = api("AlterPartitionReassignments")
LIST_PARTITION_REASSIGNMENTS = api("ListPartitionReassignments")
DescribeTopicPartitionsResponse = DESCRIBE_TOPIC_PARTITIONS.response
ElectLeadersResponse = ELECT_LEADERS.response
AlterPartitionReassignmentsResponse = ALTER_PARTITION_REASSIGNMENTS.response
ListPartitionReassignmentsResponse = LIST_PARTITION_REASSIGNMENTS.response

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def handlers(broker) -> dict:
    def partition_of(topic: str, index: int):
        partition = broker.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"No such topic as {topic}" if topic not in broker.metadata.topics
                             else f"No such partition as {topic}-{index}")
        return partition

    # ------------------------------------------------------------------------------ DescribeTopicPartitions
    def answer_describe_topic_partitions(connection, header, request):
        catalogue = broker.metadata
        cursor = request.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        all_topics = not request.topics
        access = broker.access(connection)
        names = ({name for name in catalogue.topics if access.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name)}
                 if all_topics else {wanted.name for wanted in request.topics})
        names = sorted(name for name in names if name >= cursor_topic)
        if (cursor is not None and not all_topics and cursor_topic not in names) or (
                cursor is not None and cursor.partition_index < 0):
            return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
                DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.INVALID_REQUEST, name=wanted.name, topic_id=ZERO_UUID, partitions=[])
                for wanted in request.topics])
        remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
        topics, next_cursor = [], None
        for name in names:
            if remaining == 0:
                next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
                break
            if not access.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name):  # existence not disclosed
                topics.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID, partitions=[]))
                continue
            topic = catalogue.topics.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError as exc:
                    code = exc.code
                topics.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                    error_code=code, name=name, topic_id=ZERO_UUID, partitions=[]))
                continue
            start = cursor.partition_index if name == cursor_topic and cursor is not None else 0
            end = min(len(topic.partitions), start + remaining)
            topics.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id, is_internal=topic.internal,
                partitions=[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
                    error_code=ErrorCode.NONE, partition_index=index, leader_id=assignment.leader,
                    leader_epoch=assignment.leader_epoch, replica_nodes=list(assignment.replicas),
                    isr_nodes=list(assignment.isr), eligible_leader_replicas=[], last_known_elr=[],
                    offline_replicas=[])
                    for index, assignment in enumerate(topic.partitions[start:end], start)],
                topic_authorized_operations=access.operations(ResourceType.TOPIC, name, True)))
            if end < len(topic.partitions):
                next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=end)
                break
            remaining -= end - start
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

    # ------------------------------------------------------------------------------------------ ElectLeaders
    def answer_elect_leaders(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.ALTER):
            return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                        replica_election_results=[])
        elect_all = request.topic_partitions is None
        wanted = ({name: range(len(topic.partitions)) for name, topic in broker.metadata.topics.items()}
                  if elect_all else {})
        for entry in request.topic_partitions or ():
            wanted.setdefault(entry.topic, []).extend(entry.partitions)
        results = []
        for topic, indexes in wanted.items():
            outcomes = []
            for index in dict.fromkeys(indexes):  # each partition once, as Kafka's set of them
                try:
                    partition_of(topic, index).elect_leader(request.election_type)  # v0: preferred
                    code, message = ErrorCode.NONE, None
                except KafkaError as exc:
                    code, message = exc.code, exc.message
                if not (elect_all and code == ErrorCode.ELECTION_NOT_NEEDED):
                    outcomes.append(ElectLeadersResponse.PartitionResult(partition_id=index, error_code=code,
                                                                         error_message=message))
            if outcomes:
                results.append(ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=outcomes))
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    replica_election_results=results)

    # ------------------------------------------------------------------------------------- reassignments
    def answer_alter_partition_reassignments(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.ALTER):
            return AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message="Cluster authorization failed.", responses=[])
        responses = []
        for topic in request.topics:
            answers = []
            for wanted in topic.partitions:
                code, message = ErrorCode.NONE, None
                try:
                    partition = partition_of(topic.name, wanted.partition_index)
                    if wanted.replicas is not None:
                        broker.metadata.check_manual_assignment([wanted.replicas])
                    partition.reassign(wanted.replicas)
                except KafkaError as exc:
                    code, message = exc.code, exc.message
                answers.append(AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                    partition_index=wanted.partition_index, error_code=code, error_message=message))
            responses.append(AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                name=topic.name, partitions=answers))
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                   error_message=None, responses=responses)

    def answer_list_partition_reassignments(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.DESCRIBE):
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message="Cluster authorization failed.", topics=[])
        if request.topics is None:
            wanted = broker.partitions.items()
        else:
            wanted = (((entry.name, index), broker.partitions.get((entry.name, index)))
                      for entry in request.topics for index in entry.partition_indexes)
        by_topic: dict = {}
        for (topic, index), partition in wanted:
            ongoing = partition.reassignment if partition is not None else None
            if ongoing is not None:  # unknown partitions are left out, as Kafka does
                adding, removing = ongoing
                by_topic.setdefault(topic, []).append(
                    ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                        partition_index=index, replicas=list(partition.assignment.replicas),
                        adding_replicas=adding, removing_replicas=removing))
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[
                ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=name, partitions=partitions)
                for name, partitions in by_topic.items()])

    return {
        DESCRIBE_TOPIC_PARTITIONS.key: answer_describe_topic_partitions,
        ELECT_LEADERS.key: answer_elect_leaders,
        ALTER_PARTITION_REASSIGNMENTS.key: answer_alter_partition_reassignments,
        LIST_PARTITION_REASSIGNMENTS.key: answer_list_partition_reassignments,
    }
