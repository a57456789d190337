"""Metadata and DescribeCluster: who the brokers are and where every partition's leader is.

Topics are named by name and by a stable UUID (kept in the cluster metadata), because Fetch v13+ addresses topics
by id. Each client is given every live broker's address for the listener it came in on (advertised.listeners by
name; in a cluster, the endpoint each broker registered under that listener name). A Metadata request for an
unknown topic creates it when auto.create.topics.enable allows and the request asks for it, as Kafka does; clients
rely on that to produce to a new topic. In a ZooKeeper cluster that creation's znode writes run off the event loop
(Broker.catalogue_write) and the answer follows them.

Topic ids in requests follow Kafka's KafkaApis: versions 10 and 11 carry the field but may not use it (a null name
or a non-zero id answers every topic INVALID_REQUEST, the name null given as "" since those versions cannot encode
it); from version 12 a request naming any topic by id is answered by ids alone, an unknown id with UNKNOWN_TOPIC_ID
and a null name.

With an authorizer (KafkaApis' checks): the topic list leaves out topics the principal may not DESCRIBE, a named
one of those is TOPIC_AUTHORIZATION_FAILED whether it exists or not (by id: with the id and a null name, ids not
being secret), auto-creation needs CREATE on the cluster or the topic, and the authorized operations are the
principal's own.

A topic's entry is the same for every client asking with the same version and authorized operations until the
topic changes, so each is encoded once and kept on the catalogue's TopicMetadata (`metadata_entries`; a change
replaces that object or clears them): 1000 partitions answered in a copy instead of 1000 structs built and
encoded (3.4 ms per request before).
"""

from __future__ import annotations

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api, pre_encode
from odradek.protocol.acl import AclOperation, ResourceType, authorized_operations
from odradek.protocol.schema import ZERO_UUID
from odradek.security.acl import CLUSTER_NAME

METADATA = api("Metadata")
DESCRIBE_CLUSTER = api("DescribeCluster")
MetadataResponse = METADATA.response
DescribeClusterResponse = DESCRIBE_CLUSTER.response


def handlers(broker) -> dict:
    def topic_entry(topic, version: int, operations: int) -> object:
        """The topic's entry, encoded for `version` (from the topic's cache once it has been)."""
        key = (version, operations)
        entry = topic.metadata_entries.get(key)
        if entry is None:
            entry = topic.metadata_entries[key] = pre_encode(METADATA.key, version, new_topic_entry(topic, operations))
        return entry

    def new_topic_entry(topic, operations: int) -> object:
        partitions = [
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.NONE if assignment.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=index, leader_id=assignment.leader,
                leader_epoch=assignment.leader_epoch, replica_nodes=list(assignment.replicas),
                isr_nodes=list(assignment.isr), offline_replicas=[])
            for index, assignment in enumerate(topic.partitions)
        ]
        return MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
            partitions=partitions, topic_authorized_operations=operations)

    def error_entry(name, topic_id, code: ErrorCode, operations: int | None = None) -> object:
        """A topic's entry that is only an error; `operations` for a name the principal may describe (Kafka sets
        them on every entry its topic lookup made, a missing topic's too)."""
        return MetadataResponse.MetadataResponseTopic(
            error_code=code, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=[],
            topic_authorized_operations=authorized_operations(ResourceType.TOPIC, False) if operations is None
            else operations)

    def answer_metadata(connection, header, request):
        version = header.api_version
        catalogue = broker.metadata
        access = broker.access(connection)
        # the flags read False at versions without them (v0-7; the cluster one also from v11)
        with_operations = request.include_topic_authorized_operations

        def described(topic) -> object:
            return topic_entry(topic, version, access.operations(ResourceType.TOPIC, topic.name, with_operations))

        def may_describe(name: str) -> bool:
            return access.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

        wanted_topics = request.topics or []
        topic_ids = [wanted.topic_id for wanted in wanted_topics if wanted.topic_id != ZERO_UUID]
        if version in (10, 11) and (topic_ids or any(wanted.name is None for wanted in wanted_topics)):
            return MetadataResponse(
                throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
                    error_entry(wanted.name or "", wanted.topic_id, ErrorCode.INVALID_REQUEST)
                    for wanted in wanted_topics],
                cluster_authorized_operations=authorized_operations(ResourceType.CLUSTER, False),
                error_code=ErrorCode.NONE)
        creating = []  # (position in topics, name) of the topics this request auto-creates
        if request.topics is None or (version == 0 and not request.topics):
            # every topic the principal may describe; the others are not disclosed at all
            topics = [described(topic) for name, topic in catalogue.topics.items() if may_describe(name)]
        elif topic_ids:
            topics = []
            for topic_id in dict.fromkeys(topic_ids):
                topic = catalogue.topics_by_id.get(topic_id)
                if topic is None:
                    topics.append(error_entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                elif not may_describe(topic.name):
                    topics.append(error_entry(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                else:
                    topics.append(described(topic))
        else:
            allow_create = broker.auto_create_allowed() and (version < 4 or request.allow_auto_topic_creation)
            topics = []
            for wanted in request.topics:
                name = wanted.name
                if name is None:  # v12+ with neither a name nor an id
                    topics.append(error_entry(None, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_ID))
                    continue
                if not may_describe(name):  # whether it exists is not disclosed
                    topics.append(error_entry(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                topic = catalogue.topics.get(name)
                if topic is None and allow_create:
                    if not (access.allows_cluster(AclOperation.CREATE)
                            or access.allows(AclOperation.CREATE, ResourceType.TOPIC, name)):
                        topics.append(error_entry(name, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                        continue
                    creating.append((len(topics), name))
                    topics.append(None)
                    continue
                if topic is None:
                    topics.append(error_entry(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                              access.operations(ResourceType.TOPIC, name, with_operations)))
                else:
                    topics.append(described(topic))
        cluster_operations = access.operations(ResourceType.CLUSTER, CLUSTER_NAME,
                                               request.include_cluster_authorized_operations)

        def response():
            return MetadataResponse(
                throttle_time_ms=0,
                brokers=[MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=rack)
                         for node, host, port, rack in broker.live_brokers_at(connection.listener)],
                cluster_id=catalogue.cluster_id, controller_id=broker.membership.controller_id, topics=topics,
                cluster_authorized_operations=cluster_operations, error_code=ErrorCode.NONE)

        def take_created(position: int, name: str, created) -> None:
            topics[position] = described(created) if not isinstance(created, ErrorCode) else error_entry(
                name, None, created, access.operations(ResourceType.TOPIC, name, with_operations))

        if not creating:
            return response()

        async def created_then_answered():  # ZooKeeper writes: off the event loop (Broker.catalogue_write)
            for position, name in creating:
                take_created(position, name, await broker.catalogue_write(auto_created, name))
            return response()

        return created_then_answered()

    def auto_created(name: str):
        """The topic auto-creation made, or the error code it failed with."""
        try:
            return broker.create_topic(name)
        except KafkaError as exc:
            return exc.code
        except Exception:
            return ErrorCode.UNKNOWN_SERVER_ERROR

    def answer_describe_cluster(connection, header, request):
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=1,
            cluster_id=broker.metadata.cluster_id, controller_id=broker.membership.controller_id,
            brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=rack)
                     for node, host, port, rack in broker.live_brokers_at(connection.listener)],
            cluster_authorized_operations=broker.access(connection).operations(
                ResourceType.CLUSTER, CLUSTER_NAME, request.include_cluster_authorized_operations))

    return {METADATA.key: answer_metadata, DESCRIBE_CLUSTER.key: answer_describe_cluster}
