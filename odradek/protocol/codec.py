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
`UnicodeDecodeError`; `Decoder.run` (behind `run_decoder`, and the C path of `frames.decode_request`) is the one
place that turns everything into `ProtocolError`.
"""

from __future__ import annotations

from . import _codec
from .schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UUID, Array,
                     Primitive, StructSchema, default_kind)

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


def _layout(schema: StructSchema, version: int, flexible: bool, build, options: tuple, *, absent_kept,
            with_tagged: bool, compared: bool) -> tuple[list, list, list]:
    """A codec's three lists of fields at `version`: those it lacks (the ones `absent_kept(field)` keeps), those
    it carries in wire order, and (`with_tagged`) its tagged ones in tag order. Each entry is (name, type code,
    nullable, compact, element type code, struct codec or None, tag, how its default is made, default)."""
    lists: tuple[list, list, list] = ([], [], [])
    for f in schema.fields:
        if version not in f.versions:
            if not absent_kept(f):
                continue
            which, compact, tag = 0, False, 0
        elif flexible and version in f.tagged_versions:
            if not with_tagged:
                continue
            which, compact, tag = 2, True, f.tag
        else:
            which, compact, tag = 1, flexible and (f.flexible_versions is None or version in f.flexible_versions), 0
        code, element, sub = _typed(f.type, build, version, flexible, *options)
        lists[which].append((f.name, code, version in f.nullable_versions, compact, element, sub, tag,
                             *default_kind(f, compared)))
    lists[2].sort(key=lambda entry: entry[6])
    return lists


def struct_encoder(schema: StructSchema, version: int, flexible: bool, write_tagged: bool = True,
                   strict: bool = True):
    """The `_codec.Encoder` of `schema` at `version`: the fields it carries in wire order, then (flexible versions,
    `write_tagged`) each tagged field away from its default; `strict` refuses a non-ignorable field the version
    lacks that is away from its default."""
    key = (schema, version, flexible, write_tagged, strict)
    fn = _ENCODERS.get(key)
    if fn is None:
        absent, fields, tagged = _layout(schema, version, flexible, struct_encoder, (write_tagged, strict),
                                         absent_kept=lambda f: strict and not f.ignorable, with_tagged=write_tagged,
                                         compared=True)
        fn = _ENCODERS[key] = _codec.Encoder(schema.cls, version, flexible, absent, fields, tagged, Encoded)
    return fn


def struct_decoder(schema: StructSchema, version: int, flexible: bool):
    """The `_codec.Decoder` of `schema` at `version`: fields the version lacks (and its tagged fields, until a
    tag sets them) get their defaults, the others are read in wire order."""
    key = (schema, version, flexible)
    fn = _DECODERS.get(key)
    if fn is None:
        absent, fields, tagged = _layout(schema, version, flexible, struct_decoder, (), absent_kept=lambda f: True,
                                         with_tagged=True, compared=False)
        fn = _DECODERS[key] = _codec.Decoder(schema.cls, version, flexible, absent, fields, tagged)
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
    """Run a decoder on untrusted bytes: every parse failure comes out as ProtocolError, naming `what` (in C:
    Decoder.run, which frames.decode_request's C path shares)."""
    return dec.run(mv, pos, what)
