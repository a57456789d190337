"""Codecs in the framings real clients send: xerial and raw snappy, LZ4 frames, zstd with and without content size."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from odradek.errors import ErrorCode, KafkaError
from odradek.records.compression import GZIP, LZ4, SNAPPY, ZSTD, XERIAL_MAGIC, compress, decompress

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


@pytest.mark.parametrize("framing", ["gzip", "xerial", "raw-snappy", "lz4", "zstd", "zstd-no-size"])
def test_payload_inflating_past_the_limit_is_refused(framing):
    codec, frame = {
        "gzip": (GZIP, compress(GZIP, ZEROS)),
        "xerial": (SNAPPY, compress(SNAPPY, ZEROS)),
        "raw-snappy": (SNAPPY, bytes(cramjam.snappy.compress_raw(ZEROS))),
        "lz4": (LZ4, compress(LZ4, ZEROS)),
        "zstd": (ZSTD, zstandard.ZstdCompressor(write_content_size=True).compress(ZEROS)),
        "zstd-no-size": (ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(ZEROS)),
    }[framing]
    with pytest.raises(KafkaError) as info:
        decompress(codec, frame, limit=len(ZEROS) - 1)
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
