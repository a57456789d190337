"""Produce: check each partition's batches, append them, answer per partition.

A batch stays opaque bytes: we check its header and CRC and let the log stamp offsets (and LogAppendTime) in place;
records are decoded only for a compacted topic, whose records must all have keys. Produce v0-v2 carry the old
message formats, which are converted to one v2 batch first. Errors are per partition, with Kafka's codes, so one
bad partition never fails the rest of the request. With an authorizer, each topic needs WRITE
(TOPIC_AUTHORIZATION_FAILED) and a transactional produce WRITE on its transactional id (every partition
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as KafkaApis.handleProduceRequest checks. The batches' bytes count
against the client's producer_byte_rate quota (odradek/security/quotas.py). With acks=0 the client expects no
answer at all.
"""

from __future__ import annotations

import logging

from odradek.cluster.metadata import INTERNAL_TOPICS
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.records.batch import validate_batches
from odradek.records.keys import batches_all_keyed
from odradek.records.legacy import convert_message_set
from odradek.security.quotas import PRODUCER_BYTE_RATE, throttle_connection

PRODUCE = api("Produce")
ProduceResponse = PRODUCE.response

log = logging.getLogger("odradek.produce")


def handlers(broker) -> dict:
    def append_partition(topic: str, index: int, records, version: int):
        partition = broker.partition(topic, index)
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
        if partition.log.config.compact and not batches_all_keyed(records, headers):
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"Compacted topic cannot accept message without key in topic partition {topic}-{index}.")
        result = partition.append(records, headers)
        if broker.metrics is not None:
            broker.metrics.record_produce(topic, len(records), sum(h.record_count for h in headers))
        return result

    def answer_produce(connection, header, request):
        version = header.api_version
        acks = request.acks
        access = broker.access(connection)
        transactional_id = request.transactional_id if version >= 3 else None
        refusal = None  # Kafka refuses the whole request when the transactional id may not write
        if transactional_id is not None and not access.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                              transactional_id):
            refusal = KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        topic_answers = []
        for topic_data in request.topic_data:
            name = topic_data.name
            partition_answers = []
            for data in topic_data.partition_data:
                index = data.index
                try:
                    if refusal is not None:
                        raise refusal
                    access.require(AclOperation.WRITE, ResourceType.TOPIC, name)
                    if acks not in (0, 1, -1):
                        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                    result = append_partition(name, index, data.records, version)
                except (KafkaError, OSError) as exc:
                    if isinstance(exc, OSError):
                        log.error("append to %s-%d failed: %s", name, index, exc)
                        exc = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
                    partition_answers.append(ProduceResponse.PartitionProduceResponse(
                        index=index, error_code=exc.code, base_offset=-1, log_append_time_ms=-1,
                        log_start_offset=-1, error_message=exc.message))
                else:
                    partition_answers.append(ProduceResponse.PartitionProduceResponse(
                        index=index, error_code=ErrorCode.NONE, base_offset=result.first_offset,
                        log_append_time_ms=result.log_append_time_ms, log_start_offset=result.log_start_offset))
            topic_answers.append(ProduceResponse.TopicProduceResponse(name=name,
                                                                      partition_responses=partition_answers))
        throttle_ms = throttle_connection(broker.quotas, connection, header, PRODUCER_BYTE_RATE,
                                          sum(len(data.records or b"") for topic_data in request.topic_data
                                              for data in topic_data.partition_data))
        if acks == 0:
            if throttle_ms:  # no answer to carry it: muted at once, as Kafka does
                connection.mute(throttle_ms)
            return None
        return ProduceResponse(responses=topic_answers, throttle_time_ms=throttle_ms)

    return {PRODUCE.key: answer_produce}
