"""DescribeTopicPartitions, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: the partition
admin calls, answered per partition as Kafka's controller and metadata cache answer them.

Each broker answers from the cluster metadata it holds (broker.metadata: the catalogue of a single node, or in a
ZooKeeper cluster the watched view), with the decisions of odradek/cluster/elections.py; what it writes for the
controller goes through Broker.catalogue_write, off the event loop. ElectLeaders: a partition whose preferred
replica leads is ELECTION_NOT_NEEDED (left out when all partitions were asked for, as Kafka does), one whose
preferred replica is not live or not in the ISR PREFERRED_LEADER_NOT_AVAILABLE; an unclean election is only for a
partition whose leader is gone. The others are asked of the controller (catalogue.request_elections), which decides
again on its view and writes the new leader with the leader epoch bumped; the answer waits, up to the request's
timeout (then REQUEST_TIMED_OUT), until this broker's view shows it. AlterPartitionReassignments records each target
(KIP-455: replicas, adding and removing replicas in the topic's znode) and answers at once; the controller then
moves the partition. ListPartitionReassignments lists those under way. A single node has no other broker, so every
partition is led by its preferred replica, the only valid target is the current replica set (a no-op; cancelling:
NO_REASSIGNMENT_IN_PROGRESS) and nothing is ever listed. DescribeTopicPartitions pages through topics in name order
with response_partition_limit (at most max.request.partition.size.limit, 2000) and a cursor, as Kafka's
DescribeTopicPartitionsRequestHandler does. With an authorizer, as KafkaApis: DescribeTopicPartitions lists only
topics the principal may describe (a named other one is TOPIC_AUTHORIZATION_FAILED), ElectLeaders and
AlterPartitionReassignments need ALTER on the cluster, ListPartitionReassignments DESCRIBE
(CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations


from odradek.cluster.elections import election_in_force, elected, reassignment_in_force
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
                    error_code=code, name=name, topic_id=ZERO_UUID, partitions=[],
                    topic_authorized_operations=access.operations(ResourceType.TOPIC, name, True)))
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
    async def answer_elect_leaders(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.ALTER):
            return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                        replica_election_results=[])
        catalogue = broker.metadata
        election_type = request.election_type  # v0: preferred
        live = catalogue.registered_brokers()
        elect_all = request.topic_partitions is None
        wanted = ({name: range(len(topic.partitions)) for name, topic in catalogue.topics.items()}
                  if elect_all else {})
        for entry in request.topic_partitions or ():
            wanted.setdefault(entry.topic, []).extend(entry.partitions)
        outcomes: dict[tuple[str, int], KafkaError | None] = {}
        for topic, indexes in wanted.items():
            for index in dict.fromkeys(indexes):  # each partition once, as Kafka's set of them
                try:
                    assignment = catalogue.assignment_of(topic, index)
                    elected(election_type, assignment.replicas, assignment.leader, assignment.isr, live)
                    outcomes[(topic, index)] = None
                except KafkaError as exc:
                    outcomes[(topic, index)] = exc
        asked = [key for key, outcome in outcomes.items() if outcome is None]

        def in_force(key: tuple[str, int]) -> bool:
            try:
                assignment = catalogue.assignment_of(*key)
            except KafkaError:  # deleted meanwhile: nothing left to wait for
                return True
            return election_in_force(election_type, assignment.replicas, assignment.leader, live)

        def response():
            results = {topic: [] for topic in wanted} if elect_all else {}  # Kafka lists every topic it tried
            for (topic, index), outcome in outcomes.items():
                code, message = (ErrorCode.NONE, None) if outcome is None else (outcome.code, outcome.message)
                if outcome is None and not in_force((topic, index)):
                    code, message = ErrorCode.REQUEST_TIMED_OUT, "The election did not finish within the timeout."
                if not (elect_all and code == ErrorCode.ELECTION_NOT_NEEDED):  # left out, as Kafka does
                    results.setdefault(topic, []).append(ElectLeadersResponse.PartitionResult(
                        partition_id=index, error_code=code, error_message=message))
            return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
                ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=partitions)
                for topic, partitions in results.items()])

        if not asked:
            return response()
        await broker.catalogue_write(catalogue.request_elections, election_type, asked)
        await broker.catalogue_settled(lambda: all(in_force(key) for key in asked), request.timeout_ms)
        return response()

    # ------------------------------------------------------------------------------------- reassignments
    async def answer_alter_partition_reassignments(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.ALTER):
            return AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message="Cluster authorization failed.", responses=[])
        catalogue = broker.metadata
        wanted: dict[str, dict[int, list[int] | None]] = {}  # a topic named twice is one, a later target wins (Kafka)
        for topic in request.topics:
            wanted.setdefault(topic.name, {}).update(
                (partition.partition_index, partition.replicas) for partition in topic.partitions)
        outcomes = {name: await broker.catalogue_write(catalogue.reassign_partitions, name, targets)
                    for name, targets in wanted.items()}
        accepted = [(name, index, target) for name, targets in wanted.items() for index, target in targets.items()
                    if outcomes[name][index] is None]

        def in_force(name: str, index: int, target: list[int] | None) -> bool:
            try:
                assignment = catalogue.assignment_of(name, index)
            except KafkaError:  # deleted meanwhile: nothing left to wait for
                return True
            return reassignment_in_force(assignment.replicas, assignment.adding_replicas,
                                         assignment.removing_replicas, target)

        def response():
            return AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=[
                    AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=name, partitions=[
                        AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                            partition_index=index, error_code=outcome.code if outcome else ErrorCode.NONE,
                            error_message=outcome.message if outcome else None)
                        for index, outcome in partitions.items()])
                    for name, partitions in outcomes.items()])

        # until this broker's view shows the targets, so a ListPartitionReassignments sees them
        await broker.catalogue_settled(lambda: all(in_force(*entry) for entry in accepted), request.timeout_ms)
        for name, index, target in accepted:
            if not in_force(name, index, target):
                outcomes[name][index] = KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                                   "The reassignment was not seen within the timeout.")
        return response()

    def answer_list_partition_reassignments(connection, header, request):
        if not broker.access(connection).allows_cluster(AclOperation.DESCRIBE):
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message="Cluster authorization failed.", topics=[])
        topics = broker.metadata.topics
        if request.topics is None:
            wanted = [(name, range(len(topic.partitions))) for name, topic in topics.items()]
        else:
            wanted = [(entry.name, entry.partition_indexes) for entry in request.topics]
        by_topic: dict = {}
        for name, indexes in wanted:
            topic = topics.get(name)
            for index in indexes:
                assignment = topic.partitions[index] if topic is not None and 0 <= index < len(topic.partitions) \
                    else None
                if assignment is not None and assignment.reassigning:  # unknown partitions are left out, as Kafka
                    by_topic.setdefault(name, []).append(
                        ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                            partition_index=index, replicas=list(assignment.replicas),
                            adding_replicas=list(assignment.adding_replicas),
                            removing_replicas=list(assignment.removing_replicas)))
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
