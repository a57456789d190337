"""Produce: check each partition's batches and every record in them, append them, answer per partition.

A batch stays opaque bytes on its way to the log: its header and CRC are checked (`batch.validate_batches`), its
records are walked and checked as Kafka's LogValidator does (`records.validation`: counts, lengths, varints, offset
deltas, keys on compacted topics, CreateTime timestamps) and the log stamps offsets (and LogAppendTime) in place.
Produce v0-v2 carry the old message formats, which are converted to one v2 batch first. Errors are per partition,
with Kafka's codes (and `record_errors` naming the records at fault), so one bad partition never fails the rest of
the request. With an authorizer, each topic needs WRITE (TOPIC_AUTHORIZATION_FAILED) and a transactional produce
WRITE on its transactional id (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as
KafkaApis.handleProduceRequest checks. The batches' bytes count against the client's producer_byte_rate quota
(odradek/security/quotas.py). With acks=0 the client expects no answer at all; acks=1 is answered after the leader's
append, acks=all (-1) once the in-sync replicas have the records (the partition's high watermark passed them; at
once while the ISR is the leader alone), and refused with NOT_ENOUGH_REPLICAS while the ISR is smaller than
min.insync.replicas. A topic with `confluent.{key,value}.schema.validation` on has its records checked against the
registry's schemas too (broker/schema_validation.py), once they passed the record checks, just before the append.

Walking records costs time in proportion to how many there are, and a header says how many before any work (the
count is checked against the bytes first, and the walk never goes past it). So the batches of a request holding at
most INLINE_RECORDS records in all are checked on the event loop (partition by partition, as long as the request's
allowance lasts), compressed ones too if they decompress to at most INLINE_DECOMPRESSED_BYTES (a decompression that
goes past it stops there), which a client's batch (batch.size, 1 MB at most by default) does. Measured with the C
walker (records._walk): 256k records of scattered sizes (21 MB), the walk's worst case, 4 ms; 16k of them 0.2 ms.
Sending such a batch to a worker costs more CPU than checking it (a pickle and two pipe copies of every byte). Every other batch (a
few KB of zstd can inflate to millions of records) is checked in one of VALIDATION_PROCESSES worker processes
(broker/validation_workers.py; processes, not threads: cramjam holds the GIL while it decompresses), which also
bounds the memory such checks take; the event loop keeps serving every other connection meanwhile.

Appends to one partition still happen in the order the requests arrived, even when a small request's records are
checked before a large one's that came earlier: an idempotent producer pipelines requests to a partition and
counts on its sequence numbers landing in order. Each partition remembers its last append still in flight, and a
new append (inline or not) waits for it before appending; only a partition with nothing in flight appends inline.

A Produce that reaches a replica whose leader is gone or stopping cleanly, while this broker is in the ISR, waits
(up to ELECTION_WAIT_S, within the request's timeout) for the controller's election instead of being refused
NOT_LEADER_OR_FOLLOWER at once: the client most likely learnt of the election from a broker whose view moved
first. It joins the partition's appends in flight like any other, so the requests pipelined behind it land in
order once this broker leads; if another broker is elected it is refused then.
"""

from __future__ import annotations

import asyncio
import time

from odradek.broker import schema_validation
from odradek.broker.validation_workers import ValidationWorkers
from odradek.cluster.append_waits import settled, until_led, until_replicated
from odradek.cluster.metadata import INTERNAL_TOPICS
from odradek.cluster.partition import Partition
from odradek.errors import ErrorCode, KafkaError, detached, storage_error
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.records.batch import validate_batches
from odradek.records.compression import DecompressedTooLarge
from odradek.records.legacy import convert_message_set
from odradek.records.validation import validate_records
from odradek.security.quotas import PRODUCER_BYTE_RATE, throttle_connection

PRODUCE = api("Produce")
ProduceResponse = PRODUCE.response

# looked up once, not per partition: an enum member is slow to look up on Python 3.11 (see handlers/fetch.py)
_NO_ERROR, _WRITE, _TOPIC = ErrorCode.NONE, AclOperation.WRITE, ResourceType.TOPIC
# refusals answered with log_start_offset -1 (Kafka's UNKNOWN_LOG_APPEND_INFO); every other one names the partition's
_NO_LOG_START_WITH = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
                                ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUIRED_ACKS,
                                ErrorCode.INVALID_TOPIC_EXCEPTION})

INLINE_RECORDS = 256 * 1024  # records of one request checked on the loop, at most
INLINE_DECOMPRESSED_BYTES = 4 << 20  # if their compressed batches decompress to no more than this
VALIDATION_PROCESSES = 2
ELECTION_WAIT_S = 5.0  # the longest a Produce waits at a replica for an election that may make it the leader


def handlers(broker) -> dict:
    in_flight: dict[Partition, asyncio.Future] = {}  # each partition's last append not yet done
    workers = ValidationWorkers(VALIDATION_PROCESSES)

    def checked_batches(partition: Partition, topic: str, records, version: int):
        """The partition's batches (converted from v0/v1 and through the header checks)."""
        if topic in INTERNAL_TOPICS:  # the coordinators write these through the partition, never through Produce
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
        if records is None or len(records) == 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
        if version < 3:
            records = convert_message_set(records)
        headers = validate_batches(records)
        if version >= 3 and len(headers) != 1:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"Produce v3 and above carry exactly one record batch per partition, not {len(headers)}")
        partition.log.check_sizes(records, headers)  # before the records are walked, as Kafka checks them
        return records, headers

    def append(partition: Partition, records, headers):
        config = partition.log.config
        if config.schema_validation:  # after the record checks, which bound the decompression
            schema_validation.check(broker, partition.topic, config, records, headers)
        result = partition.append(records, headers, sizes_checked=True)  # by `checked_batches`
        if broker.metrics is not None:
            broker.metrics.record_produce(partition.topic, len(records), sum(h.record_count for h in headers))
        return result

    async def check_then_append(partition: Partition, previous: asyncio.Future | None, records, headers,
                                topic_partition: str, keys_required: bool, time_range, checked: bool):
        """Check the records in a worker (unless `checked` already), wait for the partition's previous append, and
        append."""
        check = None if checked else asyncio.ensure_future(
            workers.check(records, topic_partition, keys_required, time_range))
        if previous is not None:
            await settled(previous)  # its outcome is its own request's
        if check is not None:
            try:
                await check
            finally:  # a refusal's traceback holds this frame: holding the check's task, the two would be a cycle
                check = None
        return append(partition, records, headers)

    def prepared(partition: Partition, topic: str, index: int, records, version: int, acks: int,
                 inline_allowance: list[int]):
        """The batches for the partition this broker leads and what their record checks need, the records checked
        inline if they fit in what is left of the request's `inline_allowance` (a one-item list: records), which
        they use up."""
        if acks == -1:
            partition.check_min_insync()
        records, headers = checked_batches(partition, topic, records, version)
        topic_partition = f"{topic}-{index}"
        config = partition.log.config
        keys_required = config.compact
        time_range = None if config.log_append_time else config.create_time_range(time.time_ns() // 1_000_000)
        checked = False
        count = headers[0].record_count if len(headers) == 1 else sum(header.record_count for header in headers)
        if count <= inline_allowance[0]:
            inline_allowance[0] -= count
            try:
                validate_records(records, headers, topic_partition=topic_partition, keys_required=keys_required,
                                 create_time_range=time_range, decompressed_limit=INLINE_DECOMPRESSED_BYTES)
                checked = True
            except DecompressedTooLarge:
                pass  # a worker decompresses it again, under the full limit
        return records, headers, topic_partition, keys_required, time_range, checked

    async def append_once_led(partition: Partition, previous: asyncio.Future | None, topic: str, index: int,
                              records, version: int, acks: int, deadline: float):
        """A Produce that reached this replica while the controller elects the partition's leader: append once
        this broker leads (NOT_LEADER_OR_FOLLOWER if another broker was elected, or at `deadline`)."""
        if previous is not None:
            await settled(previous)
        await until_led(partition, deadline)
        partition = broker.partition(topic, index)
        records, headers, topic_partition, keys_required, time_range, checked = prepared(
            partition, topic, index, records, version, acks, [INLINE_RECORDS])
        return await check_then_append(partition, None, records, headers, topic_partition, keys_required, time_range,
                                       checked)

    def start_append(topic: str, index: int, records, version: int, acks: int, timeout_ms: int,
                     inline_allowance: list[int]):
        """The partition's append result, or a future of it when it has to wait for record checks off the loop, for
        an earlier append to the same partition, or for an election that may make this broker its leader: a
        client that heard of it before this broker did would otherwise be refused NOT_LEADER_OR_FOLLOWER here,
        and its next pipelined request, taken once the election is in force, OUT_OF_ORDER_SEQUENCE_NUMBER (the
        refused sequences are missing), which librdkafka answers by bumping the producer's epoch and writing its
        unacknowledged records again under new sequences (duplicates, docs/chaos.md)."""
        partition = broker.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            electing = broker.leadership_coming(topic, index)
            if electing is not None:
                deadline = time.monotonic() + min(max(timeout_ms, 0) / 1000, ELECTION_WAIT_S)
                return chain(electing, append_once_led(electing, in_flight.get(electing), topic, index, records,
                                                       version, acks, deadline))
            partition = broker.partition(topic, index)  # the error: not led here, or not hosted at all
        records, headers, topic_partition, keys_required, time_range, checked = prepared(
            partition, topic, index, records, version, acks, inline_allowance)
        previous = in_flight.get(partition)
        if checked and previous is None:
            return append(partition, records, headers)
        return chain(partition, check_then_append(partition, previous, records, headers, topic_partition,
                                                  keys_required, time_range, checked))

    def chain(partition: Partition, append_later) -> asyncio.Future:
        """Start `append_later` as the partition's last append in flight (the next one waits for it)."""
        future = asyncio.ensure_future(append_later)
        in_flight[partition] = future
        future.add_done_callback(lambda done: finished(partition, done))
        return future

    def finished(partition: Partition, done: asyncio.Future) -> None:
        if in_flight.get(partition) is done:
            del in_flight[partition]
        if not done.cancelled():
            done.exception()  # retrieved here too: its request's connection may have closed before it was done

    def partition_answer(topic: str, index: int, outcome):
        if isinstance(outcome, BaseException):
            exc = outcome
            if isinstance(exc, OSError):
                exc = storage_error(exc, f"{topic}-{index}")
            record_errors = [ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=text)
                             for i, text in getattr(exc, "record_errors", ())]
            partition = broker.partitions.get((topic, index))
            # Kafka's appendToLocalLog names the log start offset with every refusal but these
            log_start = (-1 if partition is None or exc.code in _NO_LOG_START_WITH
                         else partition.log.log_start_offset)
            return ProduceResponse.PartitionProduceResponse(
                index=index, error_code=exc.code, base_offset=-1, log_append_time_ms=-1, log_start_offset=log_start,
                error_message=exc.message, record_errors=record_errors)
        return ProduceResponse.PartitionProduceResponse(
            index=index, error_code=_NO_ERROR, base_offset=outcome.first_offset,
            log_append_time_ms=outcome.log_append_time_ms, log_start_offset=outcome.log_start_offset)

    def response(acks: int, outcomes: list, throttle_ms: int):
        if acks == 0:
            return None
        topics = []
        for name, partitions in outcomes:  # loops, not comprehensions: on Python 3.11 each of those is a call
            answers = []
            for index, outcome in partitions:
                answers.append(partition_answer(name, index, outcome))
            topics.append(ProduceResponse.TopicProduceResponse(name=name, partition_responses=answers))
        return ProduceResponse(responses=topics, throttle_time_ms=throttle_ms)

    def unreplicated(outcomes: list) -> bool:
        """Whether an append of an acks=all request is not below its partition's high watermark yet."""
        for name, partitions in outcomes:
            for index, outcome in partitions:
                partition = broker.partitions.get((name, index))
                if isinstance(outcome, asyncio.Future) or (
                        partition is not None and not isinstance(outcome, BaseException)
                        and partition.high_watermark <= outcome.last_offset):
                    return True
        return False

    async def replicated(name: str, index: int, outcome, deadline: float):
        """acks=all: the append once the ISR has it, or the error that ended the wait."""
        error = await until_replicated(lambda: broker.partitions.get((name, index)), outcome.last_offset, deadline)
        return outcome if error is None else error

    async def await_outcomes(acks: int, outcomes: list, throttle_ms: int, timeout_ms: int = 0):
        futures = [outcome for _, partitions in outcomes for _, outcome in partitions
                   if isinstance(outcome, asyncio.Future)]
        for future in futures:  # not gather: a closed connection must not cancel appends already queued
            await settled(future)
        for _, partitions in outcomes:
            for position, (index, outcome) in enumerate(partitions):
                if isinstance(outcome, asyncio.Future):
                    error = outcome.exception()
                    if error is not None and not isinstance(error, (KafkaError, OSError)):
                        raise error
                    partitions[position] = (index, error if error is not None else outcome.result())
        if acks == -1:
            deadline = time.monotonic() + timeout_ms / 1000
            for name, partitions in outcomes:
                for position, (index, outcome) in enumerate(partitions):
                    if not isinstance(outcome, BaseException):
                        partitions[position] = (index, await replicated(name, index, outcome, deadline))
        return response(acks, outcomes, throttle_ms)

    def answer_produce(connection, header, request):
        version = header.api_version
        acks = request.acks
        access = broker.access(connection)
        transactional_id = request.transactional_id if version >= 3 else None
        refusal = None  # Kafka refuses the whole request when the transactional id may not write
        if transactional_id is not None and not access.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                              transactional_id):
            refusal = KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        outcomes = []
        waiting = False
        inline_allowance = [INLINE_RECORDS]
        for topic_data in request.topic_data:
            name = topic_data.name
            partitions = []
            for data in topic_data.partition_data:
                try:
                    if refusal is not None:
                        raise refusal
                    access.require(_WRITE, _TOPIC, name)
                    if acks not in (0, 1, -1):
                        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                    outcome = start_append(name, data.index, data.records, version, acks, request.timeout_ms,
                                           inline_allowance)
                except (KafkaError, OSError) as exc:
                    outcome = detached(exc)
                waiting = waiting or isinstance(outcome, asyncio.Future)
                partitions.append((data.index, outcome))
            outcomes.append((name, partitions))
        throttle_ms = 0
        if broker.quotas.catalogue.client_quotas:  # the bytes are summed only for a quota to count them against
            throttle_ms = throttle_connection(broker.quotas, connection, header, PRODUCER_BYTE_RATE,
                                              sum(len(data.records or b"") for topic_data in request.topic_data
                                                  for data in topic_data.partition_data))
        if acks == 0 and throttle_ms:  # no answer to carry it: muted at once, as Kafka does
            connection.mute(throttle_ms)
        if waiting or (acks == -1 and unreplicated(outcomes)):
            return await_outcomes(acks, outcomes, throttle_ms, request.timeout_ms)
        return response(acks, outcomes, throttle_ms)

    return {PRODUCE.key: answer_produce}
