"""Produce-time checks of every record of every batch, as Kafka's LogValidator makes them.

`batch.validate_batches` checks what the 61-byte headers say (framing, CRC, count against last_offset_delta); this
module checks that the records behind a header are what it claims: each batch is decompressed once (bounded by
compression.MAX_DECOMPRESSED_BYTES) and walked with records.walk, the walker columnar reads use, so the only
per-record Python is the length-varint walk and every field check is one numpy operation over many records. A batch
of at most FEW_RECORDS records (what a producer lingering 0 ms sends) is decoded by batch.decode_records instead:
numpy's fixed cost per call (about 100 us for the whole check) is ten times what decoding a single record costs.

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
A count larger than the bytes could hold is refused before any per-record work, and records are walked in chunks
of CHUNK_RECORDS, so a batch of millions of tiny records costs memory in proportion to one chunk plus its bytes.

The checks run wherever the caller puts them: `refusal` is the form for a worker process (plain arguments in, a
picklable answer out), for requests whose records would hold the event loop too long.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import BATCH_HEADER_SIZE, NO_TIMESTAMP, BatchHeader, MalformedRecords, decode_records
from odradek.records.compression import MAX_DECOMPRESSED_BYTES, decompress

CHUNK_RECORDS = 1 << 16
FEW_RECORDS = 16  # up to this many records, decoding them one by one costs less than numpy's per-call overhead
MAX_RECORD_ERRORS = 10_000  # listed in an answer; more keyless records are failed as the rest of their batch
LOG_APPEND_TIME = 1  # a batch header's timestamp type
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
        if header.timestamp_type == LOG_APPEND_TIME:
            raise RecordsRefused(ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, [
                (index, "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.")
                for index in range(min(header.record_count, MAX_RECORD_ERRORS))])
        payload = view[position + BATCH_HEADER_SIZE:position + header.size]
        body = decompress(header.compression, payload, decompressed_limit) if header.compression else payload
        check = _check_few if header.record_count <= FEW_RECORDS else _check_batch
        try:
            keyless, timestamps_at, timestamps = check(header, body, keys_required, create_time_range)
        except MalformedRecords as exc:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"{exc.message} in topic partition {topic_partition}") from None
        if len(keyless) or len(timestamps_at):
            raise _refused(topic_partition, keyless, timestamps_at, timestamps, create_time_range)
        position += header.size


def _refused(topic_partition: str, keyless, timestamps_at, timestamps,
             create_time_range: tuple[int, int]) -> RecordsRefused:
    """Kafka's answer to a batch with bad records (index sequences from a check): one error per record (a missing
    key before a bad timestamp), INVALID_TIMESTAMP if any timestamp is out of range, else INVALID_RECORD."""
    key_message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    errors = {int(index): key_message for index in keyless[:MAX_RECORD_ERRORS]}
    timestamp_errors = 0
    for index, timestamp in zip(timestamps_at[:MAX_RECORD_ERRORS], timestamps[:MAX_RECORD_ERRORS]):
        if int(index) not in errors:
            timestamp_errors += 1
            errors[int(index)] = (f"Timestamp {timestamp} of message with offset {index} is out of range. The "
                                  f"timestamp should be within [{create_time_range[0]}, {create_time_range[1]}]")
    record_errors = sorted(errors.items())[:MAX_RECORD_ERRORS]
    if timestamp_errors:
        return RecordsRefused(ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, record_errors)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in record_errors[:3])
    return RecordsRefused(ErrorCode.INVALID_RECORD,
                          f"One or more records have been rejected due to {len(keyless)} record errors in total, "
                          f"and only showing the first three errors at most: [{shown}]", record_errors)


def refusal(data: bytes, headers: Sequence[BatchHeader], topic_partition: str, keys_required: bool,
            create_time_range: tuple[int, int] | None) -> tuple[int, str | None, list[tuple[int, str]]] | None:
    """`validate_records` for a worker process: None if the records pass, else (error code, message, record errors)."""
    try:
        validate_records(data, headers, topic_partition=topic_partition, keys_required=keys_required,
                         create_time_range=create_time_range)
    except KafkaError as exc:
        return int(exc.code), exc.message, getattr(exc, "record_errors", [])
    return None


def _check_few(header: BatchHeader, body, keys_required: bool, create_time_range: tuple[int, int] | None):
    """_check_batch for a batch of a few records, decoded one by one with batch.decode_records."""
    try:
        records = decode_records(header, body)
    except KafkaError as exc:
        raise MalformedRecords(exc.message) from None
    for index, record in enumerate(records):
        if record.offset_delta != index:
            raise MalformedRecords(f"Record {index} has offset delta {record.offset_delta}: a batch's offset deltas "
                                   f"must be 0 to {len(records) - 1} in order")
    keyless = [index for index, record in enumerate(records) if keys_required and record.key is None]
    wrong_times = []
    if create_time_range is not None:
        earliest, latest = create_time_range
        wrong_times = [(index, record.timestamp) for index, record in enumerate(records)
                       if record.timestamp != NO_TIMESTAMP and not earliest <= record.timestamp <= latest]
    return keyless, [index for index, _ in wrong_times], [timestamp for _, timestamp in wrong_times]


def _check_batch(header: BatchHeader, body, keys_required: bool, create_time_range: tuple[int, int] | None):
    """Walk one batch's records (`body`: its decompressed record bytes) a chunk at a time: the indexes of records
    without a key (if `keys_required`), and the indexes and timestamps of those outside `create_time_range`.
    MalformedRecords if the records are not what the header says."""
    # Imported at the first batch of more than FEW_RECORDS records rather than with this module: numpy's import
    # is about a third of the broker's start.
    import numpy as np

    from odradek.records.walk import MIN_RECORD_BYTES, header_fields, record_begins, record_fields

    count = header.record_count
    end = len(body)
    if count * MIN_RECORD_BYTES > end:
        raise MalformedRecords(f"Incorrect declared batch size, premature EOF reached: {count} records cannot fit "
                               f"in {end} bytes")
    buffer = np.frombuffer(body, np.uint8)
    keyless, timestamps_at, timestamps = [], [], []
    position = 0
    for first in range(0, count, CHUNK_RECORDS):
        begins, position = record_begins(body, buffer, position, min(CHUNK_RECORDS, count - first), end)
        if position > end:
            raise MalformedRecords("Incorrect declared batch size, premature EOF reached")
        fields = record_fields(buffer, begins)
        header_fields(buffer, fields.headers_at, fields.header_counts, fields.record_ends)
        expected = np.arange(first, first + len(begins), dtype=np.int64)
        if not np.array_equal(fields.offset_deltas, expected):
            wrong = int(np.flatnonzero(fields.offset_deltas != expected)[0])
            raise MalformedRecords(f"Record {first + wrong} has offset delta {int(fields.offset_deltas[wrong])}: "
                                   f"a batch's offset deltas must be 0 to {count - 1} in order")
        if keys_required:
            keyless.append(first + np.flatnonzero(fields.key_lengths < 0))
        if create_time_range is not None:
            chunk_timestamps = header.base_timestamp + fields.timestamp_deltas
            earliest, latest = create_time_range
            wrong = np.flatnonzero((chunk_timestamps != NO_TIMESTAMP)
                                   & ((chunk_timestamps < earliest) | (chunk_timestamps > latest)))
            timestamps_at.append(first + wrong)
            timestamps.append(chunk_timestamps[wrong])
    if position != end:
        raise MalformedRecords("Incorrect declared batch size, records still remaining in file")
    return tuple(np.concatenate(found) if found else np.empty(0, np.int64)
                 for found in (keyless, timestamps_at, timestamps))
