"""records._crc32c, the batch checksum read in place, against google_crc32c (an independent implementation) and
Kafka's published check value: every length around the folding loop's and the three-stream loop's block sizes, every
alignment, and the slower loops that machines without AVX-512 or SSE4.2 take."""

import os

import google_crc32c
import pytest

from odradek.records import _crc32c
from odradek.errors import KafkaError
from odradek.records.batch import Record, batch_crc, encode_batch, validate_batches

DATA = os.urandom(3 * 8192 * 2 + 3 * 256 + 64)
LENGTHS = sorted({*range(0, 300), *range(760, 790), *range(1016, 1300), 1535, 1536, 1537, 4095, 4096, 8191, 8192,
                  8193, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 3 * 256 + 7, len(DATA) - 8})
WIDE = ("avx512f", "avx512vl", "vpclmulqdq", "pclmulqdq", "sse4_2")  # /proc/cpuinfo's names


def cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as cpuinfo:
        return set(next(line for line in cpuinfo if line.startswith("flags")).split(":", 1)[1].split())


@pytest.mark.parametrize("check", [_crc32c.value, _crc32c.portable_value, _crc32c.sse42_value],
                         ids=["value", "portable_value", "sse42_value"])
def test_every_length_and_alignment_matches_the_reference(check):
    if check is _crc32c.sse42_value and "sse4_2" not in cpu_flags():
        pytest.skip("no SSE4.2 on this CPU")
    for length in LENGTHS:
        for offset in range(8):
            piece = DATA[offset:offset + length]
            assert check(piece) == google_crc32c.value(piece), (length, offset)


def test_the_fastest_loop_this_cpu_allows_is_the_one_used():
    flags = cpu_flags()
    expected = "vpclmulqdq" if flags.issuperset(WIDE) else "sse4.2" if "sse4_2" in flags else "portable"
    assert _crc32c.implementation == expected


def test_the_standard_check_value():
    assert _crc32c.value(b"123456789") == 0xE3069283  # CRC-32C's check value (RFC 3720, iSCSI)


def test_buffers_are_read_in_place_whatever_holds_them():
    piece = DATA[5:70005]
    expected = google_crc32c.value(piece)
    assert _crc32c.value(bytearray(piece)) == expected
    assert _crc32c.value(memoryview(b"xx" + piece)[2:]) == expected
    with pytest.raises(TypeError):
        _crc32c.value("not bytes")


def test_a_batch_in_a_bytearray_validates_and_one_flipped_byte_fails():
    records = [Record(offset_delta=i, timestamp=1_700_000_000_000, key=None, value=b"v" * 90) for i in range(100)]
    batch = bytearray(encode_batch(records, base_offset=0))
    assert batch_crc(batch, 0, len(batch)) == google_crc32c.value(bytes(batch[21:]))
    validate_batches(memoryview(batch))
    batch[500] ^= 1
    with pytest.raises(KafkaError, match="CRC"):
        validate_batches(memoryview(batch))
