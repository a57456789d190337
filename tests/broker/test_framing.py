"""The network shell cuts frames correctly however the bytes arrive: small frames in any fragments, frames split
across the receive buffer's end, and produce frames larger than the receive buffer (which the socket writes straight
into their own buffer), mixed on one connection and answered in order with the records intact; and many connections
at once sending large frames in pieces, cut off in the middle or announcing more than they send, lose nothing that
was acknowledged."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

from odradek.broker.network import RECV_SIZE
from odradek.protocol import RequestHeader, api, decode_response, encode_request
from odradek.records.batch import Record, encode_batch

from .raw_client import RawClient, read_frame
from .test_produce_validation import create, fetch_batches

Produce = api("Produce").request


def produce_frame(topic: str, records: bytes, correlation_id: int) -> bytes:
    header = RequestHeader(api_key=0, api_version=9, correlation_id=correlation_id, client_id="framing-test")
    return encode_request(header, Produce(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)])]))


def api_versions_frame(correlation_id: int) -> bytes:
    return encode_request(RequestHeader(api_key=18, api_version=0, correlation_id=correlation_id,
                                        client_id="framing-test"), api("ApiVersions").request())


def test_frames_in_any_fragments_and_larger_than_the_receive_buffer(broker, topic_name):
    create(broker, topic_name)
    big_value = os.urandom(RECV_SIZE * 3)  # one record, so the batch and its frame are larger than the buffer
    values = [b"small-1", big_value, b"small-2", os.urandom(RECV_SIZE - 200), b"small-3"]
    frames, kinds = [], []
    for index, value in enumerate(values, start=1):
        frames.append(produce_frame(topic_name, encode_batch([Record(0, 1_700_000_000_000, None, value)]), index))
        kinds.append(0)
        frames.append(api_versions_frame(100 + index))  # small frames between and after the large ones
        kinds.append(18)
    stream = b"".join(frames)
    client = RawClient(broker.port)
    try:
        client.sock.settimeout(30)
        rng = random.Random(7)
        pos = 0
        while pos < len(stream):  # fragments from one byte (splitting size prefixes) to beyond the buffer size
            step = rng.choice([1, 3, 4, 5, 61, 1000, RECV_SIZE - 1, RECV_SIZE + 17])
            client.sock.sendall(stream[pos:pos + step])
            pos += step
        for index, kind in enumerate(kinds):
            correlation_id, answer = decode_response(kind, 9 if kind == 0 else 0, read_frame(client.sock))
            expected = index // 2 + 1 if kind == 0 else 100 + index // 2 + 1
            assert correlation_id == expected
            if kind == 0:
                assert answer.responses[0].partition_responses[0].error_code == 0
        records = []
        offset = 0
        while offset < len(values):
            batches = fetch_batches(client, topic_name, offset)
            records += [record.value for _, batch_records in batches for record in batch_records]
            offset += len(batches)
        assert records == values
    finally:
        client.close()


def test_many_connections_sending_large_frames_in_pieces_cut_off_or_lying_lose_nothing_acknowledged(broker,
                                                                                                     topic_name):
    """Six connections at a time for 8 s, each sending a Produce of up to 1 MB in random pieces (some with pauses),
    or cutting such a frame off and closing, or announcing more bytes than it sends and closing: every record an
    answer acknowledged reads back intact, batches over max.message.bytes are refused with MESSAGE_TOO_LARGE and
    nothing else, and the broker keeps serving."""
    create(broker, topic_name)
    acknowledged, refusals, failures = [], [], []
    lock = threading.Lock()
    deadline = time.monotonic() + 8

    def send_large_frames(seed: int) -> None:
        rng = random.Random(seed)
        correlation_id = 0
        while time.monotonic() < deadline:
            correlation_id += 1
            kind = rng.choices(["whole", "cut", "lying"], [6, 2, 1])[0]
            values = [os.urandom(rng.randrange(1, 150_000)) for _ in range(rng.randrange(1, 9))]
            frame = produce_frame(topic_name, encode_batch([Record(index, 1_700_000_000_000, None, value)
                                                            for index, value in enumerate(values)]), correlation_id)
            if kind == "lying":
                frame = struct.pack(">i", len(frame) - 4 + rng.randrange(1, 500_000)) + frame[4:]
            end = len(frame) if kind == "whole" else rng.randrange(4, len(frame))
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
            try:
                position = 0
                while position < end:
                    step = rng.choice([1, 4, 5, 1000, 65536, RECV_SIZE - 1, RECV_SIZE + 1, 700_000])
                    sock.sendall(frame[position:min(position + step, end)])
                    position = min(position + step, end)
                    if rng.random() < 0.05:
                        time.sleep(rng.random() * 0.05)
                if kind == "whole":
                    _, answer = decode_response(0, 9, read_frame(sock))
                    partition = answer.responses[0].partition_responses[0]
                    with lock:
                        if partition.error_code == 0:
                            acknowledged.append((partition.base_offset, values))
                        else:
                            refusals.append(partition.error_code)
            except Exception as exc:  # reported by the assertion below
                failures.append(repr(exc))
            finally:
                sock.close()

    threads = [threading.Thread(target=send_large_frames, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert acknowledged and set(refusals) <= {10}  # MESSAGE_TOO_LARGE: a batch over max.message.bytes
    expected = {base + index: value for base, values in acknowledged for index, value in enumerate(values)}
    client = RawClient(broker.port)
    try:
        client.sock.settimeout(30)
        read = {}
        offset = 0
        while offset < max(expected) + 1:
            batches = fetch_batches(client, topic_name, offset)
            for header, batch_records in batches:
                for record in batch_records:
                    read[header.base_offset + record.offset_delta] = record.value
                offset = header.last_offset + 1
    finally:
        client.close()
    assert read == expected


def minor_faults(pid: int) -> int:
    """The pages process `pid` has faulted in without reading a disk (minflt, /proc/<pid>/stat's 10th field)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def test_large_frames_are_received_into_the_memory_those_before_them_freed(broker, topic_name):
    """`odradek serve` keeps the memory large frames free for the next ones (_frame_buffer.keep_freed_frames): 1 MB
    Produce frames (under max.message.bytes), eight in flight at a time as a batching producer pipelines them, fault
    in under a tenth of their pages (0-245 of 11,760 in six rounds), where glibc's defaults, which give back to the
    kernel what lies free past 2 MB, had them fault in 2,286-3,445."""
    create(broker, topic_name)
    records = encode_batch([Record(0, 0, None, os.urandom(1_000_000))])
    requests = [dict(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic_name, partition_data=[Produce.PartitionProduceData(index=0, records=records)])])] * 8
    client = RawClient(broker.port)
    rounds = 6
    for measured in (False, True):  # the first round grows the heap to what the frames need
        before = minor_faults(broker.process.pid)
        for _ in range(rounds if measured else 1):
            answers = client.pipeline("Produce", 9, requests)
            assert [answer.responses[0].partition_responses[0].error_code for answer in answers] == [0] * 8
    assert minor_faults(broker.process.pid) - before < rounds * 8 * 245 // 10
    client.close()
