"""Test support: hypothesis strategies derived from our schemas, and the bridges to the two oracles.

Values are drawn only for the fields a version has, so one strategy serves every (message, version).  Objects are
compared as plain nested dicts over our schema's fields for that version, which is the one shape both our
classes and kafka-python's (same snake_case names, transcribed from the same JSON) can be reduced to.
"""

from __future__ import annotations

import io
import uuid

import kafka.protocol.admin  # noqa: F401 - importing registers the message classes
import kafka.protocol.consumer  # noqa: F401
import kafka.protocol.metadata  # noqa: F401
import kafka.protocol.producer  # noqa: F401
import kafka.protocol.sasl  # noqa: F401
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField
from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.errors import ErrorCode
from odradek.protocol.schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UUID,
                                     ZERO_UUID, Array)

_INTS = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}


def _primitive(t):
    if t in _INTS:
        bits = _INTS[t]
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if t is UINT16:
        return st.integers(0, 0xFFFF)
    if t is BOOL:
        return st.booleans()
    if t is FLOAT64:
        return st.floats(allow_nan=False)
    if t is STRING:
        return st.text(max_size=6)
    if t is BYTES:
        return st.binary(max_size=8)
    if t is RECORDS:
        return st.binary(max_size=12)
    if t is UUID:
        return st.uuids()
    raise AssertionError(t)


def value_strategy(t, nullable: bool, version: int, kio_safe: bool, name: str = ""):
    if kio_safe and name.endswith("error_code") and t is INT16:
        s = st.sampled_from([int(c) for c in ErrorCode])
    elif kio_safe and name.endswith("_ms") and t in (INT32, INT64):
        s = st.integers(0, 1 << 30)  # kio maps *_ms fields to timedelta
    elif isinstance(t, Array):
        s = st.lists(value_strategy(t.element, False, version, kio_safe), max_size=3)
    elif isinstance(t, type):
        s = struct_strategy(t, version, kio_safe=kio_safe)
    else:
        s = _primitive(t)
    return st.one_of(st.none(), s) if nullable else s


def struct_strategy(cls, version: int, *, skip_tagged: bool = False, kio_safe: bool = False):
    """Instances of `cls` with random values in every field `version` has (others keep their defaults)."""
    kwargs = {}
    for f in cls._schema.fields:
        if version not in f.versions or (skip_tagged and version in f.tagged_versions):
            continue
        kwargs[f.name] = value_strategy(f.type, version in f.nullable_versions, version, kio_safe, f.name)
    return st.builds(cls, **kwargs)


def message_strategy(cls, version: int, kio_safe: bool = False):
    schema = cls._schema
    return struct_strategy(cls, version, skip_tagged=not schema.write_tagged, kio_safe=kio_safe)


def plain(obj, cls, version: int, skip_tagged: bool = False):
    """`obj` (ours or kafka-python's) as nested dicts over the fields `cls` has at `version`."""
    out = {}
    defaults = cls()
    for f in cls._schema.fields:
        if version not in f.versions or (skip_tagged and version in f.tagged_versions):
            continue
        value = getattr(obj, f.name, _MISSING)
        if f.name.endswith("authorized_operations"):
            value = _from_bitfield(getattr(obj, "authorized_operations") if value is _MISSING else value)
        if value is None and f.default is not None and version in f.tagged_versions:
            value = getattr(defaults, f.name)  # kafka-python leaves absent tagged fields unset
        out[f.name] = _plain_value(value, f.type, version)
    return out


_MISSING = object()


def _from_bitfield(value):
    """kafka-python renames *authorized_operations to `authorized_operations` and decodes it to a set of bits."""
    if value is None:
        return -2147483648
    if isinstance(value, set):
        return int.from_bytes(BitField.to_32_bit_field(value).to_bytes(4, "big"), "big", signed=True)
    return value


def _plain_value(value, t, version):
    if value is None:
        return ZERO_UUID if t is UUID else None
    if isinstance(t, Array):
        return [_plain_value(v, t.element, version) for v in value]
    if isinstance(t, type):
        return plain(value, t, version)
    if t in (BYTES, RECORDS):
        return bytes(value)
    if t is UUID and not isinstance(value, uuid.UUID):
        return uuid.UUID(bytes=bytes(value))
    return value


# kafka-python ------------------------------------------------------------------------------------------------

def _kafka_python_classes():
    found = {}
    pending = [ApiMessage]
    while pending:
        c = pending.pop()
        for sub in c.__subclasses__():
            if "_json" in sub.__dict__:
                found[sub.API_KEY, sub.type] = sub
            pending.append(sub)
    return found


KAFKA_PYTHON = _kafka_python_classes()


def kafka_python_class(api_key: int, kind: str):
    return KAFKA_PYTHON.get((api_key, kind))


def to_kafka_python(obj, kp_cls, version: int, top: bool = True):
    kwargs = {}
    kp_fields = kp_cls._struct.fields
    for f in type(obj)._schema.fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        name = f.name if f.name in kp_fields else "authorized_operations"
        if getattr(kp_fields[name], "_type", None) is BitField:
            kwargs[name] = None if value == -2147483648 else BitField.from_32_bit_field(value & 0xFFFFFFFF)
        else:
            kwargs[name] = _to_kp_value(value, f.type, kp_cls, version)
    return kp_cls(version=version, **kwargs) if top else kp_cls(**kwargs)


def _to_kp_value(value, t, kp_parent, version):
    if value is None:
        return None
    if isinstance(t, Array):
        return [_to_kp_value(v, t.element, kp_parent, version) for v in value]
    if isinstance(t, type):
        return to_kafka_python(value, getattr(kp_parent, t.__name__), version, top=False)
    if t in (BYTES, RECORDS):
        return bytes(value)
    return value


# kio ---------------------------------------------------------------------------------------------------------

def kio_class(api_key: int, version: int, kind: str):
    entity = EntityType.request if kind == "request" else EntityType.response
    module = load_payload_module(api_key, version, entity)
    return next(v for k, v in vars(module).items()
                if isinstance(v, type) and getattr(v, "__type__", None) is entity and k.endswith(kind.title()))


def kio_roundtrip(kio_cls, data: bytes) -> bytes:
    """kio decodes `data` (raising on anything it cannot read) and encodes what it read."""
    entity, end = entity_reader(kio_cls)(memoryview(data), 0)
    assert end == len(data), "kio did not consume the whole message"
    buf = io.BytesIO()
    entity_writer(kio_cls)(buf, entity)
    return buf.getvalue()
