"""The registry's side of broker-side schema validation: `RegistrySchemas` is the SchemaSource
(odradek.broker.schema_validation) of a registry running in a broker's process, answered from its in-memory state
(no HTTP, no waiting on the cluster: the broker asks on its event loop). `odradek serve` installs it for the
registry it starts beside the broker (`schema.registry.port`).

Decoders are framing.Decoders (strict: an Avro value read to its last byte, a JSON value valid for its schema, a
Protobuf message that parses), fed by what the REST API would answer for the schema and its references, here asked
of the registry's service directly; built once per id, as an id never changes its schema.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
import urllib.parse
from collections.abc import Callable

from odradek.registry.framing import Decoders, Undecodable, message_indexes
from odradek.registry.service import Registry, RegistryError
from odradek.registry.store import KafkaStore

_PATHS = re.compile(r"/schemas/ids/(\d+)\?format=serialized|/subjects/([^/]+)/versions/(-?\d+)\?format=serialized")


class RegistrySchemas:
    def __init__(self, store: KafkaStore):
        self.store = store
        self.service = Registry(store)
        self._decoders = Decoders(self._fetch, strict=True)
        self._namers: dict[int, Callable[[bytes], str | None]] = {}
        self.serving = threading.Event()  # set by whoever starts the registry, once it serves (has read _schemas)

    def ready(self) -> bool:
        return self.serving.is_set()

    def registered(self, subject: str) -> frozenset[int]:
        with self.store.lock:
            return frozenset(version.id for version in self.store.state.live(subject))

    def decoder(self, schema_id: int) -> Callable[[bytes], object] | None:
        return self._decoders.decoder(schema_id)

    def record_name(self, schema_id: int, payload: bytes) -> str | None:
        if schema_id not in self._namers:
            try:
                version = self.service.schema_by_id(schema_id)
            except RegistryError:
                return None
            self._namers[schema_id] = self._namer(version)
        return self._namers[schema_id](payload)

    def _namer(self, version) -> Callable[[bytes], str | None]:
        """The record name of a payload written with the schema, as Confluent's serializers name records: Avro's
        full name, JSON Schema's title, the full name of the Protobuf message the payload's indexes select."""
        if version.schema_type == "PROTOBUF":
            from google.protobuf import descriptor_pb2
            proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(self.service.serialized(version)))
            return lambda payload: _message_name(proto, payload)
        document = json.loads(version.schema)
        name = None
        if isinstance(document, dict) and version.schema_type == "JSON":
            name = document.get("title")
        elif isinstance(document, dict):
            name, namespace = document.get("name"), document.get("namespace")
            name = name if not name or "." in name or not namespace else f"{namespace}.{name}"
        return lambda payload: name

    def _fetch(self, path: str) -> dict:
        """What the REST API answers for the paths framing.Decoders asks (LookupError: nothing)."""
        match = _PATHS.fullmatch(path)
        if match is None:
            raise LookupError(path)
        try:
            if match[1] is not None:
                version = self.service.schema_by_id(int(match[1]))
            else:
                version = self.service.get_version(urllib.parse.unquote(match[2]), match[3], deleted=True)
        except RegistryError:
            raise LookupError(path) from None
        schema = self.service.serialized(version) if version.schema_type == "PROTOBUF" else version.schema
        return {"schema": schema, "schemaType": version.schema_type, "references": version.references}


def _message_name(proto, payload: bytes) -> str | None:
    """The full name of the message a Protobuf payload's indexes (framing) select in its file; None if none."""
    try:
        stream = io.BytesIO(payload)
        indexes = message_indexes(stream)
        message = proto.message_type[indexes[0]]
        names = [proto.package, message.name] if proto.package else [message.name]
        for index in indexes[1:]:
            message = message.nested_type[index]
            names.append(message.name)
    except (Undecodable, IndexError):
        return None
    return ".".join(names)
