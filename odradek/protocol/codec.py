"""Turns each (struct, version) of a schema into one encoder and one decoder, built once and cached.

Interpreting a schema field by field on every request costs several microseconds per struct, so each version gets
its own codec: the fields it carries in wire order, its tagged fields and the fields it lacks, resolved here once,
and run by `_codec.Encoder` and `_codec.Decoder` (C; `_codec.c` says what they accept and refuse). Nested structs
get their own codecs, which the parent's call.

Encoders have the signature `enc(obj, w)` and append chunks to the list `w`; a `records` value that is a
`FileRegion` is appended as the object itself (never read), so the frame layer can hand it to sendfile.
An element of an array of structs may be an `Encoded` instead: that struct already encoded for the same version,
whose bytes the encoder copies as they are (a cache of answer parts that stay the same across many answers).
Decoders have the signature `dec(mv, pos) -> (obj, pos)` over a byte memoryview; `records` decode to a zero-copy
slice of it. Truncation and garbage raise `ProtocolError` inside them, a string that is not UTF-8 a
`UnicodeDecodeError`; `run_decoder` is the one place that turns everything into `ProtocolError`.
"""

from __future__ import annotations

from . import _codec
from .errors import ProtocolError
from .schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, NEW, RECORDS, STRING, UINT16, UUID, Array,
                     Primitive, StructSchema)

_ENCODERS: dict = {}
_DECODERS: dict = {}


class Encoded(bytes):
    """One struct value encoded ahead for one exact version (see `frames.pre_encode`), standing for that value as
    an element of an array of structs."""

    __slots__ = ()


_TYPE_CODES = {BOOL: _codec.BOOL, INT8: _codec.INT8, INT16: _codec.INT16, UINT16: _codec.UINT16,
               INT32: _codec.INT32, INT64: _codec.INT64, FLOAT64: _codec.FLOAT64, UUID: _codec.UUID,
               STRING: _codec.STRING, BYTES: _codec.BYTES, RECORDS: _codec.RECORDS}


def _typed(t, build, version: int, flexible: bool, *options) -> tuple:
    """(type code, element type code, struct codec or None) of a field's type; `build(schema, version, flexible,
    *options)` makes the codec of a struct."""
    if isinstance(t, Primitive):
        return _TYPE_CODES[t], 0, None
    if isinstance(t, Array):
        element, _, sub = _typed(t.element, build, version, flexible, *options)
        return _codec.ARRAY, element, sub
    return _codec.STRUCT, 0, build(t._schema, version, flexible, *options)


def _decoded_default(f) -> tuple:
    if f.default is not NEW:
        return f.name, _codec.DEFAULT_VALUE, f.default
    if isinstance(f.type, Array):
        return f.name, _codec.DEFAULT_NEW_LIST, None
    return f.name, _codec.DEFAULT_NEW_STRUCT, f.type


def _default_check(f) -> tuple:
    """How an encoder tells that field `f` holds its default: (check, value)."""
    if f.default is not NEW:
        return _codec.CHECK_EQUALS, f.default
    if isinstance(f.type, Array):
        return _codec.CHECK_EMPTY, None
    return _codec.CHECK_EQUALS, f.type()


def struct_encoder(schema: StructSchema, version: int, flexible: bool, write_tagged: bool = True,
                   strict: bool = True):
    """The `_codec.Encoder` of `schema` at `version`: the fields it carries in wire order, then (flexible versions,
    `write_tagged`) each tagged field away from its default; `strict` refuses a non-ignorable field the version
    lacks that is away from its default."""
    key = (schema, version, flexible, write_tagged, strict)
    fn = _ENCODERS.get(key)
    if fn is None:
        checks, fields, tagged = [], [], []
        for f in schema.fields:
            code, element, sub = _typed(f.type, struct_encoder, version, flexible, write_tagged, strict)
            nullable = version in f.nullable_versions
            if version not in f.versions:
                if strict and not f.ignorable:
                    checks.append((f.name, code, nullable, False, element, sub, 0, *_default_check(f)))
            elif flexible and version in f.tagged_versions:
                if write_tagged:
                    tagged.append((f.name, code, nullable, True, element, sub, f.tag, *_default_check(f)))
            else:
                compact = flexible and (f.flexible_versions is None or version in f.flexible_versions)
                fields.append((f.name, code, nullable, compact, element, sub, 0, _codec.CHECK_EQUALS, None))
        tagged.sort(key=lambda entry: entry[6])
        fn = _ENCODERS[key] = _codec.Encoder(schema.cls, version, flexible, checks, fields, tagged, Encoded)
    return fn


def struct_decoder(schema: StructSchema, version: int, flexible: bool):
    """The `_codec.Decoder` of `schema` at `version`: fields the version lacks (and its tagged fields, until a
    tag sets them) get their defaults, the others are read in wire order."""
    key = (schema, version, flexible)
    fn = _DECODERS.get(key)
    if fn is None:
        defaults, fields, tagged = [], [], []
        for f in schema.fields:
            nullable = version in f.nullable_versions
            if version not in f.versions:
                defaults.append(_decoded_default(f))
            elif flexible and version in f.tagged_versions:
                defaults.append(_decoded_default(f))
                code, element, sub = _typed(f.type, struct_decoder, version, flexible)
                tagged.append((f.tag, f.name, code, nullable, True, element, sub))
            else:
                compact = flexible and (f.flexible_versions is None or version in f.flexible_versions)
                code, element, sub = _typed(f.type, struct_decoder, version, flexible)
                fields.append((f.name, code, nullable, compact, element, sub))
        fn = _DECODERS[key] = _codec.Decoder(schema.cls, flexible, defaults, fields, tagged)
    return fn


def encoder(cls: type, version: int, *, strict: bool = True):
    """The compiled `enc(obj, w)` for message class `cls` at `version`.

    strict: a non-ignorable field set away from its default in a version that lacks it raises ProtocolError, as
    Kafka's generated code does (it catches a request that would silently lose meaning). Responses the broker writes
    are encoded with strict=False: one response object serves every version, and each version carries the fields it
    has, which is what Kafka's broker does by hand field by field.
    """
    s = cls._schema
    return struct_encoder(s, version, version in s.flexible_versions, s.write_tagged, strict)


def decoder(cls: type, version: int):
    """The `dec(mv, pos) -> (obj, pos)` for message class `cls` at `version`."""
    s = cls._schema
    return struct_decoder(s, version, version in s.flexible_versions)


def run_decoder(dec, mv: memoryview, pos: int, what: str):
    """Run a decoder on untrusted bytes: every parse failure comes out as ProtocolError, naming `what`."""
    try:
        return dec(mv, pos)
    except (ProtocolError, ValueError) as e:
        raise ProtocolError(f"malformed {what}: {e}") from None
