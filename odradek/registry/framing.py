"""Records framed as Confluent's serializers frame them, and their writers' decoders, for the registry's clients
(the console's messages): magic byte 0, the writer schema's id in 4 big-endian bytes, for Protobuf the message
indexes (a zigzag varint count, then each index; count 0: the first message), then the payload.

`Decoders(fetch)` builds, once per id, a decoder from what `fetch(path)` answers (LookupError: no answer) for the
registry's REST paths (`/schemas/ids/{id}?format=serialized`, the references'
`/subjects/{s}/versions/{v}?format=serialized`): Avro by fastavro (strict: the payload must be read to its last
byte), JSON Schema by json and jsonschema (strict: the value must be valid), Protobuf by protobuf's descriptor pool.
`decode` raises Undecodable (a ValueError) for a value that is not framed, names an unknown id or does not decode.
This module does no I/O of its own.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import urllib.parse
from collections.abc import Callable

MAGIC = 0


class Undecodable(ValueError):
    """A payload its writer's schema does not decode (or a schema that cannot decode anything)."""


def framed_id(data: bytes | None) -> int | None:
    """The schema id of a framed key or value, None if it is not framed."""
    if data is None or len(data) < 5 or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:5], "big")


class Decoders:
    def __init__(self, fetch: Callable[[str], dict], strict: bool = False):
        self.fetch = fetch
        self.strict = strict
        self._decoders: dict[int, Callable[[bytes], object] | None] = {}
        self._lock = threading.Lock()

    def decoder(self, schema_id: int) -> Callable[[bytes], object] | None:
        """The decoder of a schema id (None: the registry has no such schema or it cannot be decoded here); looked
        up once, then kept."""
        with self._lock:
            if schema_id in self._decoders:
                return self._decoders[schema_id]
        try:
            decoder = self._make(self.fetch(f"/schemas/ids/{schema_id}?format=serialized"))
        except (LookupError, ImportError, ValueError, TypeError):
            decoder = None
        with self._lock:
            self._decoders[schema_id] = decoder
        return decoder

    def decode(self, data: bytes) -> object:
        """The framed value decoded; Undecodable if it is not framed, its id is unknown or its payload is bad."""
        schema_id = framed_id(data)
        decoder = self.decoder(schema_id) if schema_id is not None else None
        if decoder is None:
            raise Undecodable("not framed with a known schema id" if schema_id is None else
                              f"schema id {schema_id} is not known to the schema registry")
        try:
            return decoder(data[5:])
        except Undecodable:
            raise
        except Exception as exc:  # noqa: BLE001 - what each library raises for bad bytes differs
            raise Undecodable(f"it does not decode with schema {schema_id}: {exc}") from None

    def _make(self, found: dict):
        schema_type = found.get("schemaType", "AVRO")
        references = self._references(found.get("references") or [])
        if schema_type == "JSON":
            return self._json(found["schema"], references)
        if schema_type == "AVRO":
            import fastavro
            named: dict = {}
            for _, text in references:
                fastavro.parse_schema(json.loads(text), named_schemas=named)
            writer = fastavro.parse_schema(json.loads(found["schema"]), named_schemas=named)

            def decode_avro(payload: bytes):
                stream = io.BytesIO(payload)
                value = fastavro.schemaless_reader(stream, writer, None)
                if self.strict and stream.tell() != len(payload):
                    raise Undecodable(f"{len(payload) - stream.tell()} bytes past the Avro value")
                return value

            return decode_avro
        return _protobuf(found["schema"], references)

    def _json(self, schema: str, references: list[tuple[str, str]]):
        document = json.loads(schema)
        validator = None
        if self.strict:
            import jsonschema
            import referencing
            import referencing.jsonschema
            registry = referencing.Registry().with_resources(
                (name, referencing.Resource.from_contents(json.loads(text),
                                                          default_specification=referencing.jsonschema.DRAFT7))
                for name, text in references)
            validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)(
                document, registry=registry)

        def decode_json(payload: bytes):
            value = json.loads(payload)
            if validator is not None:
                error = next(iter(validator.iter_errors(value)), None)
                if error is not None:
                    raise Undecodable(f"not valid for its JSON schema: {error.message}")
            return value

        return decode_json

    def _references(self, references: list, seen: frozenset = frozenset()) -> list[tuple[str, str]]:
        """(name, schema) of the references, theirs first, as the registry gives them (Protobuf: serialized)."""
        resolved = []
        for reference in references:
            key = (reference["subject"], reference["version"])
            if key in seen:
                continue
            subject = urllib.parse.quote(reference["subject"], safe="")
            found = self.fetch(f"/subjects/{subject}/versions/{reference['version']}?format=serialized")
            resolved += self._references(found.get("references") or [], seen | {key})
            resolved.append((reference["name"], found["schema"]))
        return resolved


def _protobuf(schema: str, references: list[tuple[str, str]]):
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format
    from google.protobuf.message_factory import GetMessageClass

    pool = descriptor_pool.DescriptorPool()
    files = [descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text)) for _, text in references]
    main = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema))
    known = {f.name for f in files}
    for name in main.dependency:  # the well-known types a serializer does not register as references
        if name not in known and name.startswith("google/protobuf/"):
            proto = descriptor_pb2.FileDescriptorProto()
            descriptor_pool.Default().FindFileByName(name).CopyToProto(proto)
            files.insert(0, proto)
    for proto in files + [main]:
        pool.Add(proto)
    root = pool.FindFileByName(main.name)

    def decode_protobuf(payload: bytes):
        stream = io.BytesIO(payload)
        indexes = message_indexes(stream)
        message = root.message_types_by_name[main.message_type[indexes[0]].name]
        for index in indexes[1:]:
            message = message.nested_types[index]
        decoded = GetMessageClass(message)()
        decoded.ParseFromString(stream.read())
        return json_format.MessageToDict(decoded)

    return decode_protobuf


def message_indexes(stream: io.BytesIO) -> list[int]:
    """The message indexes that open a framed Protobuf payload (after the magic byte and schema id), read from
    `stream`: a zigzag varint count, then that many zigzag varints, the path to the message type in its file (the
    first top-level message, [0], when the count is 0), as Confluent's serializers write them."""
    return [_zigzag(stream) for _ in range(_zigzag(stream))] or [0]


def _zigzag(stream: io.BytesIO) -> int:
    shift = result = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise Undecodable("truncated message indexes")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
