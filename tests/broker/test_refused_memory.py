"""A refused request gives its memory back when it is answered. A Produce refused for its partition, whether at once
(an unknown partition, records too large) or by the record checks off the loop (keyless records for a compacted
topic), and a connection closed for a malformed frame leave nothing that holds their frame's buffer for the cyclic
collector to find later: the broker's peak memory stays within a couple of frames of where it began, however many
16 MB requests are refused one after another (before, each held its 16 MB until a collection came, dozens of
requests later)."""

from __future__ import annotations

import socket
import struct

import pytest

from odradek.embedded import BrokerProcess
from odradek.errors import ErrorCode
from odradek.protocol import api
from odradek.records.batch import Record, encode_batch

from .raw_client import RawClient
from .test_produce_validation import create

Produce = api("Produce").request
FRAME_BYTES = 16 << 20
REQUESTS = 10


@pytest.fixture
def broker(tmp_path):
    """A broker process of each test's own (not the module's shared one): its peak RSS holds no other test's frames."""
    with BrokerProcess(tmp_path / "data") as process:
        yield process


def peak_rss_bytes(pid: int) -> int:
    """The most memory process `pid` has had resident (VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def produce_error(client: RawClient, topic: str, index: int, records: bytes) -> int:
    answer = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=index,
                                                                                         records=records)])])
    return answer.responses[0].partition_responses[0].error_code


def large_batch() -> bytes:
    return encode_batch([Record(0, 1_700_000_000_000, None, bytes(FRAME_BYTES))])


def keyless_batch() -> bytes:
    """More records than the loop checks itself: a worker process refuses them, answered through a task."""
    return encode_batch([Record(i, 1_700_000_000_000, None, bytes(FRAME_BYTES // 300_000)) for i in range(300_000)])


@pytest.mark.parametrize("topic, index, batch, code", [
    ("plain", 7, large_batch, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("plain", 0, large_batch, ErrorCode.MESSAGE_TOO_LARGE),
    ("compacted", 0, keyless_batch, ErrorCode.INVALID_RECORD)])
def test_refused_produce_requests_free_their_frames(broker, topic, index, batch, code):
    create(broker, "plain")
    create(broker, "compacted", {"cleanup.policy": "compact", "max.message.bytes": str(2 * FRAME_BYTES)})
    records = batch()
    client = RawClient(broker.port)
    client.sock.settimeout(60)
    assert produce_error(client, topic, index, records) == code  # the heap grows to what one such request needs
    started = peak_rss_bytes(broker.process.pid)
    for _ in range(REQUESTS):
        assert produce_error(client, topic, index, records) == code
    assert peak_rss_bytes(broker.process.pid) - started < 2 * FRAME_BYTES
    client.close()


def test_connections_closed_for_malformed_frames_free_them(broker):
    create(broker, "plain")
    header = struct.pack(">hhi", 0, 9, 1)  # Produce v9, then bytes that are no client id's length
    frame = struct.pack(">i", FRAME_BYTES) + header + b"\xff" * (FRAME_BYTES - len(header))

    def closed_after(frame: bytes) -> None:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as sock:
            sock.sendall(frame)
            assert sock.recv(1) == b""  # closed with no answer

    closed_after(frame)
    started = peak_rss_bytes(broker.process.pid)
    for _ in range(REQUESTS):
        closed_after(frame)
    assert peak_rss_bytes(broker.process.pid) - started < 2 * FRAME_BYTES
    assert "malformed request" in broker.log_tail(5)
    client = RawClient(broker.port)  # and the broker serves on
    assert produce_error(client, "plain", 0, encode_batch([Record(0, 1_700_000_000_000, None, b"v")])) == 0
    client.close()
