"""Codecs in the framings real clients send: xerial and raw snappy, LZ4 frames, zstd with and without content size."""

from __future__ import annotations

import gzip
import struct
import threading

import cramjam
import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from odradek.errors import ErrorCode, KafkaError
from odradek.records.compression import (GZIP, LZ4, SNAPPY, XERIAL_MAGIC, ZSTD, compress, decompress,
                                         decompressed_view)

PAYLOAD = b"".join(b'{"id": %d, "name": "record-%d"}' % (index, index % 7) for index in range(5000))


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=100_000), codec=st.sampled_from([0, GZIP, SNAPPY, LZ4, ZSTD]))
def test_round_trip(data, codec):
    assert decompress(codec, compress(codec, data)) == data


def xerial_frame(data: bytes, block_size: int) -> bytes:
    """Xerial framing as the Java client's SnappyOutputStream writes it, built here independently."""
    out = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + block_size]))
        out += struct.pack(">i", len(block)) + block
    return out


def test_xerial_snappy_multi_block():
    framed = xerial_frame(PAYLOAD, 32 * 1024)
    assert len(PAYLOAD) > 3 * 32 * 1024
    assert decompress(SNAPPY, framed) == PAYLOAD
    assert compress(SNAPPY, PAYLOAD).startswith(XERIAL_MAGIC)


def test_raw_snappy_as_librdkafka_sends():
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(PAYLOAD))) == PAYLOAD


def test_truncated_xerial_block():
    framed = xerial_frame(PAYLOAD, 32 * 1024)
    with pytest.raises(KafkaError) as info:
        decompress(SNAPPY, framed[:-10])
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


def test_zstd_with_and_without_content_size():
    with_size = zstandard.ZstdCompressor(write_content_size=True).compress(PAYLOAD)
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    streamed = zstandard.ZstdCompressor().compressobj()
    streamed_frame = streamed.compress(PAYLOAD) + streamed.flush()
    for frame in (with_size, without_size, streamed_frame):
        assert decompress(ZSTD, frame) == PAYLOAD
    assert zstandard.get_frame_parameters(without_size).content_size == zstandard.CONTENTSIZE_UNKNOWN


def test_lz4_frame_written_with_independent_blocks():
    frame = compress(LZ4, PAYLOAD)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20  # FLG block-independence bit
    assert bytes(cramjam.lz4.decompress(frame)) == PAYLOAD


def test_gzip_member_from_the_stdlib():
    assert decompress(GZIP, gzip.compress(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("garbage", [b"", b"not compressed at all", b"\x82SNAPPY\x00\0\0\0\1\0\0\0\1\0\0\0\x50xx"])
def test_garbage_is_corrupt_message(codec, garbage):
    if codec == SNAPPY and garbage == b"":
        garbage = b"\xff\xff\xff"
    with pytest.raises(KafkaError) as info:
        decompress(codec, garbage)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codecs(codec):
    for operation in (compress, decompress):
        with pytest.raises(KafkaError) as info:
            operation(codec, b"x")
        assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


ZEROS = bytes(3_000_000)  # inflates far past the first output buffer: the buffer has to grow


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_high_ratio_payload_decodes_whole(codec):
    compressed = compress(codec, ZEROS)
    assert len(compressed) * 20 < len(ZEROS)
    assert decompress(codec, memoryview(compressed)) == ZEROS
    assert decompress(codec, compressed, limit=len(ZEROS)) == ZEROS


FRAMINGS = ["gzip", "xerial", "raw-snappy", "lz4", "zstd", "zstd-no-size"]


def framed(framing: str, data: bytes) -> tuple[int, bytes]:
    """(codec, `data` compressed in the framing a client sends)."""
    return {
        "gzip": lambda: (GZIP, compress(GZIP, data)),
        "xerial": lambda: (SNAPPY, xerial_frame(data, 32 * 1024)),
        "raw-snappy": lambda: (SNAPPY, bytes(cramjam.snappy.compress_raw(data))),
        "lz4": lambda: (LZ4, compress(LZ4, data)),
        "zstd": lambda: (ZSTD, zstandard.ZstdCompressor(write_content_size=True).compress(data)),
        "zstd-no-size": lambda: (ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(data)),
    }[framing]()


@pytest.mark.parametrize("decode", [decompress, decompressed_view])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_payload_inflating_past_the_limit_is_refused(framing, decode):
    codec, frame = framed(framing, ZEROS)
    with pytest.raises(KafkaError) as info:
        decode(codec, frame, limit=len(ZEROS) - 1)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert f"more than {len(ZEROS) - 1} bytes" in info.value.message


def test_lz4_frame_of_a_high_ratio_decodes_in_one_pass(monkeypatch):
    """An LZ4 frame's block headers bound what it decodes to, so a payload far past the typical ratio (here 3 MB of
    zeros from a few KB) is decoded once, not again for every doubling of the output buffer; still whole."""
    calls = []
    decode = cramjam.lz4.decompress_into

    def counted(data, out):
        calls.append(len(out))
        return decode(data, out)

    compressed = compress(LZ4, ZEROS)
    monkeypatch.setattr(cramjam.lz4, "decompress_into", counted)
    assert decompress(LZ4, compressed) == ZEROS
    assert len(calls) == 1 and calls[0] <= len(ZEROS) + (64 << 10) + 1


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_view_holds_just_its_payload_after_a_larger_one_grew_the_kept_buffer(framing):
    """`decompressed_view` decodes into a buffer its thread keeps: after a large payload, a small one's view is that
    payload alone, whatever the buffer held before."""
    large = PAYLOAD * 4
    codec, frame = framed(framing, large)
    assert decompressed_view(codec, frame) == large
    small = b'{"id": 1}' * 3
    codec, frame = framed(framing, small)
    view = decompressed_view(codec, memoryview(frame))
    assert len(view) == len(small) and view == small
    assert decompress(codec, frame) == small


@pytest.mark.parametrize("decode", [decompress, decompressed_view])
def test_a_snappy_block_stating_another_length_is_corrupt(decode):
    block = bytearray(cramjam.snappy.compress_raw(b"abc" * 300))
    assert block[:2] == b"\x84\x07"  # 900 as a varint
    block[0] = 0x85  # 901
    for frame in (bytes(block), XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(block)) + bytes(block)):
        with pytest.raises(KafkaError) as info:
            decode(SNAPPY, frame)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE


def test_threads_decoding_at_once_each_read_their_own_payload():
    payloads = [bytes([index]) * 300_000 + PAYLOAD for index in range(4)]
    frames = [compress(LZ4, payload) for payload in payloads]
    start = threading.Barrier(len(frames))
    wrong = []

    def decode(index: int) -> None:
        start.wait()
        for _ in range(30):
            if decompressed_view(LZ4, frames[index]) != payloads[index]:
                wrong.append(index)

    threads = [threading.Thread(target=decode, args=(index,)) for index in range(len(frames))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_decoding_into_the_kept_buffer_faults_in_no_new_pages():
    """What the kept buffer is for: once it has grown, decoding a 900 KB lz4 batch takes no fresh memory (a new
    buffer and a copy each time faulted in about 450 pages per batch here)."""
    records = b"".join(b"%016x" % index + b"x" * 84 for index in range(9000))
    frame = compress(LZ4, records)
    decompressed_view(LZ4, frame)
    before = _minor_faults()
    for _ in range(20):
        assert len(decompressed_view(LZ4, frame)) == len(records)
    assert _minor_faults() - before < 20


def _minor_faults() -> int:
    with open("/proc/self/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])
