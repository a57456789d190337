"""Kafka's variable-length integers: unsigned varints (compact lengths, tag numbers) and zigzag varints (signed,
used inside record batches).  Kept apart from the codec so the records layer uses the same few lines.

Readers take (buffer, position) and return (value, new position); they raise ProtocolError on a varint longer
than its type allows and IndexError on a truncated buffer (the codec maps that to ProtocolError).
"""

from __future__ import annotations

from .errors import ProtocolError

_ONE_BYTE = [bytes((i,)) for i in range(128)]


def encode_uvarint(n: int) -> bytes:
    if 0 <= n < 128:
        return _ONE_BYTE[n]
    if n < 0:
        raise ValueError(f"unsigned varint cannot hold {n}")
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    value = shift = 0
    for i in range(pos, pos + max_bytes):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    raise ProtocolError(f"varint longer than {max_bytes} bytes at offset {pos}")


def encode_varint(n: int) -> bytes:
    """Zigzag (signed) varint of a 64-bit integer."""
    return encode_uvarint((n << 1) ^ (n >> 63))


def read_varint(buf, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos, 10)
    return (raw >> 1) ^ -(raw & 1), pos
