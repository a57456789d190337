"""Consumer-group APIs: FindCoordinator, the classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup, KIP-848's
ConsumerGroupHeartbeat/ConsumerGroupDescribe, OffsetCommit/OffsetFetch/OffsetDelete, and group administration.

Only wire translation lives here: each handler reads the fields its version carries, calls the GroupCoordinator
(odradek/coordinator/coordinator.py) and turns results and KafkaError codes into that version's response.
JoinGroup and SyncGroup return a coroutine when the coordinator hands back a future, so the connection's in-order
answer queue waits for the rebalance without blocking anything else.
With an authorizer, each API checks what KafkaApis checks: DESCRIBE on the group (or transactional id) to find its
coordinator, READ on the group to join, sync, heartbeat, leave and commit (READ on each committed topic), DESCRIBE
to fetch offsets (topics the principal may not describe are left out) and to describe, DELETE to delete groups and
offsets; ListGroups lists everything with DESCRIBE on the cluster, else the groups the principal may describe.
"""

from __future__ import annotations

import asyncio

from odradek.coordinator.classic import ClassicGroup, JoinResult, SyncResult
from odradek.coordinator.consumer import ConsumerGroup
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from odradek.coordinator.share_state import SHARE_STATE_TOPIC
from odradek.coordinator.transaction_state import TRANSACTION_STATE_TOPIC
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType, authorized_operations

FIND_COORDINATOR = api("FindCoordinator")
JOIN_GROUP = api("JoinGroup")
SYNC_GROUP = api("SyncGroup")
HEARTBEAT = api("Heartbeat")
LEAVE_GROUP = api("LeaveGroup")
OFFSET_COMMIT = api("OffsetCommit")
OFFSET_FETCH = api("OffsetFetch")
OFFSET_DELETE = api("OffsetDelete")
DESCRIBE_GROUPS = api("DescribeGroups")
LIST_GROUPS = api("ListGroups")
DELETE_GROUPS = api("DeleteGroups")
CONSUMER_GROUP_HEARTBEAT = api("ConsumerGroupHeartbeat")
CONSUMER_GROUP_DESCRIBE = api("ConsumerGroupDescribe")

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
_AUTHORIZATION_CODES = (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
CONSUMER_MEMBER_TYPE = 1


def _client_host(connection) -> str:
    """Kafka reports a member's host as Java's InetAddress.toString(): "/127.0.0.1"."""
    return "/" + connection.peer.rsplit(":", 1)[0]


def handlers(broker) -> dict:
    def coordinator() -> GroupCoordinator:
        return broker.group_coordinator

    # ----------------------------------------------------------------------------------- FindCoordinator
    def answer_find_coordinator(connection, header, request):
        Response = FIND_COORDINATOR.response
        version = header.api_version
        key_type = request.key_type if version >= 1 else GROUP_KEY
        access = broker.access(connection)

        def locate(key: str) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
            """(code, message, (node, host, port)): the leader of the key's partition of __consumer_offsets,
            __transaction_state or (key type 2, a share-partition) __share_group_state, as Kafka (this broker itself
            on a single node)."""
            nowhere = (-1, "", -1)
            share = broker.share_coordinator
            if key_type not in (GROUP_KEY, TRANSACTION_KEY) and not (key_type == SHARE_KEY and share is not None):
                return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}", nowhere
            try:
                if key_type == SHARE_KEY:  # "group:topicId:partition", asked by brokers: CLUSTER_ACTION
                    access.require_cluster(AclOperation.CLUSTER_ACTION)
                    share.state.ensure_topic()
                    topic, count = SHARE_STATE_TOPIC, share.state.num_partitions
                elif key_type == GROUP_KEY:
                    access.require(AclOperation.DESCRIBE, ResourceType.GROUP, key)
                    coordinator().ensure_offsets_topic()
                    topic, count = OFFSETS_TOPIC, coordinator().num_partitions
                else:
                    access.require(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
                    broker.transaction_coordinator.ensure_topic()
                    topic, count = TRANSACTION_STATE_TOPIC, broker.transaction_coordinator.num_partitions
            except KafkaError as exc:
                return (exc.code, exc.message, nowhere) if exc.code in _AUTHORIZATION_CODES else (
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), nowhere)
            except OSError as exc:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc), nowhere
            state_topic = broker.metadata.topics.get(topic)
            leader = state_topic.partitions[partition_for(key, count)].leader if state_topic is not None else -1
            found = next((node[:3] for node in broker.live_brokers_at(connection.listener) if node[0] == leader), None)
            if found is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", nowhere
            return ErrorCode.NONE, None, found

        if version >= 4:
            coordinators = []
            for key in request.coordinator_keys:
                code, message, (node, host, port) = locate(key)
                coordinators.append(Response.Coordinator(key=key, node_id=node, host=host, port=port,
                                                         error_code=code, error_message=message))
            return Response(throttle_time_ms=0, coordinators=coordinators)
        code, message, (node, host, port) = locate(request.key)
        return Response(throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host,
                        port=port)

    # ------------------------------------------------------------------------------------------ JoinGroup
    def answer_join_group(connection, header, request):
        Response = JOIN_GROUP.response
        version = header.api_version

        def respond(result: JoinResult):
            ok = result.error == ErrorCode.NONE
            return Response(
                throttle_time_ms=0, error_code=result.error, generation_id=result.generation if ok else -1,
                protocol_type=result.protocol_type if ok else None,
                protocol_name=result.protocol_name if ok else (None if version >= 7 else ""),
                leader=result.leader if ok else "", skip_assignment=result.skip_assignment, member_id=result.member_id,
                members=[Response.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=data)
                         for m, i, data in result.members])

        try:
            broker.access(connection).require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            answer = coordinator().join(
                request.group_id, member_id=request.member_id,
                instance_id=request.group_instance_id if version >= 5 else None,
                client_id=header.client_id or "", client_host=_client_host(connection),
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
                protocol_type=request.protocol_type,
                protocols=[(p.name, p.metadata) for p in request.protocols],
                require_known_member_id=version >= 4, supports_skip_assignment=version >= 9)
        except KafkaError as exc:
            return respond(JoinResult(exc.code, request.member_id))
        if isinstance(answer, asyncio.Future):
            return _await(answer, respond, lambda code: respond(JoinResult(code, request.member_id)))
        return respond(answer)

    # ------------------------------------------------------------------------------------------ SyncGroup
    def answer_sync_group(connection, header, request):
        Response = SYNC_GROUP.response
        version = header.api_version

        def respond(result: SyncResult):
            return Response(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                            protocol_name=result.protocol_name, assignment=result.assignment)

        try:
            broker.access(connection).require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            answer = coordinator().sync(
                request.group_id, member_id=request.member_id,
                instance_id=request.group_instance_id if version >= 3 else None,
                generation=request.generation_id,
                protocol_type=request.protocol_type if version >= 5 else None,
                protocol_name=request.protocol_name if version >= 5 else None,
                assignments={a.member_id: a.assignment for a in request.assignments})
        except KafkaError as exc:
            return respond(SyncResult(exc.code))
        if isinstance(answer, asyncio.Future):
            return _await(answer, respond, lambda code: respond(SyncResult(code)))
        return respond(answer)

    # ------------------------------------------------------------------------------------------ Heartbeat
    def answer_heartbeat(connection, header, request):
        try:
            broker.access(connection).require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            coordinator().heartbeat(request.group_id, member_id=request.member_id,
                                    instance_id=request.group_instance_id if header.api_version >= 3 else None,
                                    generation=request.generation_id)
        except KafkaError as exc:
            return HEARTBEAT.response(throttle_time_ms=0, error_code=exc.code)
        return HEARTBEAT.response(throttle_time_ms=0, error_code=ErrorCode.NONE)

    # ----------------------------------------------------------------------------------------- LeaveGroup
    def answer_leave_group(connection, header, request):
        Response = LEAVE_GROUP.response
        version = header.api_version
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            leaving = [(request.member_id, None)]
        try:
            broker.access(connection).require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            codes = coordinator().leave(request.group_id, leaving)
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, members=[])
        if version < 3:
            return Response(throttle_time_ms=0, error_code=codes[0])
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, members=[
            Response.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
            for (member_id, instance_id), code in zip(leaving, codes)])

    # --------------------------------------------------------------------------------------- OffsetCommit
    def answer_offset_commit(connection, header, request):
        Response = OFFSET_COMMIT.response
        version = header.api_version
        wanted = [(topic.name, p.partition_index, p.committed_offset,
                   p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata)
                  for topic in request.topics for p in topic.partitions]
        access = broker.access(connection)
        denied = access.denied(AclOperation.READ, ResourceType.TOPIC, (topic.name for topic in request.topics))
        try:
            access.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            codes = coordinator().commit_offsets(
                request.group_id, member_id=request.member_id if version >= 1 else "",
                instance_id=request.group_instance_id if version >= 7 else None,
                generation=request.generation_id_or_member_epoch if version >= 1 else -1,
                api_version=version,
                retention_ms=request.retention_time_ms if 2 <= version <= 4 else -1,
                offsets=[offset for offset in wanted if offset[0] not in denied])
        except KafkaError as exc:  # a group-level error covers every partition
            codes, denied = [exc.code] * len(wanted), frozenset()
        return commit_answer(Response, Response.OffsetCommitResponseTopic, Response.OffsetCommitResponsePartition, request.topics, denied, codes)

    # ---------------------------------------------------------------------------------------- OffsetFetch
    def fetch_group(access, group_id: str, topics, member_id, member_epoch, require_stable: bool):
        """(group error, [(topic, [(partition, committed or None, error)])]) for one group of the request; topics
        the principal may not describe are left out."""
        asked = None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes]
        try:
            access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
            found = coordinator().fetch_offsets(group_id, asked, member_id=member_id, member_epoch=member_epoch,
                                                require_stable=require_stable)
        except KafkaError as exc:
            return exc.code, []
        by_topic: dict[str, list] = {}
        for (topic, index), committed, code in found:
            if access.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                by_topic.setdefault(topic, []).append((index, committed, code))
        return ErrorCode.NONE, list(by_topic.items())

    def answer_offset_fetch(connection, header, request):
        Response = OFFSET_FETCH.response
        version = header.api_version
        access = broker.access(connection)
        require_stable = version >= 7 and request.require_stable
        if version >= 8:
            groups = []
            for group in request.groups:
                code, topics = fetch_group(access, group.group_id, group.topics,
                                           group.member_id if version >= 9 else None,
                                           group.member_epoch if version >= 9 else -1, require_stable)
                groups.append(Response.OffsetFetchResponseGroup(group_id=group.group_id, error_code=code, topics=[
                    Response.OffsetFetchResponseTopics(name=name, partitions=[
                        Response.OffsetFetchResponsePartitions(
                            partition_index=index, committed_offset=c.offset if c else -1,
                            committed_leader_epoch=c.leader_epoch if c else -1,
                            metadata=c.metadata if c else "", error_code=partition_code)
                        for index, c, partition_code in partitions])
                    for name, partitions in topics]))
            return Response(throttle_time_ms=0, groups=groups)
        code, topics = fetch_group(access, request.group_id, request.topics, None, -1, require_stable)
        if code != ErrorCode.NONE and version < 2:  # no group-level error field: report it on every partition
            topics = [(t.name, [(i, None, code) for i in t.partition_indexes]) for t in request.topics or []]
        return Response(throttle_time_ms=0, error_code=code, topics=[
            Response.OffsetFetchResponseTopic(name=name, partitions=[
                Response.OffsetFetchResponsePartition(
                    partition_index=index, committed_offset=c.offset if c else -1,
                    committed_leader_epoch=c.leader_epoch if c else -1, metadata=c.metadata if c else "",
                    error_code=partition_code)
                for index, c, partition_code in partitions])
            for name, partitions in topics])

    # --------------------------------------------------------------------------------------- OffsetDelete
    def answer_offset_delete(connection, header, request):
        Response = OFFSET_DELETE.response
        asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        try:
            broker.access(connection).require(AclOperation.DELETE, ResourceType.GROUP, request.group_id)
            codes = iter(coordinator().delete_offsets(request.group_id, asked))
        except KafkaError as exc:
            return Response(error_code=exc.code, throttle_time_ms=0, topics=[])
        return Response(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
            Response.OffsetDeleteResponseTopic(name=t.name, partitions=[
                Response.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=next(codes))
                for p in t.partitions])
            for t in request.topics])

    # ------------------------------------------------------------------------------------- group admin
    def answer_describe_groups(connection, header, request):
        Response = DESCRIBE_GROUPS.response
        version = header.api_version
        access = broker.access(connection)
        described = []
        for group_id in request.groups:
            answer = Response.DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state="Dead",
                                             protocol_type="", protocol_data="", members=[],
                                             authorized_operations=access.operations(
                                                 ResourceType.GROUP, group_id, request.include_authorized_operations))
            try:
                access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
                group = coordinator().describe(group_id)
                share = broker.share_coordinator
                if version >= 6 and not isinstance(group, ClassicGroup):  # KIP-1043
                    known = group is not None or (share is not None and share.group(group_id) is not None)
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group."
                                     if known else f"Group {group_id} not found.")
            except KafkaError as exc:
                answer.error_code, answer.error_message = exc.code, exc.message
                answer.authorized_operations = authorized_operations(ResourceType.GROUP, False)
                if exc.code == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                    answer.group_state = ""  # Kafka's DescribeGroupsResponse.groupError (a missing one is Dead)
                group = None
            if isinstance(group, ClassicGroup):
                answer.group_state = group.state.value
                answer.protocol_type = group.protocol_type or ""
                answer.protocol_data = group.protocol_name or ""
                answer.members = [Response.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=metadata, member_assignment=assignment)
                    for m, metadata, assignment in group.describe_members()]
            elif isinstance(group, ConsumerGroup):
                answer.group_state, answer.protocol_type = group.state_name, "consumer"
            described.append(answer)
        return Response(throttle_time_ms=0, groups=described)

    def answer_list_groups(connection, header, request):
        Response = LIST_GROUPS.response
        version = header.api_version
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        access = broker.access(connection)
        every_group = access.allows_cluster(AclOperation.DESCRIBE)  # else only the groups it may describe
        listed = []
        for group_id, group in coordinator().list_groups():
            if not (every_group or access.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)):
                continue
            if isinstance(group, ClassicGroup):
                state, protocol_type, kind = group.state.value, group.protocol_type or "", "classic"
            else:
                state, protocol_type, kind = group.state_name, "consumer", "consumer"
            if (states and state.lower() not in states) or (types and kind not in types):
                continue
            listed.append(Response.ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state,
                                               group_type=kind))
        share = broker.share_coordinator
        for group_id in share.group_ids() if share is not None else ():
            group = share.groups[group_id]
            if not (every_group or access.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)):
                continue
            if (states and group.state_name.lower() not in states) or (types and "share" not in types):
                continue
            listed.append(Response.ListedGroup(group_id=group_id, protocol_type="share", group_state=group.state_name,
                                               group_type="share"))
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=listed)

    async def answer_delete_groups(connection, header, request):
        Response = DELETE_GROUPS.response
        access = broker.access(connection)
        results = []
        for group_id in request.groups_names:
            code = ErrorCode.NONE
            try:
                access.require(AclOperation.DELETE, ResourceType.GROUP, group_id)
                share = broker.share_coordinator
                if share is not None and share.group(group_id) is not None:
                    await share.delete_group(group_id)
                else:
                    coordinator().delete_group(group_id)
            except KafkaError as exc:
                code = exc.code
            results.append(Response.DeletableGroupResult(group_id=group_id, error_code=code))
        return Response(throttle_time_ms=0, results=results)

    # ----------------------------------------------------------------------------------------- KIP-848
    def answer_consumer_group_heartbeat(connection, header, request):
        Response = CONSUMER_GROUP_HEARTBEAT.response
        owned = None
        if request.topic_partitions is not None:
            owned = {tp.topic_id: set(tp.partitions) for tp in request.topic_partitions if tp.partitions}
        try:
            access = broker.access(connection)
            access.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            for name in request.subscribed_topic_names or ():
                access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            result = coordinator().consumer_heartbeat(
                request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
                instance_id=request.instance_id, rack_id=request.rack_id,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                subscribed_topic_names=request.subscribed_topic_names,
                subscribed_topic_regex=request.subscribed_topic_regex if header.api_version >= 1 else None,
                server_assignor=request.server_assignor, owned=owned, client_id=header.client_id or "",
                client_host=_client_host(connection))
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, member_id=None,
                            member_epoch=0, heartbeat_interval_ms=0)
        assignment = None
        if result.assignment is not None:
            assignment = Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, partitions=sorted(indexes))
                for topic_id, indexes in result.assignment.items()])
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, member_id=result.member_id,
                        member_epoch=result.member_epoch,
                        heartbeat_interval_ms=broker.config["group.consumer.heartbeat.interval.ms"]
                        if result.member_epoch >= 0 else 0,  # a member that left has no interval, as Kafka
                        assignment=assignment)

    def answer_consumer_group_describe(connection, header, request):
        Response = CONSUMER_GROUP_DESCRIBE.response
        names = {topic.topic_id: name for name, topic in broker.metadata.topics.items()}

        def assignment(parts):
            return Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, topic_name=names.get(topic_id, ""),
                                         partitions=sorted(indexes))
                for topic_id, indexes in parts.items()])

        access = broker.access(connection)
        described = []
        for group_id in request.group_ids:
            answer = Response.DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id, group_state="Dead",
                                             group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                                             authorized_operations=access.operations(
                                                 ResourceType.GROUP, group_id, request.include_authorized_operations))
            try:
                access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
                group = coordinator().describe(group_id)
                if not isinstance(group, ConsumerGroup):  # Kafka's GroupMetadataManager.consumerGroup's two
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found." if group is None
                                     else f"Group {group_id} is not a consumer group.")
            except KafkaError as exc:
                answer.error_code, answer.error_message = exc.code, exc.message
                answer.authorized_operations = authorized_operations(ResourceType.GROUP, False)
                answer.group_state = ""  # as Kafka's error entries
                described.append(answer)
                continue
            answer.group_state, answer.group_epoch = group.state_name, group.group_epoch
            answer.assignment_epoch, answer.assignor_name = group.assignment_epoch, group.assignor_name
            answer.members = [Response.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex or "", assignment=assignment(m.assigned),
                target_assignment=assignment(group.target.get(m.member_id, {})), member_type=CONSUMER_MEMBER_TYPE)
                for m in group.members.values()]
            described.append(answer)
        return Response(throttle_time_ms=0, groups=described)

    return {
        FIND_COORDINATOR.key: answer_find_coordinator,
        JOIN_GROUP.key: answer_join_group,
        SYNC_GROUP.key: answer_sync_group,
        HEARTBEAT.key: answer_heartbeat,
        LEAVE_GROUP.key: answer_leave_group,
        OFFSET_COMMIT.key: answer_offset_commit,
        OFFSET_FETCH.key: answer_offset_fetch,
        OFFSET_DELETE.key: answer_offset_delete,
        DESCRIBE_GROUPS.key: answer_describe_groups,
        LIST_GROUPS.key: answer_list_groups,
        DELETE_GROUPS.key: answer_delete_groups,
        CONSUMER_GROUP_HEARTBEAT.key: answer_consumer_group_heartbeat,
        CONSUMER_GROUP_DESCRIBE.key: answer_consumer_group_describe,
    }


async def _await(future: asyncio.Future, respond, respond_error):
    """The response once the coordinator resolves `future`; a KafkaError it was failed with becomes an error
    response."""
    try:
        return respond(await future)
    except KafkaError as exc:
        return respond_error(exc.code)



def commit_answer(Response, Topic, Partition, topics, denied: frozenset[str], codes):
    """An OffsetCommit or TxnOffsetCommit response (the classes given) for the request's `topics`: a topic of
    `denied` TOPIC_AUTHORIZATION_FAILED, the others `codes` in order; at once for a list of codes, or once the
    commit's awaitable of them gives them (its write waiting for the in-sync replicas,
    offsets.commit.required.acks=-1)."""
    def respond(codes: list[ErrorCode]):
        answers = iter(codes)
        return Response(throttle_time_ms=0, topics=[
            Topic(name=topic.name, partitions=[
                Partition(partition_index=p.partition_index,
                          error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic.name in denied else next(answers))
                for p in topic.partitions])
            for topic in topics])

    if isinstance(codes, list):
        return respond(codes)

    async def written():
        return respond(await codes)

    return written()
