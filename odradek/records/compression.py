"""The record-batch codecs (attribute bits 0-2) in the exact framings real Kafka clients send.

gzip: a gzip member. snappy: librdkafka sends a raw snappy block, the Java and kafka-python clients xerial framing
(magic `82 'SNAPPY' 00`, version and compatible version int32, then int32-length-prefixed raw blocks); we read both
and write xerial, which every client reads. lz4: an LZ4 frame, written with independent blocks as Kafka's Java client
writes it. zstd: one frame, read with or without a content size (librdkafka omits it). cramjam does the work in C;
the xerial wrapper is unwrapped here by hand. Malformed input raises CORRUPT_MESSAGE, codecs 5-7
UNSUPPORTED_COMPRESSION_TYPE, as Kafka answers a producer.

Decompression is bounded: a payload that would inflate past MAX_DECOMPRESSED_BYTES is refused with CORRUPT_MESSAGE
before that much memory is taken (a 1 MB zstd frame can claim gigabytes). The output buffer starts near a typical
ratio and doubles, so an ordinary batch decodes in one pass and a bomb stops at the cap; each doubling decodes again
from the start. An LZ4 frame states its block size and every block's length up front, so its decoded size is
bounded (blocks times block size) by reading a few block headers, and a highly compressible one (1 KiB records of
repeated bytes: 34 to 1) decodes in one pass instead of four.

`decompress` gives bytes of their own, in a new buffer each time. The produce path's checks only read a batch's
records once, so `decompressed_view` decodes into a buffer the calling thread keeps (up to SCRATCH_KEEP_BYTES) and
gives a view of it, valid until that thread's next call: a 1 MB lz4 batch otherwise cost a zeroed 1 MB buffer and a
1 MB copy, two fresh mappings whose pages fault in one at a time (2.3 pages faulted per page of records under the
suite's lz4 producers, 4.0 with zstd, 0.3 without a codec).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

import cramjam

from odradek.errors import ErrorCode, KafkaError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
XERIAL_BLOCK_SIZE = 32 * 1024  # the block size of Java's SnappyOutputStream

MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
_FIRST_BUFFER_BYTES = 64 * 1024
_TYPICAL_RATIO = 8
_BUFFER_FULL = "failed to write whole buffer"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_BYTES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}  # by the frame descriptor's block size id
_LZ4_MAX_BLOCKS = 256  # block headers read for a bound, at most (64 KiB blocks: 16 MB)
SCRATCH_KEEP_BYTES = 8 << 20  # the largest output buffer a thread keeps for its next `decompressed_view`
_kept = threading.local()  # .buffer: the thread's output buffer for `decompressed_view`


def _check_codec(codec: int) -> None:
    if codec not in CODEC_NAMES:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Unknown compression codec {codec}")


def compress(codec: int, data) -> bytes:
    """`data` compressed with `codec` in the framing Kafka's Java client writes."""
    _check_codec(codec)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    return bytes(data)


def decompress(codec: int, data, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The bytes a client compressed with `codec`; KafkaError(CORRUPT_MESSAGE) if they do not decode or would come
    to more than `limit` bytes."""
    return bytes(_decoded(codec, data, limit, bytearray)) if codec else bytes(data)


def decompressed_view(codec: int, data, limit: int = MAX_DECOMPRESSED_BYTES) -> memoryview:
    """`decompress`, as a view of a buffer the calling thread keeps: valid until the thread's next call (for a
    reader done with it by then)."""
    return _decoded(codec, data, limit, _kept_buffer) if codec else memoryview(data)


def _kept_buffer(size: int) -> bytearray:
    """The calling thread's kept buffer, replaced by a larger one if it holds fewer than `size` bytes (kept in turn
    if it is at most SCRATCH_KEEP_BYTES)."""
    buffer = getattr(_kept, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = bytearray(size)
        if size <= SCRATCH_KEEP_BYTES:
            _kept.buffer = buffer
    return buffer


def _decoded(codec: int, data, limit: int, buffer_of: Callable[[int], bytearray]) -> memoryview:
    """The decompressed bytes, in a buffer of at least the size asked of `buffer_of`."""
    _check_codec(codec)
    try:
        if codec == GZIP:
            return _bounded(cramjam.gzip.decompress_into, data, limit, codec, buffer_of)
        if codec == SNAPPY:
            if bytes(data[:len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _xerial_decompress(data, limit, buffer_of)
            return _snappy_raw_decompress(data, limit, buffer_of)
        if codec == LZ4:
            return _bounded(cramjam.lz4.decompress_into, data, limit, codec, buffer_of, _lz4_frame_bound(data))
        return _bounded(cramjam.zstd.decompress_into, data, limit, codec, buffer_of)
    except cramjam.DecompressionError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]} payload does not decode: {exc}") from None


class DecompressedTooLarge(KafkaError):
    """A payload that decompresses to more than the limit asked for: CORRUPT_MESSAGE, unless the caller (which asked
    for a small limit to decide where to do the work) tries again with a larger one."""

    def __init__(self, codec: int, limit: int):
        super().__init__(ErrorCode.CORRUPT_MESSAGE,
                         f"{CODEC_NAMES[codec]} payload decompresses to more than {limit} bytes")


def _too_large(codec: int, limit: int) -> KafkaError:
    return DecompressedTooLarge(codec, limit)


def _bounded(decompress_into, data, limit: int, codec: int, buffer_of: Callable[[int], bytearray],
             most: int | None = None) -> memoryview:
    """decompress_into a buffer that doubles from a typical ratio (or `most` + 1 bytes, if the payload is known to
    decode to at most `most`) up to `limit` + 1 bytes (all of a larger one `buffer_of` gives, within that); a payload
    that fills even that is over the limit. cramjam reports a full buffer as "failed to write whole buffer"."""
    first = max(_FIRST_BUFFER_BYTES, _TYPICAL_RATIO * len(data)) if most is None else most + 1
    size = min(limit + 1, first)
    while True:
        out = buffer_of(size)
        size = min(limit + 1, len(out))
        view = memoryview(out)[:size]
        try:
            written = decompress_into(data, view)
        except cramjam.DecompressionError as exc:
            if _BUFFER_FULL not in str(exc):
                raise
            written = size
        if written < size:
            return view[:written]
        if size > limit:
            raise _too_large(codec, limit)
        size = min(limit + 1, size * 2)


def _lz4_frame_bound(data) -> int | None:
    """At most how many bytes the LZ4 frame `data` decodes to (its blocks times its block size), or None if that
    takes more than _LZ4_MAX_BLOCKS block headers to tell or the frame does not parse (the decoder then says why)."""
    view = memoryview(data)
    if len(view) < 7 or view[:4] != _LZ4_MAGIC or (view[5] >> 4) & 7 not in _LZ4_BLOCK_BYTES:
        return None
    flags = view[4]
    position = 7 + 8 * bool(flags & 0x08) + 4 * bool(flags & 0x01)  # after the content size and dictionary id
    block_checksum = 4 * bool(flags & 0x10)
    for blocks in range(_LZ4_MAX_BLOCKS + 1):
        if position + 4 > len(view):
            return None
        size = int.from_bytes(view[position:position + 4], "little") & 0x7FFFFFFF  # high bit: stored uncompressed
        if size == 0:  # the end mark
            return blocks * _LZ4_BLOCK_BYTES[(view[5] >> 4) & 7]
        position += 4 + size + block_checksum
    return None


def _snappy_raw_decompress(block, limit: int, buffer_of: Callable[[int], bytearray]) -> memoryview:
    """A raw snappy block states its length up front, so the limit is checked before decoding."""
    size = cramjam.snappy.decompress_raw_len(block)
    if size > limit:
        raise _too_large(SNAPPY, limit)
    view = memoryview(buffer_of(size))[:size]
    cramjam.snappy.decompress_raw_into(block, view)  # a block that decodes to another length than it states raises
    return view


def _xerial_compress(data) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE])
        out += _XERIAL_BLOCK_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def _xerial_decompress(data, limit: int, buffer_of: Callable[[int], bytearray]) -> memoryview:
    """The xerial framing's raw blocks, each stating its decoded length: summed (and checked against the limit)
    first, then decoded one after another into one buffer."""
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Truncated xerial snappy header")
    blocks = []
    total = 0
    pos = _XERIAL_HEADER.size
    while pos < len(view):
        if pos + 4 > len(view):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Truncated xerial snappy block length")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Xerial snappy block overruns its payload")
        block = view[pos:pos + length]
        size = cramjam.snappy.decompress_raw_len(block)
        total += size
        if total > limit:
            raise _too_large(SNAPPY, limit)
        blocks.append((block, size))
        pos += length
    out = memoryview(buffer_of(total))[:total]
    at = 0
    for block, size in blocks:
        cramjam.snappy.decompress_raw_into(block, out[at:at + size])
        at += size
    return out
