"""Recovery that cuts a log says so (issue 12): a WARN line in the broker's own log naming the segment, the byte
and offset it was cut at, why, and the bytes and records dropped, as Kafka's "Corruption found in segment" line."""

from __future__ import annotations

import re

from confluent_kafka import Producer

from odradek.embedded import BrokerProcess
from odradek.records.batch import BATCH_HEADER_SIZE, parse_header


def batch_positions(data: bytes) -> list[tuple[int, int, int]]:
    """(position, size, record count) of each batch in a segment file."""
    batches, position = [], 0
    while position < len(data):
        header = parse_header(data, position)
        batches.append((position, header.size, header.last_offset_delta + 1))
        position += header.size
    return batches


def test_a_crc_failure_found_at_restart_is_logged_with_what_was_dropped(tmp_path):
    broker = BrokerProcess(tmp_path / "data", settings={"num.partitions": 1})
    broker.start()
    try:
        # one batch per flush; the last three batches hold two records each (a linger keeps a pair together: with
        # none, librdkafka may send the first record before the second is queued; flush sends at once anyway)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1000})
        for index in range(10):
            for _ in range(1 if index < 7 else 2):
                producer.produce("recovered", value=b"value-%d" % index)
            producer.flush(10)
        broker.kill()  # unclean: the restart recovers the segment
        segment = tmp_path / "data" / "recovered-0" / "00000000000000000000.log"
        data = bytearray(segment.read_bytes())
        batches = batch_positions(data)
        assert [count for *_, count in batches] == [1] * 7 + [2] * 3
        position, size, _ = batches[6]
        data[position + BATCH_HEADER_SIZE + 2] ^= 0xFF  # a record byte of the seventh batch: its CRC fails
        segment.write_bytes(data)
        broker.start()
        warning = [line for line in broker.log_tail(200).splitlines() if "Corruption found in segment" in line]
        assert len(warning) == 1, broker.log_tail()
        assert " WARNING " in warning[0]
        assert re.search(rf"segment \S*recovered-0/00000000000000000000\.log at byte {position} "
                         rf"\(a CRC-32C mismatch\): truncating to offset 6, dropping {len(data) - position} bytes "
                         rf"and 7 records$", warning[0]), warning[0]
    finally:
        broker.close()
