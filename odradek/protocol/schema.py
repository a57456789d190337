"""The declarative schema language for Kafka messages, and the Python classes it generates.

A schema module states each message the way Kafka's JSON message definitions do: fields with Kafka's names in
snake_case, `versions`, `nullable_versions`, `tagged_versions` + `tag`, `default` and `ignorable`, plus per-message
`valid_versions` and `flexible_versions`.  Keeping our schemas a field-for-field transcription of Kafka's files is
what lets a reader check them against the spec line by line; `codec` turns them into fast per-version code.

`struct()` and `message()` return real classes (with `__slots__`, a keyword constructor whose defaults are the
schema defaults, `__repr__` and `__eq__`), generated once at import.  A message class carries every struct nested
in it as a class attribute named after Kafka's struct type (`ProduceResponse.PartitionProduceResponse`).  Kafka's
generator requires struct type names to be unique within one message, and so does `message()`: it raises at
import if two different structs in one message share a name; one struct object used in several places (Kafka's
`commonStructs`, or a struct shared by a request and its response) is fine and defined once.
"""

from __future__ import annotations

import uuid

from odradek.protocol import _codec

ZERO_UUID = uuid.UUID(int=0)

_TOP = 0x7FFF


class Versions:
    """A version range from Kafka's notation: "3+", "0-7", "5" or "none"."""

    __slots__ = ("lo", "hi", "spec")

    def __init__(self, spec: str):
        self.spec = spec
        if spec == "none":
            self.lo, self.hi = 1, 0
        elif spec.endswith("+"):
            self.lo, self.hi = int(spec[:-1]), _TOP
        elif "-" in spec:
            lo, hi = spec.split("-")
            self.lo, self.hi = int(lo), int(hi)
        else:
            self.lo = self.hi = int(spec)

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __repr__(self) -> str:
        return f"Versions({self.spec!r})"


NO_VERSIONS = Versions("none")


class Type:
    """Base of every field type."""

    __slots__ = ()


class Primitive(Type):
    """A scalar wire type; `fmt` is its struct format character when it has a fixed size."""

    __slots__ = ("name", "fmt", "size", "zero")

    def __init__(self, name: str, fmt: str | None, size: int, zero):
        self.name, self.fmt, self.size, self.zero = name, fmt, size, zero

    def __repr__(self) -> str:
        return self.name.upper()


BOOL = Primitive("bool", "?", 1, False)
INT8 = Primitive("int8", "b", 1, 0)
INT16 = Primitive("int16", "h", 2, 0)
UINT16 = Primitive("uint16", "H", 2, 0)
INT32 = Primitive("int32", "i", 4, 0)
INT64 = Primitive("int64", "q", 8, 0)
FLOAT64 = Primitive("float64", "d", 8, 0.0)
UUID = Primitive("uuid", "16s", 16, ZERO_UUID)
STRING = Primitive("string", None, 0, "")
BYTES = Primitive("bytes", None, 0, b"")
RECORDS = Primitive("records", None, 0, None)


class Array(Type):
    __slots__ = ("element",)

    def __init__(self, element):
        self.element = element

    def __repr__(self) -> str:
        return f"array({self.element!r})"


def array(element) -> Array:
    """`[]T` in Kafka's notation; `element` is a Primitive or a struct class."""
    return Array(element)


_UNSET = object()
NEW = object()  # constructor sentinel: "build a fresh default" (arrays and structs must not share one instance)


class Field:
    __slots__ = ("name", "type", "versions", "nullable_versions", "tagged_versions", "tag", "default",
                 "ignorable", "flexible_versions")

    def __init__(self, name, type_, versions, nullable_versions, tagged_versions, tag, default, ignorable,
                 flexible_versions):
        self.name = name
        self.type = type_
        self.versions = Versions(versions)
        self.nullable_versions = Versions(nullable_versions) if nullable_versions else NO_VERSIONS
        self.tagged_versions = Versions(tagged_versions) if tagged_versions else NO_VERSIONS
        self.tag = tag
        self.ignorable = ignorable
        self.flexible_versions = Versions(flexible_versions) if flexible_versions else None
        if (tag is None) != (tagged_versions is None):
            raise ValueError(f"{name}: tag and tagged_versions go together")
        if default is _UNSET:
            default = type_.zero if isinstance(type_, Primitive) else NEW
        self.default = default

    def struct_classes(self):
        """The struct classes this field's type refers to (zero or one)."""
        t = self.type.element if isinstance(self.type, Array) else self.type
        return [t] if isinstance(t, type) else []


def field(name: str, type_, versions: str, *, nullable_versions: str | None = None,
          tagged_versions: str | None = None, tag: int | None = None, default=_UNSET, ignorable: bool = False,
          flexible_versions: str | None = None) -> Field:
    """One field, as in Kafka's JSON.  `default` is a Python value (None for Kafka's "null"); left out it is the
    type's zero: 0, False, "", b"", the zero UUID, None for records, [] for arrays, a default struct for structs.
    `flexible_versions` overrides the message's for this field (only the request header's client_id needs it)."""
    return Field(name, type_, versions, nullable_versions, tagged_versions, tag, default, ignorable,
                 flexible_versions)


class StructSchema:
    __slots__ = ("name", "fields", "cls")

    def __init__(self, name: str, fields: list[Field]):
        self.name = name
        self.fields = fields
        self.cls = None


class MessageSchema(StructSchema):
    __slots__ = ("api_key", "valid_versions", "flexible_versions", "write_tagged")

    def __init__(self, name, fields, api_key, valid_versions, flexible_versions, write_tagged):
        super().__init__(name, fields)
        self.api_key = api_key
        self.valid_versions = Versions(valid_versions)
        self.flexible_versions = Versions(flexible_versions)
        self.write_tagged = write_tagged


def _generate_class(schema: StructSchema) -> type:
    """The class of a struct: its __slots__, a keyword-only __init__ in C (a field not given takes its schema
    default; arrays and structs get a new one each), and an __eq__ and __repr__ generated from the schema."""
    names = [f.name for f in schema.fields]
    attrs = ", ".join(f"self.{n}" for n in names)
    other = ", ".join(f"other.{n}" for n in names)
    src = [
        "def __eq__(self, other):",
        "    if type(other) is not type(self): return NotImplemented",
        f"    return ({attrs},) == ({other},)" if names else "    return True",
        "def __repr__(self):",
        f"    return {schema.name + '('!r} + ', '.join(["
        + ", ".join(f"{n + '='!r} + repr(self.{n})" for n in names) + "]) + ')'",
    ]
    ns: dict = {}
    exec("\n".join(src), ns)  # noqa: S102 - source built from our own schema declarations
    cls = type(schema.name, (), {
        "__slots__": tuple(names), "__eq__": ns["__eq__"],
        "__repr__": ns["__repr__"], "__hash__": None, "_schema": schema,
        "__module__": __name__, "__qualname__": schema.name,
    })
    _codec.Initializer(cls, [(f.name, *default_kind(f)) for f in schema.fields], NEW)  # sets cls.__init__
    schema.cls = cls
    return cls


def default_kind(f: Field, compared: bool = False) -> tuple:
    """Field `f`'s default as the C initializers and codecs take it, (how, value): a value, a new empty list, or a
    new struct of its class; an encoder only compares (`compared`), so a struct's default comes as one instance to
    compare with."""
    if f.default is not NEW:
        return _codec.DEFAULT_VALUE, f.default
    if isinstance(f.type, Array):
        return _codec.DEFAULT_NEW_LIST, None
    return (_codec.DEFAULT_VALUE, f.type()) if compared else (_codec.DEFAULT_NEW_STRUCT, f.type)


def struct(name: str, fields: list[Field]) -> type:
    """A nested struct (`"type": "[]Name"` / `"type": "Name"` with `fields`, or one of `commonStructs`)."""
    return _generate_class(StructSchema(name, fields))


def message(name: str, *, fields: list[Field], valid_versions: str, flexible_versions: str,
            api_key: int | None = None, write_tagged: bool = True) -> type:
    """A top-level message.  `write_tagged=False` makes the encoder leave out every tagged field (decoding still
    reads them); ApiVersionsResponse needs it for old librdkafka."""
    schema = MessageSchema(name, fields, api_key, valid_versions, flexible_versions, write_tagged)
    cls = _generate_class(schema)
    nested: dict[str, type] = {}
    pending = list(fields)
    while pending:
        f = pending.pop()
        for sub in f.struct_classes():
            seen = nested.setdefault(sub.__name__, sub)
            if seen is not sub:
                raise ValueError(f"{name}: two different structs named {sub.__name__}")
            pending.extend(sub._schema.fields)
    for sub_name, sub in nested.items():
        setattr(cls, sub_name, sub)
    return cls
