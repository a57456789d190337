"""Schema compatibility as Confluent Schema Registry checks it: the levels, which earlier versions a level checks,
and per format the differences that make two schemas incompatible, worded as Confluent words them.

- AVRO: Avro's reader/writer rules (the specification's schema resolution, as org.apache.avro.SchemaCompatibility
  applies them) on fastavro's parsed schemas: names, promotions (int->long->float->double, string<->bytes), enum
  symbols, fixed sizes, union branches, record fields missing a default. BACKWARD reads the old schema with the new.
- JSON: Confluent's JSON Schema differences between an original and an update (BACKWARD: old -> new; FORWARD: new
  -> old) for types, properties against open / closed / partially open content models, required, enum, the numeric,
  string, array and object bounds, additionalProperties, items and the combiners (anyOf, oneOf, allOf).
- PROTOBUF: Confluent's Protobuf differences by field number between the messages of the same full name: package,
  message removed, field kind, scalar kind outside its wire-compatible group, named type, label, required fields,
  oneof moves.

`check(level, new, previous)` gives the messages of the incompatibilities (empty: compatible), Confluent's
`{errorType:..., description:...}` strings plus its `{oldSchemaVersion: n}`, `{oldSchema: '...'}` and
`{compatibility: 'LEVEL'}` entries for the first old schema that fails.
"""

from __future__ import annotations

from typing import Any, Iterable

from odradek.registry.schemas import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


def check(level: str, new: ParsedSchema, previous: Iterable[tuple[int, ParsedSchema]]) -> list[str]:
    """The incompatibilities of `new` with the earlier versions `previous` ((version, schema), oldest first) that
    `level` checks: the latest only, or all of them for the _TRANSITIVE levels."""
    previous = list(previous)
    if level == "NONE" or not previous:
        return []
    if not level.endswith("_TRANSITIVE"):
        previous = previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for version, old in reversed(previous):
        problems = []
        if old.schema_type != new.schema_type:
            problems.append(_entry("TYPE_MISMATCH", f"Incompatible because of different schema type: "
                                                    f"{old.schema_type} and {new.schema_type}"))
        else:
            if base in ("BACKWARD", "FULL"):
                problems += _differences(new, old, new_is_reader=True)
            if base in ("FORWARD", "FULL"):
                problems += _differences(old, new, new_is_reader=False)
        if problems:
            return problems + [f"{{oldSchemaVersion: {version}}}", f"{{oldSchema: '{old.text}'}}",
                               f"{{compatibility: '{level}'}}"]
    return []


def _entry(error_type: str, description: str, info: str | None = None) -> str:
    extra = f", additionalInfo:'{info}'" if info is not None else ""
    return f"{{errorType:'{error_type}', description:'{description}'{extra}}}"


def _differences(reader: ParsedSchema, writer: ParsedSchema, new_is_reader: bool) -> list[str]:
    if reader.schema_type == "AVRO":
        return _Avro(reader.named, writer.named, new_is_reader).check(reader.parsed, writer.parsed, "")
    if reader.schema_type == "JSON":  # Confluent compares the original (what was written) with the update
        return _Json().diff(writer.parsed, reader.parsed, "#")
    return _protobuf(writer.parsed, reader.parsed)


# ---- Avro ----

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {("long", "int"), ("float", "int"), ("float", "long"), ("double", "int"), ("double", "long"),
               ("double", "float"), ("string", "bytes"), ("bytes", "string")}  # (reader, writer)


class _Avro:
    def __init__(self, reader_names: dict, writer_names: dict, new_is_reader: bool):
        self.names = (reader_names, writer_names)
        self.reader_word, self.writer_word = ("new", "old") if new_is_reader else ("old", "new")
        self.seen: set[tuple[str, str]] = set()  # record pairs being checked: recursive types end here

    @staticmethod
    def _resolve(schema: Any, names: dict) -> Any:
        """The schema itself: named references looked up, {"type": ...} wrappers and logical types unwrapped."""
        while True:
            if isinstance(schema, str):
                if schema in _PRIMITIVES or schema not in names:
                    return schema
                schema = names[schema]
            elif isinstance(schema, dict) and schema.get("type") not in ("record", "error", "enum", "fixed",
                                                                           "array", "map"):
                schema = schema.get("type")
            else:
                return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, str):
            return schema
        return "record" if schema["type"] == "error" else schema["type"]

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader, writer = self._resolve(reader, self.names[0]), self._resolve(writer, self.names[1])
        r_kind, w_kind = self._kind(reader), self._kind(writer)
        if w_kind == "union":
            problems = []
            for index, branch in enumerate(writer):
                if r_kind == "union":
                    if not any(not self.check(r_branch, branch, path) for r_branch in reader):
                        problems.append(_entry("MISSING_UNION_BRANCH",
                                               f"The {self.reader_word} schema is missing a type inside a union "
                                               f"field at path '{path}/{index}' in the {self.writer_word} schema",
                                               f"reader union lacking writer type: "
                                               f"{self._kind(self._resolve(branch, self.names[1])).upper()}"))
                else:
                    problems += self.check(reader, branch, f"{path}/{index}")
            return problems
        if r_kind == "union":
            if any(not self.check(branch, writer, path) for branch in reader):
                return []
            return [_entry("MISSING_UNION_BRANCH", f"The {self.reader_word} schema is missing a type inside a union "
                                                   f"field at path '{path}' in the {self.writer_word} schema",
                           f"reader union lacking writer type: {w_kind.upper()}")]
        if r_kind != w_kind:
            if (r_kind, w_kind) in _PROMOTIONS:
                return []
            return [self._mismatch(path, r_kind, w_kind)]
        if r_kind in _PRIMITIVES:
            return []
        if r_kind in ("record", "enum", "fixed") and not self._same_name(reader, writer):
            return [_entry("NAME_MISMATCH", f"The name of the schema has changed (path '{path}/name')",
                           f"expected: {writer['name']}")]
        if r_kind == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if r_kind == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        if r_kind == "fixed":
            if reader["size"] != writer["size"]:
                return [_entry("FIXED_SIZE_MISMATCH", f"The size of FIXED type field at path '{path}/size' in the "
                                                      f"{self.reader_word} schema does not match with the "
                                                      f"{self.writer_word} schema",
                               f"expected: {writer['size']}, found: {reader['size']}")]
            return []
        if r_kind == "enum":
            missing = [symbol for symbol in writer["symbols"] if symbol not in reader["symbols"]]
            if missing and "default" not in reader:
                return [_entry("MISSING_ENUM_SYMBOLS", f"The {self.reader_word} schema is missing enum symbols "
                                                       f"'[{', '.join(missing)}]' at path '{path}/symbols' in the "
                                                       f"{self.writer_word} schema", f"[{', '.join(missing)}]")]
            return []
        return self._record(reader, writer, path)

    def _mismatch(self, path: str, r_kind: str, w_kind: str) -> str:
        return _entry("TYPE_MISMATCH", f"The type (path '{path}') of a field in the {self.reader_word} schema does "
                                       f"not match with the {self.writer_word} schema",
                      f"reader type: {r_kind.upper()} not compatible with writer type: {w_kind.upper()}")

    @staticmethod
    def _same_name(reader: dict, writer: dict) -> bool:
        short = lambda name: name.rsplit(".", 1)[-1]  # noqa: E731 - Avro compares the names without namespace
        return short(reader["name"]) == short(writer["name"]) or writer["name"] in reader.get("aliases", ())

    def _record(self, reader: dict, writer: dict, path: str) -> list[str]:
        pair = (reader["name"], writer["name"])
        if pair in self.seen:
            return []
        self.seen.add(pair)
        try:
            by_name = {field["name"]: field for field in writer["fields"]}
            problems = []
            for index, field in enumerate(reader["fields"]):
                found = by_name.get(field["name"]) or next(
                    (by_name[alias] for alias in field.get("aliases", ()) if alias in by_name), None)
                if found is None:
                    if "default" not in field:
                        problems.append(_entry("READER_FIELD_MISSING_DEFAULT_VALUE",
                                               f"The field '{field['name']}' at path '{path}/fields/{index}' in the "
                                               f"{self.reader_word} schema has no default value and is missing in "
                                               f"the {self.writer_word} schema", field["name"]))
                    continue
                problems += self.check(field["type"], found["type"], f"{path}/fields/{index}/type")
            return problems
        finally:
            self.seen.discard(pair)


# ---- JSON Schema ----

_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_BOUNDS = (  # (keyword, name in the difference types, True when a larger value accepts more)
    ("maxLength", "MAX_LENGTH", True), ("minLength", "MIN_LENGTH", False), ("maximum", "MAXIMUM", True),
    ("minimum", "MINIMUM", False), ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM", True),
    ("exclusiveMinimum", "EXCLUSIVE_MINIMUM", False), ("maxItems", "MAX_ITEMS", True),
    ("minItems", "MIN_ITEMS", False), ("maxProperties", "MAX_PROPERTIES", True),
    ("minProperties", "MIN_PROPERTIES", False),
)


def _types(schema: dict) -> set[str]:
    declared = schema.get("type")
    if declared is None:
        return set()
    return set(declared) if isinstance(declared, list) else {declared}


class _Json:
    """Confluent's JSON Schema differences between `original` and `update`; only the incompatible ones are kept."""

    def diff(self, original: Any, update: Any, path: str) -> list[str]:
        if original is True or original == {}:
            original = {}
        if update is True or update == {}:
            return []  # anything is read
        if original is False:
            return []
        if update is False:
            return [self._entry("SCHEMA_ADDED" if original else "TYPE_CHANGED", path)]
        problems = self._type(original, update, path)
        for keyword, name, larger_accepts in _BOUNDS:
            problems += self._bound(original.get(keyword), update.get(keyword), name, larger_accepts, path)
        if update.get("pattern") is not None and update.get("pattern") != original.get("pattern"):
            problems.append(self._entry("PATTERN_ADDED" if original.get("pattern") is None else "PATTERN_CHANGED",
                                        path))
        if update.get("multipleOf") is not None and original.get("multipleOf") != update["multipleOf"]:
            old = original.get("multipleOf")
            if old is None or old % update["multipleOf"] != 0:
                problems.append(self._entry("MULTIPLE_OF_ADDED" if old is None else "MULTIPLE_OF_CHANGED", path))
        if "enum" in update:
            if "enum" not in original:
                problems.append(self._entry("ENUM_ARRAY_CHANGED", path))
            elif not all(value in update["enum"] for value in original["enum"]):
                problems.append(self._entry("ENUM_ARRAY_NARROWED", path))
        if "const" in update and original.get("const", object()) != update["const"]:
            problems.append(self._entry("ENUM_ARRAY_CHANGED", path))
        problems += self._object(original, update, path)
        problems += self._array(original, update, path)
        problems += self._combined(original, update, path)
        return problems

    @staticmethod
    def _entry(error_type: str, path: str) -> str:
        return _entry(error_type, f"{_JSON_DESCRIPTIONS.get(error_type, 'An incompatible change')} at path "
                                  f"'{path}'")

    def _type(self, original: dict, update: dict, path: str) -> list[str]:
        old, new = _types(original), _types(update)
        if not new or old == new:
            return []
        if not old:
            return [self._entry("TYPE_CHANGED", path)]
        widened = new | ({"integer"} if "number" in new else set())
        if old <= widened:
            return []
        return [self._entry("TYPE_NARROWED" if old & new else "TYPE_CHANGED", path)]

    def _bound(self, old, new, name: str, larger_accepts: bool, path: str) -> list[str]:
        if new is None or isinstance(new, bool) or old == new:
            return []
        if old is None or isinstance(old, bool):
            return [self._entry(f"{name}_ADDED", path)]
        if larger_accepts and new < old:
            return [self._entry(f"{name}_DECREASED", path)]
        if not larger_accepts and new > old:
            return [self._entry(f"{name}_INCREASED", path)]
        return []

    def _object(self, original: dict, update: dict, path: str) -> list[str]:
        problems = []
        old_props, new_props = original.get("properties", {}), update.get("properties", {})
        old_extra = original.get("additionalProperties", True)
        new_extra = update.get("additionalProperties", True)
        old_required = set(original.get("required", ()))
        for name, schema in new_props.items():
            where = f"{path}/properties/{name}"
            if name in old_props:
                problems += self.diff(old_props[name], schema, where)
            elif old_extra is True or old_extra == {}:  # old data may hold anything under that name
                if schema not in ({}, True):
                    problems.append(self._entry("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where))
            elif old_extra is False:
                if name in update.get("required", ()) and "default" not in schema:
                    problems.append(self._entry("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where))
            elif self.diff(old_extra, schema, where):
                problems.append(self._entry("PROPERTY_ADDED_NOT_COVERED_BY_PARTIAL_OPEN_CONTENT_MODEL", where))
        for name, schema in old_props.items():
            if name not in new_props:
                where = f"{path}/properties/{name}"
                if new_extra is False:
                    problems.append(self._entry("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where))
                elif new_extra not in (True, {}) and self.diff(schema, new_extra, where):
                    problems.append(self._entry("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIAL_OPEN_CONTENT_MODEL",
                                                where))
        for name in update.get("required", ()):
            if name not in old_required and "default" not in new_props.get(name, {}):
                if name in new_props and name not in old_props and old_extra is False:
                    continue  # counted above as REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
                problems.append(self._entry("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}"))
        if new_extra is False and old_extra is not False:
            problems.append(self._entry("ADDITIONAL_PROPERTIES_REMOVED", path))
        elif isinstance(new_extra, dict) and new_extra and old_extra is not False:
            problems += [self._entry("ADDITIONAL_PROPERTIES_NARROWED", path)] if self.diff(
                {} if old_extra is True else old_extra, new_extra, f"{path}/additionalProperties") else []
        return problems

    def _array(self, original: dict, update: dict, path: str) -> list[str]:
        old_items, new_items = original.get("items"), update.get("items")
        if new_items is None or old_items == new_items:
            return []
        if isinstance(new_items, list) or isinstance(old_items, list):
            if not (isinstance(new_items, list) and isinstance(old_items, list)) or len(new_items) < len(old_items):
                return [self._entry("ITEMS_CHANGED" if not isinstance(old_items, list) else "ITEM_REMOVED", path)]
            return [p for index, item in enumerate(old_items)
                    for p in self.diff(item, new_items[index], f"{path}/items/{index}")]
        return self.diff({} if old_items is None else old_items, new_items, f"{path}/items")

    def _combined(self, original: dict, update: dict, path: str) -> list[str]:
        problems = []
        for keyword in ("anyOf", "oneOf", "allOf"):
            old, new = original.get(keyword), update.get(keyword)
            if new is None or old == new:
                continue
            if old is None:
                if keyword == "allOf" or not any(not self.diff(_without(original, keyword), branch, path)
                                                 for branch in new):
                    problems.append(self._entry("COMBINED_TYPE_CHANGED", path))
                continue
            if keyword == "allOf":  # a product type: each new branch must accept what the old ones wrote
                if len(new) > len(old):
                    problems.append(self._entry("PRODUCT_TYPE_EXTENDED", path))
                continue
            for index, branch in enumerate(old):  # a sum type: each old branch must be read by a new one
                if all(self.diff(branch, candidate, f"{path}/{keyword}/{index}") for candidate in new):
                    problems.append(self._entry("SUM_TYPE_NARROWED", f"{path}/{keyword}/{index}"))
        return problems


def _without(schema: dict, keyword: str) -> dict:
    return {key: value for key, value in schema.items() if key != keyword}


_JSON_DESCRIPTIONS = {
    "TYPE_CHANGED": "The type of a field in the new schema does not match the type in the old schema",
    "TYPE_NARROWED": "The type of a field in the new schema is narrower than the type in the old schema",
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": "The new schema has an open content model and has a property or item "
                                            "which is missing in the old schema",
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "The new schema has a closed content model and has a "
                                                       "required property which is missing in the old schema",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The new schema has a closed content model and is missing a "
                                                  "property or item present in the old schema",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIAL_OPEN_CONTENT_MODEL": "The new schema has a property which is not "
                                                                "covered by the partially open content model of "
                                                                "the old schema",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIAL_OPEN_CONTENT_MODEL": "The old schema has a property which is not "
                                                                  "covered by the partially open content model of "
                                                                  "the new schema",
    "REQUIRED_ATTRIBUTE_ADDED": "The new schema has a required property which is not required in the old schema",
    "ENUM_ARRAY_NARROWED": "The new schema has an enum with fewer values than the old schema",
    "ENUM_ARRAY_CHANGED": "The new schema has an enum which differs from the old schema",
    "ADDITIONAL_PROPERTIES_REMOVED": "The new schema does not allow additional properties, which the old schema "
                                     "allows",
    "ADDITIONAL_PROPERTIES_NARROWED": "The new schema narrows the additional properties of the old schema",
    "COMBINED_TYPE_CHANGED": "The new schema combines subschemas differently from the old schema",
    "PRODUCT_TYPE_EXTENDED": "The new schema has more allOf subschemas than the old schema",
    "SUM_TYPE_NARROWED": "The new schema has no anyOf/oneOf subschema for one of the old schema",
    "PATTERN_ADDED": "The new schema adds a pattern", "PATTERN_CHANGED": "The new schema changes the pattern",
    "SCHEMA_ADDED": "The new schema accepts no value",
}
for _keyword, _name, _larger in _BOUNDS:
    _JSON_DESCRIPTIONS[f"{_name}_ADDED"] = f"The new schema adds {_keyword}"
    _JSON_DESCRIPTIONS[f"{_name}_{'DECREASED' if _larger else 'INCREASED'}"] = (
        f"The new schema {'decreases' if _larger else 'increases'} {_keyword}")


# ---- Protobuf ----

_SCALAR_GROUPS = [{"int32", "uint32", "int64", "uint64", "bool"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
                  {"fixed64", "sfixed64"}, {"string", "bytes"}]


def _messages(descriptor) -> dict[str, Any]:
    found = {}

    def walk(prefix: str, messages) -> None:
        for msg in messages:
            name = f"{prefix}.{msg.name}" if prefix else msg.name
            found[name] = msg
            walk(name, msg.nested_type)

    walk(descriptor.package, descriptor.message_type)
    return found


def _field_kind(field) -> tuple[str, str]:
    """('scalar', int32...) or ('named', the message or enum type name)."""
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP, F.TYPE_ENUM):
        return "named", field.type_name.lstrip(".")
    return "scalar", F.Type.Name(field.type).removeprefix("TYPE_").lower()


def _protobuf(original, update) -> list[str]:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    def entry(error_type: str, where: str) -> str:
        return _entry(error_type, f"{_PROTO_DESCRIPTIONS[error_type]} at path '{where}'")

    problems = []
    if original.package != update.package:
        problems.append(entry("PACKAGE_CHANGED", "#/"))
    old_messages, new_messages = _messages(original), _messages(update)
    for name, old in old_messages.items():
        where = f"#/{name}"
        new = new_messages.get(name)
        if new is None:
            problems.append(entry("MESSAGE_REMOVED", where))
            continue
        new_fields = {field.number: field for field in new.field}
        old_fields = {field.number: field for field in old.field}
        moved_to_oneof = 0
        for number, field in old_fields.items():
            at = f"{where}/{number}"
            other = new_fields.get(number)
            if other is None:
                if field.label == F.LABEL_REQUIRED:
                    problems.append(entry("REQUIRED_FIELD_REMOVED", at))
                if field.HasField("oneof_index") and not field.proto3_optional:
                    problems.append(entry("ONEOF_FIELD_REMOVED", at))
                continue
            kind, other_kind = _field_kind(field), _field_kind(other)
            if kind[0] != other_kind[0]:
                problems.append(entry("FIELD_KIND_CHANGED", at))
            elif kind[0] == "scalar" and kind != other_kind and not any(
                    {kind[1], other_kind[1]} <= group for group in _SCALAR_GROUPS):
                problems.append(entry("FIELD_SCALAR_KIND_CHANGED", at))
            elif kind[0] == "named" and kind[1].rsplit(".", 1)[-1] != other_kind[1].rsplit(".", 1)[-1]:
                problems.append(entry("FIELD_NAMED_TYPE_CHANGED", at))
            if (field.label == F.LABEL_REPEATED) != (other.label == F.LABEL_REPEATED) and kind[0] == "scalar" \
                    and kind[1] not in ("string", "bytes"):
                problems.append(entry("FIELD_NUMERIC_LABEL_CHANGED", at))
            real_oneof = lambda f: f.HasField("oneof_index") and not f.proto3_optional  # noqa: E731
            if not real_oneof(field) and real_oneof(other):
                moved_to_oneof += 1
                if any(real_oneof(f) and f.oneof_index == other.oneof_index for n, f in old_fields.items()
                       if n in new_fields and new_fields[n].oneof_index == other.oneof_index and n != number):
                    problems.append(entry("FIELD_MOVED_TO_EXISTING_ONEOF", at))
        if moved_to_oneof > 1:
            problems.append(entry("MULTIPLE_FIELDS_MOVED_TO_ONEOF", where))
        for number, field in new_fields.items():
            if number not in old_fields and field.label == F.LABEL_REQUIRED:
                problems.append(entry("REQUIRED_FIELD_ADDED", f"{where}/{number}"))
    return problems


_PROTO_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package changed",
    "MESSAGE_REMOVED": "The new schema is missing a message of the old schema",
    "REQUIRED_FIELD_REMOVED": "The new schema is missing a required field of the old schema",
    "REQUIRED_FIELD_ADDED": "The new schema has a required field which is missing in the old schema",
    "ONEOF_FIELD_REMOVED": "The new schema is missing a oneof field of the old schema",
    "FIELD_KIND_CHANGED": "The kind of a field (scalar or named type) changed",
    "FIELD_SCALAR_KIND_CHANGED": "The scalar type of a field changed to one of another wire type",
    "FIELD_NAMED_TYPE_CHANGED": "The named type of a field changed",
    "FIELD_NUMERIC_LABEL_CHANGED": "A numeric field changed between repeated and singular",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field moved into an existing oneof",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Several fields moved into a oneof",
}
