"""Producer and transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
and the admin views DescribeProducers, DescribeTransactions and ListTransactions.

Only wire translation lives here (and, as Kafka's acks=-1 for coordinator writes, holding an answer until the
change it reports is on the in-sync replicas: `once_durable` for the transaction coordinator's state, WriteTxnMarkers
for the markers it wrote): each handler reads the fields its version carries, calls the transaction
coordinator (odradek/coordinator/transaction_coordinator.py), the group coordinator (TxnOffsetCommit) or a
partition's producer state (DescribeProducers), and turns KafkaError codes into that version's answer. KIP-588's
PRODUCER_FENCED goes only to versions that know it (InitProducerId v4+, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2+,
TxnOffsetCommit v3+); older ones get INVALID_PRODUCER_EPOCH, as Kafka answers them.
With an authorizer, as KafkaApis: a transactional id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for every
transactional call, an idempotent InitProducerId IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679,
else CLUSTER_AUTHORIZATION_FAILED); topics added need WRITE, offsets committed READ on the group and the topics;
the admin views need DESCRIBE on the transactional id (ListTransactions leaves the others out) or READ on the topic.
An InitProducerId that needs a new block of producer ids claims it as a catalogue write (`producer_id_block`: in a
cluster from ZooKeeper on a thread), so a slow or cut link to ZooKeeper holds that request, not the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import time

from odradek.broker.handlers.groups import commit_answer
from odradek.cluster.append_waits import until_replicated
from odradek.coordinator.transaction_state import TransactionState
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.storage.producer_state import NO_OFFSET

INIT_PRODUCER_ID = api("InitProducerId")
ADD_PARTITIONS_TO_TXN = api("AddPartitionsToTxn")
ADD_OFFSETS_TO_TXN = api("AddOffsetsToTxn")
END_TXN = api("EndTxn")
TXN_OFFSET_COMMIT = api("TxnOffsetCommit")
DESCRIBE_PRODUCERS = api("DescribeProducers")
DESCRIBE_TRANSACTIONS = api("DescribeTransactions")
LIST_TRANSACTIONS = api("ListTransactions")
WRITE_TXN_MARKERS = api("WriteTxnMarkers")

BATCHED_ADD_PARTITIONS_VERSION = 4


def _code_for(exc: KafkaError, version: int, fenced_from_version: int) -> ErrorCode:
    if exc.code == ErrorCode.PRODUCER_FENCED and version < fenced_from_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return exc.code


def handlers(broker) -> dict:
    def coordinator():
        return broker.transaction_coordinator

    def once_durable(transactional_id: str | None, respond, respond_error):
        """respond() once the transaction coordinator's writes for this transactional id are on the in-sync
        replicas of its __transaction_state partition (at once when they are, or with no id to wait for);
        respond_error(KafkaError) when they do not get there."""
        waiting = None if transactional_id is None else coordinator().until_durable(transactional_id)
        if waiting is None:
            return respond()

        async def durable():
            try:
                await waiting
            except KafkaError as exc:
                return respond_error(exc)
            return respond()

        return durable()

    def answer_init_producer_id(connection, header, request):
        Response = INIT_PRODUCER_ID.response
        version = header.api_version

        def refused(exc: KafkaError):
            return Response(throttle_time_ms=0, error_code=_code_for(exc, version, 4), producer_id=-1,
                            producer_epoch=-1)

        def initialized():
            try:
                producer_id, epoch = coordinator().init_producer_id(
                    request.transactional_id, request.transaction_timeout_ms,
                    request.producer_id if version >= 3 else -1, request.producer_epoch if version >= 3 else -1)
            except KafkaError as exc:
                return refused(exc)
            return once_durable(request.transactional_id, lambda: Response(
                throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=epoch),
                refused)

        async def initialized_after_claim():
            try:
                await producer_id_block()
            except KafkaError as exc:
                return refused(exc)
            answer = initialized()
            return await answer if inspect.isawaitable(answer) else answer

        try:
            access = broker.access(connection)
            if request.transactional_id is not None:
                access.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
            elif not (access.allows_cluster(AclOperation.IDEMPOTENT_WRITE)
                      or access.allows_any(AclOperation.WRITE, ResourceType.TOPIC)):  # KIP-679
                access.require_cluster(AclOperation.IDEMPOTENT_WRITE)
        except KafkaError as exc:
            return refused(exc)
        if not coordinator().producer_ids.ready:
            return initialized_after_claim()
        return initialized()

    claiming: list[asyncio.Future] = []  # the block of producer ids being claimed, if one is

    def claimed(claim: asyncio.Future) -> None:
        claiming.remove(claim)
        if not claim.cancelled():
            claim.exception()  # retrieved here too: every request that waited for it may have gone

    async def producer_id_block() -> None:
        """Claim the coordinator's next block of producer ids, in a cluster off the event loop
        (Broker.catalogue_write): a conditional write to ZooKeeper, which takes up to the session timeout when the
        link is cut, while this broker's other connections go on. Requests that need a block meanwhile share the one
        claim. KafkaError COORDINATOR_NOT_AVAILABLE (retriable) when the claim fails."""
        if not claiming:
            claim = asyncio.ensure_future(broker.catalogue_write(coordinator().producer_ids.claim_block))
            claim.add_done_callback(claimed)
            claiming.append(claim)
        try:
            await asyncio.shield(claiming[0])
        except Exception as exc:  # kazoo's errors (the handlers never import kazoo), or the metadata file's
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             f"Could not claim a block of producer ids: {exc!r}") from exc

    def add_partitions(access, transactional_id: str, producer_id: int, producer_epoch: int, topics, version: int,
                       verify_only: bool = False):
        """[(topic, [(partition, code)])] for one transaction of AddPartitionsToTxn."""
        asked = [(topic.name, index) for topic in topics for index in topic.partitions]
        denied = access.denied(AclOperation.WRITE, ResourceType.TOPIC, (topic.name for topic in topics))
        unknown = {key for key in asked if not broker.has_partition(*key)}
        if not access.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            codes = dict.fromkeys(asked, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif denied:
            codes = {key: ErrorCode.TOPIC_AUTHORIZATION_FAILED if key[0] in denied
                     else ErrorCode.OPERATION_NOT_ATTEMPTED for key in asked}
        elif unknown:
            codes = {key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                     for key in asked}
        else:
            try:
                if verify_only:
                    metadata = coordinator().describe(transactional_id)
                    codes = {key: ErrorCode.NONE if key in metadata.partitions else ErrorCode.INVALID_TXN_STATE
                             for key in asked}
                else:
                    coordinator().add_partitions(transactional_id, producer_id, producer_epoch, set(asked))
                    codes = dict.fromkeys(asked, ErrorCode.NONE)
            except KafkaError as exc:
                codes = dict.fromkeys(asked, _code_for(exc, version, 2))
        return [(topic.name, [(index, codes[(topic.name, index)]) for index in topic.partitions]) for topic in topics]

    def answer_add_partitions_to_txn(connection, header, request):
        Response = ADD_PARTITIONS_TO_TXN.response
        version = header.api_version
        access = broker.access(connection)

        def topic_results(results):
            return [Response.AddPartitionsToTxnTopicResult(name=name, results_by_partition=[
                Response.AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=code)
                for index, code in partitions]) for name, partitions in results]

        def failing(results, code: ErrorCode):
            return [(name, [(index, code) for index, _ in partitions]) for name, partitions in results]

        def added(results) -> bool:
            return all(code == ErrorCode.NONE for _, partitions in results for _, code in partitions)

        if version < BATCHED_ADD_PARTITIONS_VERSION:
            transactional_id = request.v3_and_below_transactional_id
            results = add_partitions(access, transactional_id, request.v3_and_below_producer_id,
                                     request.v3_and_below_producer_epoch, request.v3_and_below_topics, version)
            return once_durable(
                transactional_id if added(results) else None,
                lambda: Response(throttle_time_ms=0, results_by_topic_v3_and_below=topic_results(results)),
                lambda exc: Response(throttle_time_ms=0, results_by_topic_v3_and_below=topic_results(
                    failing(results, _code_for(exc, version, 2)))))
        outcomes = [(t.transactional_id, add_partitions(access, t.transactional_id, t.producer_id, t.producer_epoch,
                                                        t.topics, version, t.verify_only), t.verify_only)
                    for t in request.transactions]

        def respond():
            return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=[
                Response.AddPartitionsToTxnResult(transactional_id=transactional_id,
                                                  topic_results=topic_results(results))
                for transactional_id, results, _ in outcomes])

        waits = [(position, waiting) for position, (transactional_id, results, verify_only) in enumerate(outcomes)
                 if not verify_only and added(results)
                 and (waiting := coordinator().until_durable(transactional_id)) is not None]
        if not waits:
            return respond()

        async def durable():
            for position, waiting in waits:
                try:
                    await waiting
                except KafkaError as exc:
                    transactional_id, results, verify_only = outcomes[position]
                    outcomes[position] = (transactional_id, failing(results, _code_for(exc, version, 2)), verify_only)
            return respond()

        return durable()

    def answer_add_offsets_to_txn(connection, header, request):
        def refused(exc: KafkaError):
            return ADD_OFFSETS_TO_TXN.response(throttle_time_ms=0, error_code=_code_for(exc, header.api_version, 2))

        try:
            access = broker.access(connection)
            access.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
            access.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            coordinator().add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                      request.group_id)
        except KafkaError as exc:
            return refused(exc)
        return once_durable(request.transactional_id,
                            lambda: ADD_OFFSETS_TO_TXN.response(throttle_time_ms=0, error_code=ErrorCode.NONE), refused)

    def answer_end_txn(connection, header, request):
        Response = END_TXN.response

        def refused(exc: KafkaError):
            return Response(throttle_time_ms=0, error_code=_code_for(exc, header.api_version, 2))

        try:
            broker.access(connection).require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                              request.transactional_id)
            coordinator().end_transaction(request.transactional_id, request.producer_id, request.producer_epoch,
                                          request.committed)
        except KafkaError as exc:
            return refused(exc)
        return once_durable(request.transactional_id, lambda: Response(
            throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch), refused)

    def answer_txn_offset_commit(connection, header, request):
        Response = TXN_OFFSET_COMMIT.response
        version = header.api_version
        wanted = [(topic.name, p.partition_index, p.committed_offset,
                   p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata)
                  for topic in request.topics for p in topic.partitions]
        access = broker.access(connection)
        denied = access.denied(AclOperation.READ, ResourceType.TOPIC, (topic.name for topic in request.topics))
        try:
            access.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
            access.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
            coordinator().check_producer(request.transactional_id, request.producer_id, request.producer_epoch)
            codes = broker.group_coordinator.commit_transactional_offsets(
                request.group_id, producer_id=request.producer_id, producer_epoch=request.producer_epoch,
                member_id=request.member_id if version >= 3 else "",
                generation=request.generation_id if version >= 3 else -1,
                offsets=[offset for offset in wanted if offset[0] not in denied])
        except KafkaError as exc:  # a request-level error covers every partition
            codes, denied = [_code_for(exc, version, 3)] * len(wanted), frozenset()
        return commit_answer(Response, Response.TxnOffsetCommitResponseTopic, Response.TxnOffsetCommitResponsePartition, request.topics, denied, codes)

    def answer_describe_producers(connection, header, request):
        Response = DESCRIBE_PRODUCERS.response
        access = broker.access(connection)
        topics = []
        for topic in request.topics:
            partitions = []
            readable = access.allows(AclOperation.READ, ResourceType.TOPIC, topic.name)
            for index in topic.partition_indexes:
                partition = broker.partitions.get((topic.name, index))
                if partition is None or not readable:
                    partitions.append(Response.PartitionResponse(
                        partition_index=index, active_producers=[], error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
                partitions.append(Response.PartitionResponse(
                    partition_index=index, error_code=ErrorCode.NONE, active_producers=[
                        Response.ProducerState(producer_id=entry.producer_id, producer_epoch=entry.epoch,
                                               last_sequence=entry.last_sequence, last_timestamp=entry.last_timestamp,
                                               coordinator_epoch=entry.coordinator_epoch,
                                               current_txn_start_offset=entry.transaction_first_offset
                                               if entry.transaction_first_offset != NO_OFFSET else -1)
                        for entry in partition.log.producer_state.producers.values()]))
            topics.append(Response.TopicResponse(name=topic.name, partitions=partitions))
        return Response(throttle_time_ms=0, topics=topics)

    def answer_describe_transactions(connection, header, request):
        Response = DESCRIBE_TRANSACTIONS.response
        access = broker.access(connection)
        states = []
        for transactional_id in request.transactional_ids:
            answer = Response.TransactionState(  # an error's entry keeps the schema's zeros, as Kafka's
                error_code=ErrorCode.NONE, transactional_id=transactional_id, transaction_state="",
                transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[])
            try:
                access.require(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
                metadata = coordinator().describe(transactional_id)
            except KafkaError as exc:
                answer.error_code = exc.code
            else:
                by_topic: dict[str, list[int]] = {}
                for topic, index in sorted(metadata.partitions):
                    by_topic.setdefault(topic, []).append(index)
                answer.transaction_state = metadata.state.display_name
                answer.transaction_timeout_ms = metadata.timeout_ms
                answer.transaction_start_time_ms = metadata.start_ms
                answer.producer_id, answer.producer_epoch = metadata.producer_id, metadata.producer_epoch
                answer.topics = [Response.TopicData(topic=topic, partitions=indexes)
                                 for topic, indexes in by_topic.items()]
            states.append(answer)
        return Response(throttle_time_ms=0, transaction_states=states)

    def answer_list_transactions(connection, header, request):
        Response = LIST_TRANSACTIONS.response
        version = header.api_version
        known = {state.display_name for state in TransactionState}
        unknown = [name for name in request.state_filters if name not in known]
        access = broker.access(connection)
        try:
            found = coordinator().list_transactions(
                set(request.state_filters), set(request.producer_id_filters),
                request.duration_filter if version >= 1 else -1,
                request.transactional_id_pattern if version >= 2 else None)
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, unknown_state_filters=unknown,
                            transaction_states=[])
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                        transaction_states=[Response.TransactionState(
                            transactional_id=m.transactional_id, producer_id=m.producer_id,
                            transaction_state=m.state.display_name) for m in found
                            if access.allows(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                             m.transactional_id)])

    def answer_write_txn_markers(connection, header, request):
        """A transaction coordinator on another broker closes a transaction on partitions this broker leads; answered
        once the markers are on the partitions' in-sync replicas (Kafka appends them with acks=-1)."""
        Response = WRITE_TXN_MARKERS.response
        allowed = broker.access(connection).allows_cluster(AclOperation.CLUSTER_ACTION)  # brokers only, in Kafka
        results = []
        written = []  # (its answer, partition key, the marker's offset)
        for marker in request.markers:
            topics = []
            for wanted in marker.topics:
                partitions = []
                for index in wanted.partition_indexes:
                    code = ErrorCode.NONE
                    try:
                        if not allowed:
                            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                        broker.write_transaction_marker(wanted.name, index, marker.producer_id,
                                                        marker.producer_epoch, marker.transaction_result,
                                                        marker.coordinator_epoch)
                    except KafkaError as exc:
                        code = exc.code
                    partitions.append(Response.WritableTxnMarkerPartitionResult(partition_index=index,
                                                                                error_code=code))
                    partition = broker.partitions.get((wanted.name, index))
                    if code == ErrorCode.NONE and partition.high_watermark < partition.log.log_end_offset:
                        written.append((partitions[-1], (wanted.name, index), partition.log.log_end_offset - 1))
                topics.append(Response.WritableTxnMarkerTopicResult(name=wanted.name, partitions=partitions))
            results.append(Response.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
        if not written:
            return Response(markers=results)

        async def replicated():
            deadline = time.monotonic() + broker.config["request.timeout.ms"] / 1000
            for answer, key, last_offset in written:
                error = await until_replicated(lambda: broker.partitions.get(key), last_offset, deadline)
                if error is not None:
                    answer.error_code = error.code
            return Response(markers=results)

        return replicated()

    return {
        WRITE_TXN_MARKERS.key: answer_write_txn_markers,
        INIT_PRODUCER_ID.key: answer_init_producer_id,
        ADD_PARTITIONS_TO_TXN.key: answer_add_partitions_to_txn,
        ADD_OFFSETS_TO_TXN.key: answer_add_offsets_to_txn,
        END_TXN.key: answer_end_txn,
        TXN_OFFSET_COMMIT.key: answer_txn_offset_commit,
        DESCRIBE_PRODUCERS.key: answer_describe_producers,
        DESCRIBE_TRANSACTIONS.key: answer_describe_transactions,
        LIST_TRANSACTIONS.key: answer_list_transactions,
    }
