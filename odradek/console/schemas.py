"""What the console's Schemas pages read from a schema registry, through Confluent Schema Registry's REST API only
(ours, odradek.registry, or any other): the subjects with their latest version and level, a subject's versions,
the diff between two of them and a compatibility test of a schema against the subject; and messages framed as
Confluent's serializers frame them (magic byte 0, the 4-byte schema id, for Protobuf the message indexes) decoded
with their writer's schema: Avro by fastavro, JSON as it is, Protobuf by protobuf's descriptor pool (the registry
extra's libraries; without them, or for an id the registry does not know, a message is shown as text).
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import threading
import urllib.error
import urllib.parse
import urllib.request

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SUBJECTS_SHOWN = 200


class RegistryRefused(Exception):
    """The registry's error answer (its message), or no answer."""


@dataclasses.dataclass
class SubjectRow:
    subject: str
    version: int
    schema_id: int
    schema_type: str


@dataclasses.dataclass
class VersionInfo:
    version: int
    schema_id: int
    schema_type: str
    schema: str  # pretty-printed (AVRO and JSON indented)
    references: list


@dataclasses.dataclass
class SubjectDetail:
    subject: str
    compatibility: str
    versions: list[VersionInfo]
    diff: list[str]  # unified diff lines between the two versions compared (empty: fewer than two)
    compared: tuple[int, int] | None


def pretty(schema_type: str, text: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            return text
    return text


class SchemaView:
    def __init__(self, url: str, timeout: float = 15.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._decoders: dict[int, object] = {}  # schema id -> its decoder (None: it cannot be decoded)
        self._lock = threading.Lock()

    def _call(self, path: str, body: dict | None = None):
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("message", exc.reason)
            except ValueError:
                message = exc.reason
            raise RegistryRefused(f"{exc.code}: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryRefused(f"no answer from the schema registry at {self.url}: {exc}") from None

    @staticmethod
    def _quoted(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def subjects(self) -> list[SubjectRow]:
        rows = []
        for subject in self._call("/subjects")[:SUBJECTS_SHOWN]:
            latest = self._call(f"/subjects/{self._quoted(subject)}/versions/latest")
            rows.append(SubjectRow(subject, latest["version"], latest["id"], latest.get("schemaType", "AVRO")))
        return rows

    def subject(self, subject: str, compared: tuple[int, int] | None = None) -> SubjectDetail:
        name = self._quoted(subject)
        versions = []
        for number in self._call(f"/subjects/{name}/versions"):
            found = self._call(f"/subjects/{name}/versions/{number}")
            schema_type = found.get("schemaType", "AVRO")
            versions.append(VersionInfo(number, found["id"], schema_type, pretty(schema_type, found["schema"]),
                                        found.get("references", [])))
        level = self._call(f"/config/{name}?defaultToGlobal=true").get("compatibilityLevel", "")
        by_number = {v.version: v for v in versions}
        if compared is None and len(versions) >= 2:
            compared = (versions[-2].version, versions[-1].version)
        diff = []
        if compared is not None and compared[0] in by_number and compared[1] in by_number:
            old, new = by_number[compared[0]], by_number[compared[1]]
            diff = list(difflib.unified_diff(old.schema.splitlines(), new.schema.splitlines(),
                                             f"version {old.version}", f"version {new.version}", lineterm=""))
        else:
            compared = None
        return SubjectDetail(subject, level, versions, diff, compared)

    def check(self, subject: str, schema_type: str, schema: str) -> tuple[bool, list[str]]:
        """Is `schema` compatible with the subject under its level: (answer, the registry's messages)."""
        answer = self._call(f"/compatibility/subjects/{self._quoted(subject)}/versions?verbose=true",
                            {"schema": schema, "schemaType": schema_type})
        return bool(answer.get("is_compatible")), list(answer.get("messages") or [])

    # ---- decoding messages ----

    def prefetch(self, values) -> None:
        """Looks up the writers' schemas of these framed keys and values, so that decode() answers from memory."""
        for schema_id in {_framed_id(value) for value in values} - {None}:
            self._decoder(schema_id)

    def decode(self, data: bytes | None) -> str | None:
        """The framed value decoded with its writer's schema, as indented JSON; None if it cannot be."""
        schema_id = _framed_id(data)
        decoder = self._decoder(schema_id) if schema_id is not None else None
        if decoder is None:
            return None
        try:
            return json.dumps(decoder(data[5:]), indent=2, ensure_ascii=False, default=str)
        except Exception:  # noqa: BLE001 - bytes that do not decode with their schema are shown as they are
            return None

    def _decoder(self, schema_id: int):
        with self._lock:
            if schema_id in self._decoders:
                return self._decoders[schema_id]
        try:
            decoder = self._make_decoder(self._call(f"/schemas/ids/{schema_id}?format=serialized"))
        except (RegistryRefused, ImportError, ValueError, KeyError, TypeError):
            decoder = None
        with self._lock:
            self._decoders[schema_id] = decoder
        return decoder

    def _make_decoder(self, found: dict):
        schema_type = found.get("schemaType", "AVRO")
        if schema_type == "JSON":
            return lambda payload: json.loads(payload)
        references = self._references(found.get("references") or [])
        if schema_type == "AVRO":
            import fastavro
            named: dict = {}
            for _, text in references:
                fastavro.parse_schema(json.loads(text), named_schemas=named)
            writer = fastavro.parse_schema(json.loads(found["schema"]), named_schemas=named)
            return lambda payload: fastavro.schemaless_reader(io.BytesIO(payload), writer, None)
        return _protobuf_decoder(found["schema"], references)

    def _references(self, references: list, seen: frozenset = frozenset()) -> list[tuple[str, str]]:
        """(name, schema) of the references, theirs first, as the registry gives them (Protobuf: serialized)."""
        resolved = []
        for reference in references:
            key = (reference["subject"], reference["version"])
            if key in seen:
                continue
            found = self._call(f"/subjects/{self._quoted(reference['subject'])}/versions/{reference['version']}"
                               f"?format=serialized")
            resolved += self._references(found.get("references") or [], seen | {key})
            resolved.append((reference["name"], found["schema"]))
        return resolved


def _framed_id(data: bytes | None) -> int | None:
    if data is None or len(data) < 5 or data[0] != 0:
        return None
    return int.from_bytes(data[1:5], "big")


def _protobuf_decoder(schema: str, references: list[tuple[str, str]]):
    import base64

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

    def decode(payload: bytes):
        stream = io.BytesIO(payload)
        indexes = [_zigzag(stream) for _ in range(_zigzag(stream))] or [0]
        message = root.message_types_by_name[main.message_type[indexes[0]].name]
        for index in indexes[1:]:
            message = message.nested_types[index]
        decoded = GetMessageClass(message)()
        decoded.ParseFromString(stream.read())
        return json_format.MessageToDict(decoded)

    return decode


def _zigzag(stream: io.BytesIO) -> int:
    """One zigzag varint (Confluent's message index framing)."""
    shift = result = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise ValueError("truncated message indexes")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
