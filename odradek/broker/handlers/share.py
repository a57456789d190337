"""Share-group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge and the share
group offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).

Wire translation around the broker's ShareCoordinator (odradek/coordinator/share_coordinator.py; None in a ZooKeeper
cluster). A ShareFetch first applies the acknowledgements it carries, then reads whole batches of each partition of
its share session from the first record the share-partition can deliver, acquires up to max_records of them for the
member and answers those batches with the acquired ranges and their delivery counts (the client drops the records
outside them); with nothing to acquire it waits up to max_wait_ms for an append or for records to come back. The
batches are read from the log below the high watermark, or with the group's share.isolation.level read_committed
below the last stable offset; control batches and (read_committed) an aborted transaction's are archived, never
acquired. The acquisition lock timeout answered is the group's share.record.lock.duration.ms. AlterShareGroupOffsets
sets the start offset of an empty group's share-partitions (making the group if it is new, as Kafka does),
DeleteShareGroupOffsets forgets a topic's state, and both refuse a group with members (NON_EMPTY_GROUP). With an
authorizer, READ on the group and on each topic to fetch, acknowledge and alter offsets, DESCRIBE on the group and
topics to describe, DELETE on the group to delete offsets.

In a ZooKeeper cluster, as in Kafka: ShareGroupHeartbeat, ShareGroupDescribe and the offsets APIs go to the
group's coordinator (the leader of its __consumer_offsets partition; NOT_COORDINATOR elsewhere), ShareFetch and
ShareAcknowledge to each partition's leader, which keeps the share-partition and writes its state through the
share coordinator of its __share_group_state partition (share_persister.py, handlers/share_state.py). The lag
DescribeShareGroupOffsets answers is the leader's high watermark (asked with ListOffsets when another broker leads
the partition) less the start offset and the records above it already done.
"""

from __future__ import annotations

import time
import uuid

from odradek.clock import now_ms
from odradek.coordinator.share_group import ASSIGNOR_NAME
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.protocol.schema import ZERO_UUID
from odradek.records.batch import committed_batches, whole_batches
from odradek.records.region import FileRegion

SHARE_GROUP_HEARTBEAT = api("ShareGroupHeartbeat")
SHARE_GROUP_DESCRIBE = api("ShareGroupDescribe")
SHARE_FETCH = api("ShareFetch")
SHARE_ACKNOWLEDGE = api("ShareAcknowledge")
DESCRIBE_OFFSETS = api("DescribeShareGroupOffsets")
ALTER_OFFSETS = api("AlterShareGroupOffsets")
DELETE_OFFSETS = api("DeleteShareGroupOffsets")
LIST_OFFSETS = api("ListOffsets")


def _client_host(connection) -> str:
    return "/" + connection.peer.rsplit(":", 1)[0]


def handlers(broker) -> dict:
    coordinator = broker.share_coordinator

    # -------------------------------------------------------------------------------- ShareGroupHeartbeat
    def answer_heartbeat(connection, header, request):
        Response = SHARE_GROUP_HEARTBEAT.response
        try:
            access = broker.access(connection)
            access.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            for name in request.subscribed_topic_names or ():
                access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            result = coordinator.heartbeat(
                request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
                rack_id=request.rack_id, subscribed_topic_names=request.subscribed_topic_names,
                client_id=header.client_id or "", client_host=_client_host(connection))
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message)
        assignment = None
        if result.assignment is not None:
            assignment = Response.Assignment(topic_partitions=[
                Response.TopicPartitions(topic_id=topic_id, partitions=sorted(indexes))
                for topic_id, indexes in sorted(result.assignment.items()) if indexes])
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, member_id=result.member_id,
                        member_epoch=result.member_epoch, heartbeat_interval_ms=coordinator.heartbeat_interval_ms,
                        assignment=assignment)

    # --------------------------------------------------------------------------------- ShareGroupDescribe
    def answer_describe(connection, header, request):
        Response = SHARE_GROUP_DESCRIBE.response
        access = broker.access(connection)
        names = {t.topic_id: name for name, t in broker.metadata.topics.items()}
        described = []
        for group_id in request.group_ids:
            answer = Response.DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id)
            try:
                access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
                broker.group_coordinator.check_available(group_id)
                group = coordinator.group(group_id)
                if group is None:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            except KafkaError as exc:
                answer.error_code, answer.error_message = exc.code, exc.message
                described.append(answer)
                continue
            answer.group_state, answer.group_epoch = group.state_name, group.group_epoch
            answer.assignor_name = ASSIGNOR_NAME
            answer.assignment_epoch = group.assignment_epoch
            answer.authorized_operations = access.operations(ResourceType.GROUP, group_id,
                                                             request.include_authorized_operations)
            answer.members = [Response.Member(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=Response.Assignment(topic_partitions=[
                    Response.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(p))
                    for t, p in sorted(m.assigned.items()) if p]))
                for m in group.members.values()]
            described.append(answer)
        return Response(throttle_time_ms=0, groups=described)

    # ---------------------------------------------------------------------------- acknowledgements (both)
    async def acknowledge(group_id: str, member_id: str, topics) -> dict[tuple[uuid.UUID, int], KafkaError | None]:
        """Each partition's acknowledgement batches applied: (topic id, partition) -> the error, or None."""
        results = {}
        by_id = broker.metadata.topics_by_id
        for topic in topics:
            for p in topic.partitions:
                if not p.acknowledgement_batches:
                    continue
                error = None
                try:
                    known = by_id.get(topic.topic_id)
                    if known is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                    partition = broker.partition(known.name, p.partition_index)
                    await coordinator.acknowledge(group_id, member_id, topic.topic_id, p.partition_index,
                                                  [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                                   for b in p.acknowledgement_batches], partition)
                except KafkaError as exc:
                    error = exc
                results[(topic.topic_id, p.partition_index)] = error
        return results

    def leader_of(Response, topic_name: str | None, index: int):
        partition = broker.partitions.get((topic_name, index)) if topic_name else None
        if partition is None:
            return Response.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
        return Response.LeaderIdAndEpoch(leader_id=broker.node_id, leader_epoch=max(0, partition.leader_epoch))

    # ---------------------------------------------------------------------------------------- ShareFetch
    async def acquire(group_id: str, member_id: str, keys, max_records: int, max_bytes: int) -> dict:
        """(topic id, partition) -> (error or None, batch bytes, [(first, last, delivery count)])."""
        by_id = broker.metadata.topics_by_id
        out = {}
        read_committed = coordinator.settings(group_id).read_committed
        for topic_id, index in sorted(keys):
            if max_records <= 0:
                break
            try:
                known = by_id.get(topic_id)
                if known is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                partition = broker.partition(known.name, index)
                log = partition.log
                bound = partition.last_stable_offset if read_committed else partition.high_watermark
                share = await coordinator.share_partition(group_id, topic_id, index, partition)
                now = now_ms()
                if share.start_offset < log.log_start_offset:
                    share.move_start(log.log_start_offset)
                offset = share.next_fetch_offset()
                if offset is None or offset >= bound:
                    continue
                region = log.read(offset, max_bytes, max_offset=bound)
                if region is None:
                    continue
                data = region.read_bytes()
                read = [(h, batch) for h, batch in whole_batches(data) if h.base_offset < bound]
                seen = committed_batches(read, log.aborted_transactions(offset, bound)) if read_committed else read
                delivered = {h.base_offset for h, _ in seen if not h.is_control}
                ranges = {True: [], False: []}
                for h, _ in read:
                    ranges[h.base_offset in delivered].append((h.base_offset, h.last_offset))
                acquired = share.acquire(member_id, ranges[True], max_records, now, skipped=ranges[False])
                if acquired:
                    await coordinator.acquired((group_id, topic_id, index))
                    out[(topic_id, index)] = (None, covering(region, read, acquired[0][0], acquired[-1][1]), acquired)
                    max_records -= sum(last - first + 1 for first, last, _ in acquired)
            except KafkaError as exc:
                out[(topic_id, index)] = (exc, b"", [])
        return out

    def covering(region: FileRegion, read, first: int, last: int) -> FileRegion:
        """The part of `region` (`read`: its whole batches, from its start) that holds the batches with offsets
        `first` to `last`: what the answer carries, sent with sendfile, as Kafka slices a share fetch's records to
        the acquired ones rather than every batch the read reached (up to the request's max_bytes)."""
        position = start = end = 0
        for h, batch in read:
            if h.last_offset < first:
                start = position + len(batch)
            if h.base_offset <= last:
                end = position + len(batch)
            position += len(batch)
        return FileRegion(region.fd, region.position + start, end - start)

    def fetch_response(header, group_id: str, acks, acquired, error: KafkaError | None = None):
        Response = SHARE_FETCH.response
        if error is not None:
            return Response(throttle_time_ms=0, error_code=error.code, error_message=error.message)
        names = {t.topic_id: name for name, t in broker.metadata.topics.items()}
        by_topic: dict = {}
        for key in sorted(set(acks) | set(acquired)):
            topic_id, index = key
            ack_error = acks.get(key)
            fetch_error, data, ranges = acquired.get(key, (None, b"", []))
            by_topic.setdefault(topic_id, []).append(Response.PartitionData(
                partition_index=index,
                error_code=fetch_error.code if fetch_error else ErrorCode.NONE,
                error_message=fetch_error.message if fetch_error else None,
                acknowledge_error_code=ack_error.code if ack_error else ErrorCode.NONE,
                acknowledge_error_message=ack_error.message if ack_error else None,
                current_leader=leader_of(Response, names.get(topic_id), index), records=data,
                acquired_records=[Response.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c)
                                  for f, la, c in ranges]))
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        acquisition_lock_timeout_ms=coordinator.settings(group_id).lock_duration_ms,
                        responses=[Response.ShareFetchableTopicResponse(topic_id=t, partitions=parts)
                                   for t, parts in by_topic.items()])

    async def answer_share_fetch(connection, header, request):
        group_id, member_id = request.group_id or "", request.member_id or ""
        added = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
        forgotten = [(t.topic_id, i) for t in request.forgotten_topics_data for i in t.partitions]
        try:
            access = broker.access(connection)
            access.require(AclOperation.READ, ResourceType.GROUP, group_id)
            names = {t.topic_id: name for name, t in broker.metadata.topics.items()}
            for topic_id, _ in added:
                if topic_id in names:
                    access.require(AclOperation.READ, ResourceType.TOPIC, names[topic_id])
            session = coordinator.session(group_id, member_id, request.share_session_epoch, added, forgotten)
        except KafkaError as exc:
            return fetch_response(header, group_id, {}, {}, exc)
        if request.share_session_epoch == 0:  # state reset by the group's coordinator meanwhile is read again
            await coordinator.refresh(group_id, added)
        acks = await acknowledge(group_id, member_id, request.topics)
        if session is None:
            return fetch_response(header, group_id, acks, {})
        max_records = request.max_records if request.max_records > 0 else 500
        max_bytes = max(1, min(request.max_bytes, 64 << 20))
        acquired = await acquire(group_id, member_id, session.partitions, max_records, max_bytes)
        if any(ranges for _, _, ranges in acquired.values()) or request.max_wait_ms <= 0 or broker.stopping:
            return fetch_response(header, group_id, acks, acquired)
        return await long_poll(header, request, session, acks, max_records, max_bytes, group_id, member_id)

    async def long_poll(header, request, session, acks, max_records, max_bytes, group_id, member_id):
        deadline = time.monotonic() + request.max_wait_ms / 1000
        while True:
            by_id = broker.metadata.topics_by_id
            watched = [broker.partitions[(by_id[t].name, i)] for t, i in session.partitions
                       if t in by_id and (by_id[t].name, i) in broker.partitions]
            await coordinator.wait_for_change(watched, deadline - time.monotonic())
            acquired = await acquire(group_id, member_id, session.partitions, max_records, max_bytes)
            if (any(ranges for _, _, ranges in acquired.values()) or broker.stopping
                    or time.monotonic() >= deadline):
                return fetch_response(header, group_id, acks, acquired)

    # ---------------------------------------------------------------------------------- ShareAcknowledge
    async def answer_share_acknowledge(connection, header, request):
        Response = SHARE_ACKNOWLEDGE.response
        group_id, member_id = request.group_id or "", request.member_id or ""
        try:
            broker.access(connection).require(AclOperation.READ, ResourceType.GROUP, group_id)
            if request.share_session_epoch == 0:
                raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a session.")
            coordinator.session(group_id, member_id, request.share_session_epoch, [], [])
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message)
        acks = await acknowledge(group_id, member_id, request.topics)
        names = {t.topic_id: name for name, t in broker.metadata.topics.items()}
        by_topic: dict = {}
        for (topic_id, index), error in sorted(acks.items()):
            by_topic.setdefault(topic_id, []).append(Response.PartitionData(
                partition_index=index, error_code=error.code if error else ErrorCode.NONE,
                error_message=error.message if error else None,
                current_leader=leader_of(Response, names.get(topic_id), index)))
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                        acquisition_lock_timeout_ms=coordinator.settings(group_id).lock_duration_ms,
                        responses=[Response.ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts)
                                   for t, parts in by_topic.items()])

    # ------------------------------------------------------------------------------ share group offsets
    async def high_watermark(name: str, index: int) -> int:
        """The partition's high watermark: its own when this broker leads it, else its leader's (ListOffsets)."""
        if broker.leads(name, index):
            return broker.partitions[(name, index)].high_watermark
        leader = broker.metadata.topics[name].partitions[index].leader
        Request = LIST_OFFSETS.request
        try:
            answer = await coordinator.peers.request(leader, LIST_OFFSETS, 1, Request(
                replica_id=-1, topics=[Request.ListOffsetsTopic(name=name, partitions=[
                    Request.ListOffsetsPartition(partition_index=index, timestamp=-1)])]))
        except (OSError, TimeoutError) as exc:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"The leader is not reachable: {exc}") from None
        found = answer.topics[0].partitions[0]
        if found.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(found.error_code))
        return found.offset

    async def answer_describe_offsets(connection, header, request):
        Response = DESCRIBE_OFFSETS.response
        access = broker.access(connection)
        topics = broker.metadata.topics
        names = {t.topic_id: name for name, t in topics.items()}
        answers = []
        for asked in request.groups:
            group_id = asked.group_id
            answer = Response.DescribeShareGroupOffsetsResponseGroup(group_id=group_id)
            answers.append(answer)
            try:
                access.require(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
                broker.group_coordinator.check_available(group_id)
                if coordinator.group(group_id) is None:  # as Kafka: no error, no topics
                    continue
                if asked.topics is None:  # every partition the group has state for
                    known_states = await coordinator.states(group_id)
                    wanted: dict[str, list[int]] = {}
                    for _, topic_id, index in known_states:
                        if topic_id in names:
                            wanted.setdefault(names[topic_id], []).append(index)
                else:
                    known_states = None
                    wanted = {t.topic_name: list(t.partitions) for t in asked.topics}
            except KafkaError as exc:
                answer.error_code, answer.error_message = exc.code, exc.message
                continue
            for name, indexes in wanted.items():
                known = topics.get(name)
                topic = Response.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=known.topic_id if known else ZERO_UUID)
                answer.topics.append(topic)
                for index in indexes:
                    part = Response.DescribeShareGroupOffsetsResponsePartition(partition_index=index, start_offset=-1,
                                                                               leader_epoch=-1, lag=-1)
                    topic.partitions.append(part)
                    try:
                        access.require(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
                        if known is None or not 0 <= index < len(known.partitions):
                            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                        key = (group_id, known.topic_id, index)
                        summary = known_states[key] if known_states is not None else \
                            await coordinator.summary(key)
                        if summary is not None:
                            part.start_offset = summary.start_offset
                            part.leader_epoch = max(0, known.partitions[index].leader_epoch)
                            part.lag = max(0, await high_watermark(name, index) - summary.start_offset
                                           - max(0, summary.delivery_complete_count))
                    except KafkaError as exc:
                        part.error_code, part.error_message = exc.code, exc.message
        return Response(throttle_time_ms=0, groups=answers)

    async def answer_alter_offsets(connection, header, request):
        Response = ALTER_OFFSETS.response
        access = broker.access(connection)
        try:
            access.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            broker.group_coordinator.check_available(request.group_id)
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message)
        topics = broker.metadata.topics
        answers, starts = [], {}
        for asked in request.topics:
            known = topics.get(asked.topic_name)
            topic = Response.AlterShareGroupOffsetsResponseTopic(topic_name=asked.topic_name,
                                                                 topic_id=known.topic_id if known else ZERO_UUID)
            answers.append(topic)
            for p in asked.partitions:
                code, message = ErrorCode.NONE, None
                try:
                    access.require(AclOperation.READ, ResourceType.TOPIC, asked.topic_name)
                    if known is None or not 0 <= p.partition_index < len(known.partitions):
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    start = p.start_offset
                    if start < 0:
                        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Offset {start} is not an offset.")
                    if broker.leads(asked.topic_name, p.partition_index):
                        log = broker.partitions[(asked.topic_name, p.partition_index)].log
                        if not log.log_start_offset <= start <= log.log_end_offset:
                            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Offset {start} is outside the log "
                                             f"[{log.log_start_offset}, {log.log_end_offset}].")
                    starts[(known.topic_id, p.partition_index)] = start
                except KafkaError as exc:
                    code, message = exc.code, exc.message
                topic.partitions.append(Response.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=code, error_message=message))
        try:
            await coordinator.alter_offsets(request.group_id, starts)
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message)
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=answers)

    async def answer_delete_offsets(connection, header, request):
        Response = DELETE_OFFSETS.response
        access = broker.access(connection)
        try:
            access.require(AclOperation.DELETE, ResourceType.GROUP, request.group_id)
            broker.group_coordinator.check_available(request.group_id)
            if coordinator.group(request.group_id) is None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message)
        answers = []
        for asked in request.topics:
            known = broker.metadata.topics.get(asked.topic_name)
            topic = Response.DeleteShareGroupOffsetsResponseTopic(topic_name=asked.topic_name,
                                                                  topic_id=known.topic_id if known else ZERO_UUID)
            answers.append(topic)
            try:
                access.require(AclOperation.READ, ResourceType.TOPIC, asked.topic_name)
                if known is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                await coordinator.delete_offsets(request.group_id, known.topic_id)
            except KafkaError as exc:
                if exc.code == ErrorCode.NON_EMPTY_GROUP:
                    return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message)
                topic.error_code, topic.error_message = exc.code, exc.message
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=answers)

    return {SHARE_GROUP_HEARTBEAT.key: answer_heartbeat, SHARE_GROUP_DESCRIBE.key: answer_describe,
            SHARE_FETCH.key: answer_share_fetch, SHARE_ACKNOWLEDGE.key: answer_share_acknowledge,
            DESCRIBE_OFFSETS.key: answer_describe_offsets, ALTER_OFFSETS.key: answer_alter_offsets,
            DELETE_OFFSETS.key: answer_delete_offsets}
