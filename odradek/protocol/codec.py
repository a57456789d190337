"""Compiles each (struct, version) of a schema into one specialised encode and one decode function.

Interpreting a schema field by field on every request costs several microseconds per struct; instead we generate
straight-line Python source for one exact version (fields absent from that version simply do not appear, every
run of fixed-size fields, together with a following non-compact length prefix, becomes a single
`struct.Struct.pack`/`unpack_from`), exec it once and cache the function.  Nested structs get their own compiled
functions, called from the parent.

Encoders have the signature `enc(obj, w)` and append chunks to the list `w`; a `records` value that is a
`FileRegion` is appended as the object itself (never read), so the frame layer can hand it to sendfile.
An element of an array of structs may be an `Encoded` instead: that struct already encoded for the same version,
whose bytes the encoder copies as they are (a cache of answer parts that stay the same across many answers).
Decoders have the signature `dec(mv, pos) -> (obj, pos)` over a byte memoryview; `records` decode to a zero-copy
slice of it.  Truncation and garbage surface inside them as `ProtocolError`, `IndexError`, `struct.error` or
`ValueError`; `run_decoder` is the one place that turns all of them into `ProtocolError`.
"""

from __future__ import annotations

import struct
import uuid

from ..records.region import FileRegion
from .errors import ProtocolError
from .schema import NEW, RECORDS, STRING, UUID, Array, Primitive, StructSchema
from .varint import encode_uvarint, read_uvarint

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


def _truncated():
    raise ProtocolError("frame truncated")


def _negative_length(n):
    raise ProtocolError(f"negative length {n} for a non-nullable field")


def _unsupported(obj, name, version):
    raise ProtocolError(f"{type(obj).__name__}.{name} is set but does not exist in version {version}")


_HELPERS = {
    "_uv": encode_uvarint, "_ruv": read_uvarint, "_rlen": _records_length, "_pack": struct.pack,
    "_unpack_from": struct.unpack_from, "_trunc": _truncated, "_neg": _negative_length,
    "_unsupported": _unsupported, "_UUID": uuid.UUID, "_new": object.__new__, "_Encoded": Encoded,
}


class _Gen:
    """Source builder shared by the encoder and decoder generators: lines, constants, temporaries and the
    pending run of fixed-size fields."""

    def __init__(self):
        self.ns = dict(_HELPERS)
        self.lines: list[str] = []
        self.counter = 0
        self.run_fmt: list[str] = []
        self.run_items: list[str] = []
        self.run_post: list[str] = []

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


def _is_default(g: _Gen, f, x: str) -> str:
    if f.default is NEW:
        if isinstance(f.type, Array):
            return f"not {x}"
        return f"{x} == {g.const(f.type())}"
    if f.default is None:
        return f"{x} is None"
    return f"{x} == {g.const(f.default)}"


def _default_expr(g: _Gen, f) -> str:
    if f.default is NEW:
        return "[]" if isinstance(f.type, Array) else f"{g.const(f.type)}()"
    return g.const(f.default)


class _EncoderGen(_Gen):
    def __init__(self, version: int, flexible: bool, write_tagged: bool, strict: bool):
        super().__init__()
        self.version, self.flexible, self.write_tagged, self.strict = version, flexible, write_tagged, strict

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


class _DecoderGen(_Gen):
    def __init__(self, version: int, flexible: bool):
        super().__init__()
        self.version, self.flexible = version, flexible

    def flush(self, indent: int):
        if self.run_fmt:
            s = struct.Struct(">" + "".join(self.run_fmt))
            targets = ", ".join(self.run_items)
            self.emit(indent, f"{targets}, = {self.const(s)}.unpack_from(mv, pos)")
            self.emit(indent, f"pos += {s.size}")
            for line in self.run_post:
                self.emit(indent, line)
            self.run_fmt, self.run_items, self.run_post = [], [], []

    def take(self, fmt: str, target: str, indent: int, merge: bool, post: str | None = None):
        if merge:
            self.run_fmt.append(fmt)
            self.run_items.append(target)
            if post:
                self.run_post.append(post)
        else:
            s = struct.Struct(">" + fmt)
            self.emit(indent, f"{target}, = {self.const(s)}.unpack_from(mv, pos)")
            self.emit(indent, f"pos += {s.size}")
            if post:
                self.emit(indent, post)

    def uvarint(self, target: str, indent: int):
        self.emit(indent, f"{target} = mv[pos]")
        self.emit(indent, f"if {target} > 127: {target}, pos = _ruv(mv, pos)")
        self.emit(indent, "else: pos += 1")

    def length(self, n: str, fmt: str, compact: bool, indent: int, merge: bool):
        if compact:
            if merge:
                self.flush(indent)
            self.uvarint(n, indent)
            self.emit(indent, f"{n} -= 1")
        else:
            self.take(fmt, n, indent, merge)
            if merge:
                self.flush(indent)

    def null_or_negative(self, n: str, nullable: bool, target: str, indent: int) -> int:
        """Emit the null check for length `n`; return the indent at which the non-null value is read."""
        if nullable:
            self.emit(indent, f"if {n} < 0: {target} = None")
            self.emit(indent, "else:")
            return indent + 1
        self.emit(indent, f"if {n} < 0: _neg({n})")
        return indent

    def value(self, t, nullable: bool, compact: bool, target: str, indent: int, merge: bool):
        if isinstance(t, Primitive) and t.fmt:
            if t is UUID:
                u = self.tmp("_u")
                self.take(t.fmt, u, indent, merge, f"{target} = _UUID(bytes={u})")
            else:
                self.take(t.fmt, target, indent, merge)
        elif isinstance(t, Primitive):
            n, e = self.tmp("_n"), self.tmp("_e")
            self.length(n, "h" if t is STRING else "i", compact, indent, merge)
            indent = self.null_or_negative(n, nullable or t is RECORDS, target, indent)
            self.emit(indent, f"{e} = pos + {n}")
            self.emit(indent, f"if {e} > end: _trunc()")
            if t is STRING:
                self.emit(indent, f"{target} = str(mv[pos:{e}], 'utf-8')")
            elif t is RECORDS:
                self.emit(indent, f"{target} = mv[pos:{e}]")
            else:
                self.emit(indent, f"{target} = bytes(mv[pos:{e}])")
            self.emit(indent, f"pos = {e}")
        elif isinstance(t, Array):
            n = self.tmp("_n")
            self.length(n, "i", compact, indent, merge)
            indent = self.null_or_negative(n, nullable, target, indent)
            el = t.element
            if isinstance(el, Primitive) and el.fmt and el is not UUID:
                e = self.tmp("_e")
                self.emit(indent, f"{e} = pos + {n} * {el.size}")
                self.emit(indent, f"if {e} > end: _trunc()")
                self.emit(indent, f"{target} = list(_unpack_from('>%d{el.fmt}' % {n}, mv, pos))")
                self.emit(indent, f"pos = {e}")
            else:
                lst, x = self.tmp("_l"), self.tmp("_x")
                self.emit(indent, f"if {n} > end - pos: _trunc()")
                self.emit(indent, f"{lst} = []")
                self.emit(indent, f"for _ in range({n}):")
                self.value(el, False, compact, x, indent + 1, False)
                self.emit(indent + 1, f"{lst}.append({x})")
                self.emit(indent, f"{target} = {lst}")
        else:
            dec = self.const(struct_decoder(t._schema, self.version, self.flexible))
            if nullable:
                k = self.tmp("_p")
                self.take("b", k, indent, merge)
                if merge:
                    self.flush(indent)
                self.emit(indent, f"if {k} < 0: {target} = None")
                self.emit(indent, f"else: {target}, pos = {dec}(mv, pos)")
            else:
                if merge:
                    self.flush(indent)
                self.emit(indent, f"{target}, pos = {dec}(mv, pos)")

    def generate(self, schema: StructSchema):
        v, flexible = self.version, self.flexible
        self.emit(0, "def dec(mv, pos):")
        self.emit(1, "end = len(mv)")
        self.emit(1, f"o = _new({self.const(schema.cls)})")
        tagged, present = [], []
        for f in schema.fields:
            if v not in f.versions:
                self.emit(1, f"o.{f.name} = {_default_expr(self, f)}")
            elif flexible and v in f.tagged_versions:
                self.emit(1, f"o.{f.name} = {_default_expr(self, f)}")
                tagged.append(f)
            else:
                present.append(f)
        for f in present:
            compact = flexible and (f.flexible_versions is None or v in f.flexible_versions)
            self.value(f.type, v in f.nullable_versions, compact, f"o.{f.name}", 1, True)
        self.flush(1)
        if flexible:
            self.emit(1, "if mv[pos]: # tagged fields (a struct without them, the usual case, costs one test)")
            self.uvarint("_nt", 2)
            self.emit(2, "for _ in range(_nt):")
            self.uvarint("_tg", 3)
            self.uvarint("_sz", 3)
            self.emit(3, "_te = pos + _sz")
            self.emit(3, "if _te > end: _trunc()")
            for i, f in enumerate(tagged):
                self.emit(3, f"{'if' if i == 0 else 'elif'} _tg == {f.tag}:")
                self.value(f.type, v in f.nullable_versions, True, f"o.{f.name}", 4, False)
            self.emit(3, "pos = _te")
            self.emit(1, "else: pos += 1")
        self.emit(1, "return o, pos")
        return self.compile("dec")


def struct_encoder(schema: StructSchema, version: int, flexible: bool, write_tagged: bool = True,
                   strict: bool = True):
    key = (schema, version, flexible, write_tagged, strict)
    fn = _ENCODERS.get(key)
    if fn is None:
        fn = _ENCODERS[key] = _EncoderGen(version, flexible, write_tagged, strict).generate(schema)
    return fn


def struct_decoder(schema: StructSchema, version: int, flexible: bool):
    key = (schema, version, flexible)
    fn = _DECODERS.get(key)
    if fn is None:
        fn = _DECODERS[key] = _DecoderGen(version, flexible).generate(schema)
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
    """The compiled `dec(mv, pos) -> (obj, pos)` for message class `cls` at `version`."""
    s = cls._schema
    return struct_decoder(s, version, version in s.flexible_versions)


def run_decoder(dec, mv: memoryview, pos: int, what: str):
    """Run a compiled decoder on untrusted bytes: every parse failure comes out as ProtocolError."""
    try:
        return dec(mv, pos)
    except ProtocolError:
        raise
    except (IndexError, struct.error, ValueError) as e:
        raise ProtocolError(f"malformed {what}: {e}") from None
