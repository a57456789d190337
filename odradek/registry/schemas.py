"""Schemas as the registry parses them: AVRO (fastavro), JSON (jsonschema) and PROTOBUF (protoc from grpcio-tools for
.proto text, protobuf's descriptor_pb2 for the base64 FileDescriptorProto confluent-kafka's serializer sends, which
is stored as the .proto text it renders to, as Confluent stores it), with their references resolved, the text the
registry stores, the identity it compares schemas by and Confluent's `normalize`.

`parse(schema_type, text, references)` gives a ParsedSchema or raises InvalidSchema with the parser's own message;
`references` are the resolved (name, schema text) pairs of the schema's references, deepest first, as the caller
(the registry's state) looked them up. Nothing here does I/O but protoc, which runs as a child process so that its
messages can be returned and a crash of it cannot take the registry down.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import fastavro
import grpc_tools
import fastavro.schema
import jsonschema
import jsonschema.validators
import referencing
from google.protobuf import descriptor_pb2, message

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
PROTOC_TIMEOUT_S = 20.0
WELL_KNOWN_PROTOS = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto, as protoc ships them
MAIN_PROTO = "schema.proto"  # the file name a .proto text is compiled under when it has none of its own


class InvalidSchema(ValueError):
    """A schema its parser refuses (Confluent's 42201)."""


@dataclasses.dataclass
class ParsedSchema:
    schema_type: str
    text: str  # what is stored and returned
    parsed: Any  # AVRO: fastavro's parsed schema; JSON: the schema document; PROTOBUF: FileDescriptorProto
    named: dict = dataclasses.field(default_factory=dict)  # AVRO: the named types of its references
    files: dict = dataclasses.field(default_factory=dict)  # PROTOBUF: the references' FileDescriptorProtos by name

    def serialized(self) -> str:
        """PROTOBUF's `format=serialized`: the base64 FileDescriptorProto."""
        return base64.standard_b64encode(self.parsed.SerializeToString()).decode("ascii")


def guid(schema_type: str, text: str) -> str:
    """The schema's guid: a name-based UUID of its type and text, the same on every registry."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{schema_type}\0{text}"))


def parse(schema_type: str, text: str, references: list[tuple[str, str]] = (), normalize: bool = False
          ) -> ParsedSchema:
    if not isinstance(text, str):
        raise InvalidSchema("schema must be a string")
    if schema_type == "AVRO":
        return _parse_avro(text, references, normalize)
    if schema_type == "JSON":
        return _parse_json(text, references, normalize)
    if schema_type == "PROTOBUF":
        return _parse_protobuf(text, references)
    raise InvalidSchema(f"Invalid schemaType {schema_type}")


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid {what} schema: {exc}") from None


def _compact(document: Any, sort: bool = False) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=sort, ensure_ascii=False)


def _parse_avro(text: str, references: list[tuple[str, str]], normalize: bool) -> ParsedSchema:
    named: dict = {}
    try:
        for _, ref_text in references:
            fastavro.parse_schema(json.loads(ref_text), named_schemas=named)
        document = _json(text, "Avro")
        names = dict(named)  # the references' named types, then this schema's own
        parsed = fastavro.parse_schema(document, named_schemas=names)
    except InvalidSchema:
        raise
    except (fastavro.schema.SchemaParseException, fastavro.schema.UnknownType, ValueError, TypeError,
            KeyError, AttributeError) as exc:
        raise InvalidSchema(f"Invalid schema {text} with refs {[name for name, _ in references]} of type AVRO, "
                            f"details: {exc}") from None
    if normalize:  # Confluent's normalized form: full names, no white space, keys in a fixed order
        stored = _compact(fastavro.parse_schema(document, named_schemas=dict(named), _write_hint=False,
                                                 _force=True), sort=True)
    else:
        stored = _compact(document)
    return ParsedSchema("AVRO", stored, parsed, names)


def _parse_json(text: str, references: list[tuple[str, str]], normalize: bool) -> ParsedSchema:
    document = _json(text, "JSON")
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema(f"Invalid JSON schema: {text} is not a JSON Schema (an object or a boolean)")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        validator.check_schema(document)
        resources = [(name, referencing.Resource.from_contents(json.loads(ref_text),
                                                                default_specification=referencing.jsonschema.DRAFT7))
                     for name, ref_text in references]
    except (jsonschema.SchemaError, ValueError, referencing.exceptions.Unresolvable) as exc:
        raise InvalidSchema(f"Invalid JSON schema: {getattr(exc, 'message', exc)}") from None
    return ParsedSchema("JSON", _compact(document, sort=normalize), document,
                        named={"registry": referencing.Registry().with_resources(resources)})


def _parse_protobuf(text: str, references: list[tuple[str, str]]) -> ParsedSchema:
    files = {}
    for name, ref_text in references:
        files[name] = _descriptor(ref_text, name, files)
    descriptor = _descriptor(text, MAIN_PROTO, files)
    stored = text.strip()
    if _base64_descriptor(text) is not None:  # stored as .proto text, as Confluent stores it, if that compiles back
        rendered = proto_text(descriptor)
        try:
            _descriptor(rendered, MAIN_PROTO, files)
            stored = rendered
        except InvalidSchema:
            pass
    return ParsedSchema("PROTOBUF", stored, descriptor, files=files)


def _base64_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto()
        descriptor.ParseFromString(raw)
    except (binascii.Error, ValueError, message.DecodeError):
        return None
    return descriptor if descriptor.name or descriptor.message_type else None


def _descriptor(text: str, name: str, files: dict) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of a base64 descriptor or of .proto text (compiled by protoc with `files`, the
    references, beside it under their names)."""
    found = _base64_descriptor(text)
    if found is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="odradek-proto-") as directory:
        root = Path(directory)
        for ref_name, descriptor in files.items():
            (root / "deps").mkdir(exist_ok=True)
            (root / "deps" / f"{ref_name.replace('/', '_')}.pb").write_bytes(
                descriptor_pb2.FileDescriptorSet(file=[descriptor]).SerializeToString())
        (root / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / name).write_text(text, encoding="utf-8")
        out = root / "out.pb"
        command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{root / 'src'}", f"-I{WELL_KNOWN_PROTOS}",
                   f"--descriptor_set_out={out}"]
        if files:
            command.append(f"--descriptor_set_in={':'.join(str(p) for p in sorted((root / 'deps').iterdir()))}")
        try:
            done = subprocess.run(command + [name], capture_output=True, text=True, timeout=PROTOC_TIMEOUT_S,
                                  cwd=root)
        except subprocess.TimeoutExpired:
            raise InvalidSchema("Invalid PROTOBUF schema: protoc did not finish") from None
        if done.returncode != 0:
            detail = done.stderr.replace(str(root / "src") + "/", "").strip()
            raise InvalidSchema(f"Invalid PROTOBUF schema: {detail}")
        result = descriptor_pb2.FileDescriptorSet()
        result.ParseFromString(out.read_bytes())
        return result.file[-1]


_LABELS = {1: "optional", 2: "required", 3: "repeated"}


def proto_text(descriptor: descriptor_pb2.FileDescriptorProto) -> str:
    """.proto text of a FileDescriptorProto (what Confluent stores for a base64 schema): syntax, package, imports,
    the file options protoc knows by name, messages (nested types, oneofs, maps, proto3 optional), enums, services."""
    F = descriptor_pb2.FieldDescriptorProto
    syntax = descriptor.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if descriptor.package:
        lines.append(f"package {descriptor.package};")
    lines += [f'import "{name}";' for name in descriptor.dependency]
    for option, value in descriptor.options.ListFields():
        shown = f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else (
            option.enum_type.values_by_number[value].name if option.enum_type else value)
        lines.append(f"option {option.name} = {shown};")

    def type_of(field) -> str:
        if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP):
            return "." + field.type_name.lstrip(".")
        return F.Type.Name(field.type).removeprefix("TYPE_").lower()

    def enum(item, indent: str) -> list[str]:
        return [f"{indent}enum {item.name} {{"] + [f"{indent}  {v.name} = {v.number};" for v in item.value] + \
            [f"{indent}}}"]

    def message(item, indent: str) -> list[str]:
        out = [f"{indent}message {item.name} {{"]
        maps = {nested.name: nested for nested in item.nested_type if nested.options.map_entry}
        oneofs: dict[int, list] = {}
        for field in item.field:
            if field.HasField("oneof_index") and not field.proto3_optional:
                oneofs.setdefault(field.oneof_index, []).append(field)
        for field in item.field:
            if field.HasField("oneof_index") and not field.proto3_optional:
                if oneofs.get(field.oneof_index) and oneofs[field.oneof_index][0] is field:
                    out.append(f"{indent}  oneof {item.oneof_decl[field.oneof_index].name} {{")
                    out += [f"{indent}    {type_of(f)} {f.name} = {f.number};" for f in oneofs[field.oneof_index]]
                    out.append(f"{indent}  }}")
                continue
            entry = maps.get(field.type_name.rsplit(".", 1)[-1]) if field.type == F.TYPE_MESSAGE else None
            if entry is not None and field.label == F.LABEL_REPEATED:
                key, value = entry.field[0], entry.field[1]
                out.append(f"{indent}  map<{type_of(key)}, {type_of(value)}> {field.name} = {field.number};")
                continue
            label = _LABELS[field.label]
            if syntax == "proto3" and label == "optional" and not field.proto3_optional:
                label = ""
            packed = " [packed = false]" if field.options.HasField("packed") and not field.options.packed else ""
            out.append(f"{indent}  {label + ' ' if label else ''}{type_of(field)} {field.name} = {field.number}"
                       f"{packed};")
        for nested in item.nested_type:
            if not nested.options.map_entry:
                out += message(nested, indent + "  ")
        for nested in item.enum_type:
            out += enum(nested, indent + "  ")
        for reserved in item.reserved_range:
            end = "max" if reserved.end >= 536870912 else reserved.end - 1
            out.append(f"{indent}  reserved {reserved.start} to {end};")
        if item.reserved_name:
            out.append(f"{indent}  reserved {', '.join(json.dumps(name) for name in item.reserved_name)};")
        return out + [f"{indent}}}"]

    for item in descriptor.message_type:
        lines += message(item, "")
    for item in descriptor.enum_type:
        lines += enum(item, "")
    for service in descriptor.service:
        lines.append(f"service {service.name} {{")
        for method in service.method:
            lines.append(f"  rpc {method.name} ({'stream ' if method.client_streaming else ''}."
                         f"{method.input_type.lstrip('.')}) returns ({'stream ' if method.server_streaming else ''}."
                         f"{method.output_type.lstrip('.')});")
        lines.append("}")
    return "\n".join(lines) + "\n"
