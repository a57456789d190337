"""`odradek dump-log`: decode segment (.log), offset index (.index) and time index (.timeindex) files offline,
checking them, like kafka-dump-log.

The formats are docs/storage-format.md's; batches are read with odradek.records.batch (parse_header, batch_crc,
decode_batch) and index entries with the index classes' own entry layouts, so this tool reads exactly what the
broker writes. Problems (a bad CRC, a torn tail, an index entry that points at no batch) are printed where they are
found and summed up in one line each on stderr; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odradek.errors import KafkaError
from odradek.records.batch import (BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader, batch_crc, decode_batch,
                                   parse_header)
from odradek.storage.index import OffsetIndex, TimeIndex

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def add_commands(commands) -> None:
    dump = commands.add_parser("dump-log", help="decode and verify segment and index files",
                               description="Decode .log, .index and .timeindex files of a partition directory, "
                                           "verifying batch CRCs and index entries.")
    dump.add_argument("files", nargs="+", type=Path, metavar="FILE")
    dump.add_argument("--print-data-log", action="store_true", help="print every record, not just batch headers")
    dump.set_defaults(run=run_dump_log)


def run_dump_log(args: argparse.Namespace) -> int:
    problems: list[str] = []
    for path in args.files:
        print(f"Dumping {path}")
        if path.suffix == ".log":
            dump_segment(path, args.print_data_log, problems)
        elif path.suffix == ".index":
            dump_offset_index(path, problems)
        elif path.suffix == ".timeindex":
            dump_time_index(path, problems)
        else:
            raise ValueError(f"{path}: not a .log, .index or .timeindex file")
    for problem in problems:
        print(f"odradek: {problem}", file=sys.stderr)
    return 1 if problems else 0


def base_offset_of(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        raise ValueError(f"{path}: segment files are named by their base offset (20 digits)") from None


def read_batches(data: bytes):
    """(position, header or None, size) per batch; a None header marks a torn or unreadable tail."""
    position = 0
    while position < len(data):
        if len(data) - position < BATCH_HEADER_SIZE:
            yield position, None, len(data) - position
            return
        header = parse_header(data, position)
        if header.magic != MAGIC_V2 or header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD \
                or position + header.size > len(data):
            yield position, None, len(data) - position
            return
        yield position, header, header.size
        position += header.size


def _batch_line(header: BatchHeader, position: int, valid: bool) -> str:
    last_sequence = -1 if header.base_sequence < 0 else header.base_sequence + header.last_offset_delta
    time_type = "LogAppendTime" if header.timestamp_type else "CreateTime"
    return (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.record_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {last_sequence} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} "
            f"isControl: {str(header.is_control).lower()} position: {position} "
            f"{time_type}: {header.max_timestamp} size: {header.size} magic: {header.magic} "
            f"compresscodec: {CODECS[header.compression] if header.compression < len(CODECS) else header.compression} "
            f"crc: {header.crc} isvalid: {str(valid).lower()}")


def dump_segment(path: Path, print_records: bool, problems: list[str]) -> None:
    data = path.read_bytes()
    print(f"Starting offset: {base_offset_of(path)}")
    for position, header, size in read_batches(data):
        if header is None:
            print(f"Found {size} invalid bytes at the end of {path.name}")
            problems.append(f"{path}: {size} byte(s) at position {position} are not a whole record batch")
            return
        valid = batch_crc(data, position, size) == header.crc
        print(_batch_line(header, position, valid))
        if not valid:
            problems.append(f"{path}: batch at position {position} (offsets {header.base_offset}.."
                            f"{header.last_offset}) fails its CRC")
        elif print_records:
            print_batch_records(path, data[position:position + size], problems)


def print_batch_records(path: Path, batch: bytes, problems: list[str]) -> None:
    try:
        header, records = decode_batch(batch)
    except KafkaError as exc:
        problems.append(f"{path}: batch at offset {parse_header(batch).base_offset} does not decode: {exc}")
        return
    time_type = "LogAppendTime" if header.timestamp_type else "CreateTime"
    for record in records:
        sequence = -1 if header.base_sequence < 0 else header.base_sequence + record.offset_delta
        key, value = record.key, record.value
        print(f"| offset: {header.base_offset + record.offset_delta} {time_type}: {record.timestamp} "
              f"keySize: {-1 if key is None else len(key)} valueSize: {-1 if value is None else len(value)} "
              f"sequence: {sequence} headerKeys: [{','.join(name for name, _ in record.headers)}]"
              + ("" if key is None else f" key: {key.decode('utf-8', 'replace')}")
              + ("" if value is None else f" payload: {value.decode('utf-8', 'replace')}"))


def _index_entries(path: Path, entry) -> list[tuple]:
    """Entries up to the first all-zero one (an active segment's index is preallocated with zeros)."""
    data = path.read_bytes()
    entries = []
    for fields in entry.iter_unpack(data[:len(data) - len(data) % entry.size]):
        if not any(fields):
            break
        entries.append(fields)
    return entries


def _batches_by_last_offset(path: Path) -> dict[int, int] | None:
    """last offset -> position of every whole batch in the segment beside an index, None if there is none."""
    log_path = path.with_suffix(".log")
    if not log_path.exists():
        return None
    return {header.last_offset: position
            for position, header, _ in read_batches(log_path.read_bytes()) if header is not None}


def dump_offset_index(path: Path, problems: list[str]) -> None:
    base = base_offset_of(path)
    batches = _batches_by_last_offset(path)
    for relative, position in _index_entries(path, OffsetIndex.ENTRY):
        print(f"offset: {base + relative} position: {position}")
        if batches is not None and batches.get(base + relative) != position:
            problems.append(f"{path}: entry (offset {base + relative}, position {position}) points at no batch "
                            f"ending at that offset")


def dump_time_index(path: Path, problems: list[str]) -> None:
    base = base_offset_of(path)
    batches = _batches_by_last_offset(path)
    previous = -1
    for timestamp, relative in _index_entries(path, TimeIndex.ENTRY):
        print(f"timestamp: {timestamp} offset: {base + relative}")
        if timestamp <= previous:
            problems.append(f"{path}: timestamp {timestamp} does not increase")
        if batches is not None and base + relative not in batches:
            problems.append(f"{path}: entry (timestamp {timestamp}, offset {base + relative}) names no batch's "
                            f"last offset")
        previous = timestamp
