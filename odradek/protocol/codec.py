"""Compiles each (struct, version) of a schema into one specialised encoder and one decoder.

Interpreting a schema field by field on every request costs several microseconds per struct. An encoder is
straight-line Python source generated for one exact version (fields absent from that version simply do not appear,
every run of fixed-size fields, together with a following non-compact length prefix, becomes a single
`struct.Struct.pack`), exec'd once and cached; nested structs get their own compiled functions, called from the
parent. A decoder is a `_decode.Decoder` (C): the version's fields in wire order, read straight into the object's
slots, because generated Python spent most of a small request's decode on lengths, varints and slices.

Encoders have the signature `enc(obj, w)` and append chunks to the list `w`; a `records` value that is a
`FileRegion` is appended as the object itself (never read), so the frame layer can hand it to sendfile.
An element of an array of structs may be an `Encoded` instead: that struct already encoded for the same version,
whose bytes the encoder copies as they are (a cache of answer parts that stay the same across many answers).
Decoders have the signature `dec(mv, pos) -> (obj, pos)` over a byte memoryview; `records` decode to a zero-copy
slice of it. Truncation and garbage raise `ProtocolError` inside them, a string that is not UTF-8 a
`UnicodeDecodeError`; `run_decoder` is the one place that turns everything into `ProtocolError`.
"""

from __future__ import annotations

import struct

from ..records.region import FileRegion
from . import _decode
from .errors import ProtocolError
from .schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, NEW, RECORDS, STRING, UINT16, UUID, Array,
                     Primitive, StructSchema)
from .varint import encode_uvarint

_ENCODERS: dict = {}
_DECODERS: dict = {}


class Encoded(bytes):
    """One struct value encoded ahead for one exact version (see `frames.pre_encode`), standing for that value as
    an element of an array of structs."""

    __slots__ = ()


def _records_length(r) -> int:
    if r is None:
        return -1
    if type(r) is FileRegion:
        return r.length
    if type(r) is memoryview:
        return r.nbytes
    return len(r)


def _unsupported(obj, name, version):
    raise ProtocolError(f"{type(obj).__name__}.{name} is set but does not exist in version {version}")


_HELPERS = {
    "_uv": encode_uvarint, "_rlen": _records_length, "_pack": struct.pack, "_unsupported": _unsupported,
    "_Encoded": Encoded,
}


def _is_default(g: _EncoderGen, f, x: str) -> str:
    if f.default is NEW:
        if isinstance(f.type, Array):
            return f"not {x}"
        return f"{x} == {g.const(f.type())}"
    if f.default is None:
        return f"{x} is None"
    return f"{x} == {g.const(f.default)}"


class _EncoderGen:
    """Source builder of one encoder: lines, constants, temporaries and the pending run of fixed-size fields."""

    def __init__(self, version: int, flexible: bool, write_tagged: bool, strict: bool):
        self.version, self.flexible, self.write_tagged, self.strict = version, flexible, write_tagged, strict
        self.ns = dict(_HELPERS)
        self.lines: list[str] = []
        self.counter = 0
        self.run_fmt: list[str] = []
        self.run_items: list[str] = []

    def emit(self, indent: int, line: str):
        self.lines.append("    " * indent + line)

    def tmp(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value) -> str:
        name = self.tmp("_k")
        self.ns[name] = value
        return name

    def compile(self, name: str):
        exec("\n".join(self.lines), self.ns)  # noqa: S102 - source generated from our own schemas
        return self.ns[name]

    def flush(self, indent: int):
        if self.run_fmt:
            packer = self.const(struct.Struct(">" + "".join(self.run_fmt)))
            self.emit(indent, f"w.append({packer}.pack({', '.join(self.run_items)}))")
            self.run_fmt, self.run_items = [], []

    def put(self, fmt: str, expr: str, out: str, indent: int, merge: bool):
        if merge:
            self.run_fmt.append(fmt)
            self.run_items.append(expr)
        else:
            self.emit(indent, f"{out}.append({self.const(struct.Struct('>' + fmt))}.pack({expr}))")

    def length(self, n: str, fmt: str, compact: bool, out: str, indent: int, merge: bool):
        if compact:
            if merge:
                self.flush(indent)
            self.emit(indent, f"{out}.append(_uv({n} + 1))")
        else:
            self.put(fmt, n, out, indent, merge)
            if merge:
                self.flush(indent)

    def value(self, t, nullable: bool, compact: bool, x: str, out: str, indent: int, merge: bool):
        if isinstance(t, Primitive) and t.fmt:
            self.put(t.fmt, f"{x}.bytes" if t is UUID else x, out, indent, merge)
        elif isinstance(t, Primitive):
            b = self.tmp("_b")
            if t is STRING:
                self.emit(indent, f"{b} = None if {x} is None else {x}.encode()" if nullable else f"{b} = {x}.encode()")
            else:
                self.emit(indent, f"{b} = {x}")
            if t is RECORDS:
                n = f"_rlen({b})"
            else:
                n = f"(-1 if {b} is None else len({b}))" if nullable else f"len({b})"
            self.length(n, "h" if t is STRING else "i", compact, out, indent, merge)
            if nullable or t is RECORDS:
                self.emit(indent, f"if {b} is not None: {out}.append({b})")
            else:
                self.emit(indent, f"{out}.append({b})")
        elif isinstance(t, Array):
            a = self.tmp("_a")
            self.emit(indent, f"{a} = {x}")
            n = f"(-1 if {a} is None else len({a}))" if nullable else f"len({a})"
            self.length(n, "i", compact, out, indent, merge)
            if nullable:
                self.emit(indent, f"if {a} is not None:")
                indent += 1
            el = t.element
            if isinstance(el, Primitive) and el.fmt and el is not UUID:
                self.emit(indent, f"{out}.append(_pack('>%d{el.fmt}' % len({a}), *{a}))")
            elif isinstance(el, Primitive):
                e = self.tmp("_e")
                self.emit(indent, f"for {e} in {a}:")
                self.value(el, False, compact, e, out, indent + 1, False)
            else:
                e = self.tmp("_e")
                self.emit(indent, f"for {e} in {a}:")
                self.emit(indent + 1, f"if type({e}) is _Encoded: {out}.append({e})")
                self.emit(indent + 1, "else:")
                self.value(el, False, compact, e, out, indent + 2, False)
        else:
            enc = self.const(struct_encoder(t._schema, self.version, self.flexible, self.write_tagged, self.strict))
            if nullable:
                self.put("b", f"-1 if {x} is None else 1", out, indent, merge)
                if merge:
                    self.flush(indent)
                self.emit(indent, f"if {x} is not None: {enc}({x}, {out})")
            else:
                if merge:
                    self.flush(indent)
                self.emit(indent, f"{enc}({x}, {out})")

    def generate(self, schema: StructSchema):
        v, flexible = self.version, self.flexible
        self.emit(0, "def enc(o, w):")
        tagged = []
        for f in schema.fields:
            x = f"o.{f.name}"
            if v not in f.versions:
                if self.strict and not f.ignorable:
                    self.emit(1, f"if not ({_is_default(self, f, x)}): _unsupported(o, {f.name!r}, {v})")
                continue
            if flexible and v in f.tagged_versions:
                if self.write_tagged:
                    tagged.append(f)
                continue
            compact = flexible and (f.flexible_versions is None or v in f.flexible_versions)
            self.value(f.type, v in f.nullable_versions, compact, x, "w", 1, True)
        if flexible and not tagged:
            self.put("B", "0", "w", 1, True)
        self.flush(1)
        if tagged:
            self.emit(1, "_t = []")
            for f in sorted(tagged, key=lambda f: f.tag):
                x = f"o.{f.name}"
                self.emit(1, f"if not ({_is_default(self, f, x)}):")
                self.emit(2, "_tw = []")
                self.value(f.type, v in f.nullable_versions, True, x, "_tw", 2, False)
                self.emit(2, "_tb = b''.join(_tw)")
                self.emit(2, f"_t += ({self.const(encode_uvarint(f.tag))}, _uv(len(_tb)), _tb)")
            self.emit(1, "w.append(_uv(len(_t) // 3))")
            self.emit(1, "w += _t")
        if len(self.lines) == 1:
            self.emit(1, "pass")  # a non-flexible struct with no fields in this version
        return self.compile("enc")


_TYPE_CODES = {BOOL: _decode.BOOL, INT8: _decode.INT8, INT16: _decode.INT16, UINT16: _decode.UINT16,
               INT32: _decode.INT32, INT64: _decode.INT64, FLOAT64: _decode.FLOAT64, UUID: _decode.UUID,
               STRING: _decode.STRING, BYTES: _decode.BYTES, RECORDS: _decode.RECORDS}


def _decoded_type(t, version: int, flexible: bool) -> tuple:
    """(type code, element type code, struct decoder or None) of a field's type, for `_decode.Decoder`."""
    if isinstance(t, Primitive):
        return _TYPE_CODES[t], 0, None
    if isinstance(t, Array):
        element, _, sub = _decoded_type(t.element, version, flexible)
        return _decode.ARRAY, element, sub
    return _decode.STRUCT, 0, struct_decoder(t._schema, version, flexible)


def _decoded_default(f) -> tuple:
    if f.default is not NEW:
        return f.name, _decode.DEFAULT_VALUE, f.default
    if isinstance(f.type, Array):
        return f.name, _decode.DEFAULT_NEW_LIST, None
    return f.name, _decode.DEFAULT_NEW_STRUCT, f.type


def struct_encoder(schema: StructSchema, version: int, flexible: bool, write_tagged: bool = True,
                   strict: bool = True):
    key = (schema, version, flexible, write_tagged, strict)
    fn = _ENCODERS.get(key)
    if fn is None:
        fn = _ENCODERS[key] = _EncoderGen(version, flexible, write_tagged, strict).generate(schema)
    return fn


def struct_decoder(schema: StructSchema, version: int, flexible: bool):
    """The `_decode.Decoder` of `schema` at `version`: fields the version lacks (and its tagged fields, until a
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
                code, element, sub = _decoded_type(f.type, version, flexible)
                tagged.append((f.tag, f.name, code, nullable, True, element, sub))
            else:
                compact = flexible and (f.flexible_versions is None or version in f.flexible_versions)
                code, element, sub = _decoded_type(f.type, version, flexible)
                fields.append((f.name, code, nullable, compact, element, sub))
        fn = _DECODERS[key] = _decode.Decoder(schema.cls, flexible, defaults, fields, tagged)
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
