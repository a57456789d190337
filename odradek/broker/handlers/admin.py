"""CreateTopics, DeleteTopics, CreatePartitions: changes to the topic catalogue, answered per topic.
ListConfigResources (Kafka 4.0's ListClientMetricsResources, v0): the client metrics subscriptions, of which we
have none (KIP-714 telemetry is not collected), so the list is empty.

Each topic succeeds or fails on its own with Kafka's code and message (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_CONFIG, INVALID_TOPIC_EXCEPTION ...); validate_only checks without changing.
Replicas assigned by hand are accepted when they pass Kafka's checks and name only registered brokers (this one),
else INVALID_REPLICA_ASSIGNMENT.
In a ZooKeeper cluster the answer waits (up to the request's timeout) until the change is in force: every new
partition has a leader, a deleted topic is gone, as Kafka answers once its metadata cache has the change; the
znode writes run off the event loop (Broker.catalogue_write), so other connections do not wait on ZooKeeper.
One exception, as in Kafka 4 (KAFKA-17870): a request that would create more than 10,000 partitions in all fails
whole with POLICY_VIOLATION before anything is built, so one request cannot make the broker build two billion
partitions. A topic named twice in one CreateTopics or CreatePartitions gets INVALID_REQUEST, as in Kafka, and
neither entry is acted on.
With an authorizer, as KafkaApis: creating needs CREATE on the cluster or the topic, deleting DELETE on the topic,
adding partitions ALTER on it (TOPIC_AUTHORIZATION_FAILED per topic).
"""

from __future__ import annotations

from collections import Counter

from odradek.config import ConfigSource
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.protocol.schema import ZERO_UUID

CREATE_TOPICS = api("CreateTopics")
DELETE_TOPICS = api("DeleteTopics")
CREATE_PARTITIONS = api("CreatePartitions")
LIST_CONFIG_RESOURCES = api("ListConfigResources")
CreateTopicsResponse = CREATE_TOPICS.response
DeleteTopicsResponse = DELETE_TOPICS.response
CreatePartitionsResponse = CREATE_PARTITIONS.response

MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's MAX_PARTITIONS_PER_BATCH
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def duplicate_names(entries) -> list[str]:
    """The names that more than one entry of a request names, in order of first appearance: Kafka answers each once
    with INVALID_REQUEST and acts on none of their entries (one entry's growth must not hide another's)."""
    counts = Counter(entry.name for entry in entries)
    return [name for name, count in counts.items() if count > 1]


def handlers(broker) -> dict:
    async def answer_create_topics(connection, header, request):
        default_count = broker.config["num.partitions"]
        duplicated = set(duplicate_names(request.topics))
        requested = sum(len(wanted.assignments) if wanted.assignments
                        else default_count if wanted.num_partitions == -1 else max(wanted.num_partitions, 0)
                        for wanted in request.topics if wanted.name not in duplicated)
        too_many = requested > MAX_PARTITIONS_PER_REQUEST
        access = broker.access(connection)
        may_create_any = access.allows_cluster(AclOperation.CREATE)
        results = []
        answered = set()
        for wanted in request.topics:
            if wanted.name in answered:  # a duplicated name is answered once, as Kafka's controller answers it
                continue
            answered.add(wanted.name)
            result = CreateTopicsResponse.CreatableTopicResult(
                name=wanted.name, topic_id=ZERO_UUID, error_code=ErrorCode.NONE, error_message=None,
                num_partitions=-1, replication_factor=-1, configs=[])
            try:
                if wanted.name in duplicated:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic.")
                if not may_create_any:
                    access.require(AclOperation.CREATE, ResourceType.TOPIC, wanted.name)
                if too_many:
                    raise KafkaError(ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS)
                count, factor, replicas = wanted.num_partitions, wanted.replication_factor, None
                if wanted.assignments:
                    replicas = manual_assignment(wanted)
                    count, factor = len(replicas), len(replicas[0])
                configs = {c.name: c.value for c in wanted.configs if c.value is not None}
                topic = await broker.catalogue_write(
                    broker.create_topic, wanted.name, count, factor, configs,
                    replicas=replicas, validate_only=request.validate_only if header.api_version >= 1 else False)
            except KafkaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
            else:
                result.topic_id = topic.topic_id
                if not access.allows(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, wanted.name):
                    result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # as Kafka: created,
                    results.append(result)  # but nothing of it told to whoever may not describe its configs
                    continue
                result.num_partitions = len(topic.partitions)
                result.replication_factor = len(topic.partitions[0].replicas)
                result.configs = [  # every topic config with its source, as Kafka's controller answers
                    CreateTopicsResponse.CreatableTopicConfigs(
                        name=entry.name, value=entry.value, read_only=entry.read_only,
                        is_sensitive=entry.is_sensitive, config_source=entry.config_source)
                    for entry in broker.topic_config_entries(topic.configs, False, False)]
            results.append(result)
        response = CreateTopicsResponse(throttle_time_ms=0, topics=results)
        created = [] if request.validate_only and header.api_version >= 1 else \
            [r.name for r in results if r.error_code == ErrorCode.NONE]
        return await when_settled(response, created, request.timeout_ms, deleted=False)

    async def when_settled(response, names: list[str], timeout_ms: int, *, deleted: bool):
        """The response once the changes to `names` are in force, waiting at most timeout_ms (then answers
        REQUEST_TIMED_OUT for the topics still pending, as Kafka)."""
        await broker.catalogue_settled(lambda: all(broker.metadata.settled(name, deleted=deleted) for name in names),
                                       timeout_ms)
        for result in (response.topics if not deleted else response.responses):
            if result.name in names and not broker.metadata.settled(result.name, deleted=deleted):
                result.error_code, result.error_message = ErrorCode.REQUEST_TIMED_OUT, None
        return response

    def manual_assignment(wanted) -> list[list[int]]:
        """The replica lists, in partition order, of a CreateTopics entry that assigns replicas by hand."""
        if wanted.num_partitions != -1:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                        "numPartitions was not set to -1.")
        if wanted.replication_factor != -1:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                        "replicationFactor was not set to -1.")
        ordered = sorted(wanted.assignments, key=lambda assignment: assignment.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Partitions should be consecutive 0-based integers.")
        replicas = [list(a.broker_ids) for a in ordered]
        broker.metadata.check_manual_assignment(replicas)
        return replicas

    async def answer_delete_topics(connection, header, request):
        if header.api_version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, None) for name in request.topic_names]
        access = broker.access(connection)
        results = []
        for name, topic_id in wanted:
            result = DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id or ZERO_UUID, error_code=ErrorCode.NONE, error_message=None)
            try:
                if name is None:
                    topic = broker.metadata.topics_by_id.get(topic_id)
                    if topic is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                    name = result.name = topic.name
                access.require(AclOperation.DELETE, ResourceType.TOPIC, name)
                if name in broker.metadata.topics and broker.metadata.topics[name].internal:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Internal topic {name} cannot be deleted.")
                deleted = await broker.catalogue_write(broker.delete_topic, name)
                result.topic_id = deleted.topic_id
            except KafkaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
        return await when_settled(DeleteTopicsResponse(throttle_time_ms=0, responses=results),
                            [r.name for r in results if r.error_code == ErrorCode.NONE], request.timeout_ms,
                            deleted=True)

    async def answer_create_partitions(connection, header, request):
        topics = broker.metadata.topics
        duplicated = duplicate_names(request.topics)
        wanted_once = [wanted for wanted in request.topics if wanted.name not in duplicated]
        growth = {wanted.name: wanted.count - (len(topics[wanted.name].partitions) if wanted.name in topics else 0)
                  for wanted in wanted_once}  # for a topic we do not know, add_partitions says so
        too_many = sum(max(growth[wanted.name], 0) for wanted in wanted_once
                       if wanted.name in topics) > MAX_PARTITIONS_PER_REQUEST
        access = broker.access(connection)
        results = [CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic in request.")
            for name in duplicated]
        for wanted in wanted_once:
            result = CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=wanted.name, error_code=ErrorCode.NONE, error_message=None)
            try:
                access.require(AclOperation.ALTER, ResourceType.TOPIC, wanted.name)
                if too_many:
                    raise KafkaError(ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS)
                replicas = None
                if wanted.assignments:
                    if len(wanted.assignments) != growth[wanted.name]:
                        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Attempted to add {growth[wanted.name]} additional partition(s), but "
                                         f"only {len(wanted.assignments)} assignment(s) were specified.")
                    replicas = [list(a.broker_ids) for a in wanted.assignments]
                    broker.metadata.check_manual_assignment(replicas)
                await broker.catalogue_write(broker.add_partitions, wanted.name, wanted.count, replicas=replicas,
                                             validate_only=request.validate_only)
            except KafkaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    def answer_list_config_resources(connection, header, request):
        return LIST_CONFIG_RESOURCES.response(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[])

    return {CREATE_TOPICS.key: answer_create_topics, DELETE_TOPICS.key: answer_delete_topics,
            CREATE_PARTITIONS.key: answer_create_partitions, LIST_CONFIG_RESOURCES.key: answer_list_config_resources}
