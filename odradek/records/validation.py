"""Produce-time checks of every record of every batch, as Kafka's LogValidator makes them.

`batch.validate_batches` checks what the 61-byte headers say (framing, CRC, count against last_offset_delta); this
module checks that the records behind a header are what it claims: each batch is decompressed once (bounded by
compression.MAX_DECOMPRESSED_BYTES) and walked once by records.walk, the C walker columnar reads use, which makes no
Python object per record and keeps nothing per record but the records at fault (at most MAX_RECORD_ERRORS listed).

What a batch must satisfy, and what Kafka answers when it does not:
- exactly record_count records, each inside the batch, every length and varint consistent with the bytes, nothing
  left over, no null header key: INVALID_RECORD (Kafka's record iterator throws InvalidRecordException, which its
  produce path answers as INVALID_RECORD), with Kafka's wording where it has one;
- offset deltas 0, 1, ..., record_count - 1 (Kafka rewrites a compressed batch whose inner offsets are off and
  never looks at an uncompressed one's; we append batches as they came, so a consumer would see the offsets the
  producer wrote, and we refuse instead): INVALID_RECORD;
- on a compacted topic, a key on every record: INVALID_RECORD with `record_errors` naming each keyless record by
  its index in the batch and Kafka's error message, so clients fail those records and the rest as collateral;
- on a CreateTime topic, every record's timestamp (but -1) inside message.timestamp.{before,after}.max.ms of now:
  INVALID_TIMESTAMP, the records named the same way;
- a batch that says LogAppendTime: only the broker sets that (on a LogAppendTime topic, when it appends), so a
  producer's is INVALID_TIMESTAMP with every record named, as Kafka's validateTimestamp answers, whatever the topic.
A count larger than the bytes could hold is refused before any per-record work, and a batch of millions of tiny
records costs no memory beyond its bytes.

The checks run wherever the caller puts them: `refusal` is the form for a worker process (plain arguments in, a
picklable answer out), for requests whose records would hold the event loop too long.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import (BATCH_HEADER_SIZE, COMPRESSION_MASK, TIMESTAMP_TYPE_BIT, BatchHeader,
                                   MalformedRecords)
from odradek.records.compression import MAX_DECOMPRESSED_BYTES, decompressed_view
from odradek.records.walk import Faults, check_records

MAX_RECORD_ERRORS = 10_000  # listed in an answer; more keyless records are failed as the rest of their batch
INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"


class RecordsRefused(KafkaError):
    """A batch refused because of some of its records: `record_errors` holds (index in the batch, message)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: Sequence[tuple[int, str]]):
        super().__init__(code, message)
        self.record_errors = list(record_errors)


def validate_records(data, headers: Sequence[BatchHeader], *, topic_partition: str, keys_required: bool,
                     create_time_range: tuple[int, int] | None = None,
                     decompressed_limit: int = MAX_DECOMPRESSED_BYTES) -> None:
    """Check every record of the batches laid end to end in `data` (with their `headers`, already through
    `validate_batches`); raise KafkaError if one fails: RecordsRefused naming the records without a key (if
    `keys_required`) or with a timestamp outside `create_time_range` (earliest, latest; CreateTime topics), and
    DecompressedTooLarge if a batch decompresses to more than `decompressed_limit` bytes."""
    view = memoryview(data)
    position = 0
    for header in headers:
        attributes = header.attributes  # its bits tested here: `timestamp_type` and `compression` are a call each
        if attributes & TIMESTAMP_TYPE_BIT:  # LogAppendTime
            raise RecordsRefused(ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, [
                (index, "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.")
                for index in range(min(header.record_count, MAX_RECORD_ERRORS))])
        end = position + header.size
        payload = view[position + BATCH_HEADER_SIZE:end]
        compression = attributes & COMPRESSION_MASK
        body = decompressed_view(compression, payload, decompressed_limit) if compression else payload
        try:
            faults = check_records(body, header.record_count, header.base_timestamp, keys_required=keys_required,
                                   create_time_range=create_time_range, max_errors=MAX_RECORD_ERRORS)
        except MalformedRecords as exc:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"{exc.message} in topic partition {topic_partition}") from None
        if faults is not None:
            raise _refused(topic_partition, faults, create_time_range)
        position = end


def _refused(topic_partition: str, faults: Faults, create_time_range: tuple[int, int]) -> RecordsRefused:
    """Kafka's answer to a batch with bad records: one error per record (a missing key before a bad timestamp),
    INVALID_TIMESTAMP if any timestamp is out of range, else INVALID_RECORD."""
    key_message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    errors = dict.fromkeys(faults.keyless, key_message)
    timestamp_errors = 0
    for index, timestamp in faults.bad_timestamps:
        if index not in errors:
            timestamp_errors += 1
            errors[index] = (f"Timestamp {timestamp} of message with offset {index} is out of range. The "
                             f"timestamp should be within [{create_time_range[0]}, {create_time_range[1]}]")
    record_errors = sorted(errors.items())[:MAX_RECORD_ERRORS]
    if timestamp_errors:
        return RecordsRefused(ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, record_errors)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in record_errors[:3])
    return RecordsRefused(ErrorCode.INVALID_RECORD,
                          f"One or more records have been rejected due to {faults.keyless_count} record errors in "
                          f"total, and only showing the first three errors at most: [{shown}]", record_errors)


def refusal(data: bytes, headers: Sequence[BatchHeader], topic_partition: str, keys_required: bool,
            create_time_range: tuple[int, int] | None) -> tuple[int, str | None, list[tuple[int, str]]] | None:
    """`validate_records` for a worker process: None if the records pass, else (error code, message, record errors)."""
    try:
        validate_records(data, headers, topic_partition=topic_partition, keys_required=keys_required,
                         create_time_range=create_time_range)
    except KafkaError as exc:
        return int(exc.code), exc.message, getattr(exc, "record_errors", [])
    return None
