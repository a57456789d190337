"""What goes over the wire, as plain functions: the v2 media types (application/vnd.kafka.<format>.v2+json), the
embedded formats' keys and values (binary: base64 text; json: any JSON value, stored as its UTF-8 JSON text), the
v3 produce request's key and value ({"type": "BINARY" | "JSON" | "STRING", "data": ...}) and the checks of a
request body's fields, each refusal a RestError with Confluent's code.

The schema formats (avro, jsonschema, protobuf: odradek.restproxy.schemas) need a schema registry: without one they
are refused with 42206, as Confluent's proxy refuses them when it has no schema.registry.url.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from odradek.restproxy.errors import (BAD_REQUEST, INVALID_PAYLOAD, JSON_CONVERSION, NOT_ACCEPTABLE,
                                      UNSUPPORTED_MEDIA_TYPE, RestError, unprocessable)

V2_JSON = "application/vnd.kafka.v2+json"
EMBEDDED_FORMATS = ("binary", "json")
SCHEMA_FORMATS = ("avro", "protobuf", "jsonschema")
_V2_TYPE = re.compile(r"^application/vnd\.kafka(?:\.(?P<format>[a-z]+))?\.v2\+json$")
# what a v2 answer (application/vnd.kafka.v2+json) satisfies in an Accept header
V2_ACCEPTED = ("application/vnd.kafka.v2+json", "application/vnd.kafka+json", "application/json", "application/*",
               "*/*")
NO_REGISTRY = "Payload error. Schema Registry must be configured when using schemas."


def media_type(header: str | None) -> str:
    """The media type of a Content-Type or one Accept entry, without parameters, lower case."""
    return (header or "").split(";", 1)[0].strip().lower()


def accepted(header: str | None) -> list[str]:
    """The media types an Accept header names (["*/*"] without one)."""
    types = [media_type(part) for part in (header or "").split(",") if media_type(part)]
    return types or ["*/*"]


def require_v2_answer(accept: str | None) -> None:
    """406 unless the Accept header takes application/vnd.kafka.v2+json."""
    if not any(kind in V2_ACCEPTED for kind in accepted(accept)):
        raise RestError(406, NOT_ACCEPTABLE, "HTTP 406 Not Acceptable")


def produce_format(content_type: str | None, schemas: tuple[str, ...]) -> str:
    """The embedded format of a v2 produce request's Content-Type: binary, json or one of the schema formats served
    (`schemas`); 415 for any other type, 42206 for a schema format not served."""
    match = _V2_TYPE.match(media_type(content_type))
    fmt = match["format"] if match else None
    if fmt in SCHEMA_FORMATS:
        return schema_format(fmt, schemas)
    if fmt not in EMBEDDED_FORMATS:
        raise RestError(415, UNSUPPORTED_MEDIA_TYPE, "HTTP 415 Unsupported Media Type")
    return fmt


def schema_format(fmt: str, schemas: tuple[str, ...]) -> str:
    """`fmt` if it is served (`schemas`: the schema formats a registry serves), else 42206."""
    if fmt not in schemas:
        raise RestError(422, INVALID_PAYLOAD, NO_REGISTRY if not schemas else f"Payload error. The {fmt} format "
                                                                                "is not served")
    return fmt


def records_format(accept: str | None) -> str | None:
    """The embedded format a v2 records read asks for in its Accept header (None: it names none)."""
    for kind in accepted(accept):
        match = _V2_TYPE.match(kind)
        if match and match["format"]:
            return match["format"]
    return None


def require_v2_body(content_type: str | None) -> None:
    """415 unless a v2 request without embedded data comes as application/vnd.kafka.v2+json (or application/json)."""
    if media_type(content_type) not in (V2_JSON, "application/json", "application/vnd.kafka+json"):
        raise RestError(415, UNSUPPORTED_MEDIA_TYPE, "HTTP 415 Unsupported Media Type")


def parse_json(body: bytes) -> Any:
    """A request body's JSON; 400 if it is not JSON."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RestError(400, BAD_REQUEST, f"Malformed JSON: {exc}") from None


# ------------------------------------------------------------------------------------------------ fields
def field(body: Any, name: str, kind: type | tuple[type, ...], required: bool = False, default: Any = None) -> Any:
    """body[name], checked to be of `kind` (bool is not an int); 422 if it is not, or is missing and required."""
    if not isinstance(body, dict):
        raise unprocessable("The request body must be a JSON object")
    value = body.get(name)
    if value is None:
        if required:
            raise unprocessable(f"{name} may not be null")
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise unprocessable(f"{name} must be {' or '.join(k.__name__ for k in kinds)}")
    return value


def partitions_of(body: Any, name: str = "partitions", with_offset: bool = False) -> list[tuple[str, int, int]]:
    """[(topic, partition, offset)] from [{"topic": ..., "partition": ..., "offset": ...}] (offset -1 without)."""
    entries = field(body, name, list, required=True)
    found = []
    for entry in entries:
        topic = field(entry, "topic", str, required=True)
        partition = field(entry, "partition", int, required=True)
        offset = field(entry, "offset", int, required=with_offset, default=-1)
        found.append((topic, partition, offset))
    return found


# --------------------------------------------------------------------------------------- embedded data
def encode_v2(fmt: str, data: Any, what: str) -> bytes | None:
    """A v2 record's key or value as the bytes stored: base64 text decoded (binary), or JSON text (json)."""
    if data is None:
        return None
    if fmt == "binary":
        if not isinstance(data, str):
            raise unprocessable(f"{what} must be base64 text in the binary format", JSON_CONVERSION)
        return b64decode(data, what)
    return json.dumps(data, separators=(",", ":")).encode()


def decode_v2(fmt: str, data: bytes | None) -> Any:
    """A stored key or value as a v2 records answer carries it (binary: base64; json: the JSON value)."""
    if data is None:
        return None
    if fmt == "binary":
        return base64.b64encode(data).decode()
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RestError(500, 50002, "Kafka error: a record is not JSON; read it with the binary format") from None


def b64decode(text: str, what: str, v3: bool = False) -> bytes:
    """Base64 text's bytes; not base64: 422 42203 in v2, 400 in v3."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        status, code = (400, BAD_REQUEST) if v3 else (422, JSON_CONVERSION)
        raise RestError(status, code, f"{what} is not valid base64") from None


def v3_type(data: Any, what: str) -> str | None:
    """The type of a v3 produce request's key or value ({"type": ..., "data": ...}): BINARY, JSON, STRING or a schema
    type (AVRO, JSONSCHEMA, PROTOBUF; one with a schema or schema_id and no type is AVRO); None for no key or value."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise unprocessable(f"{what} must be an object with type and data")
    if data.get("type") is not None:
        return str(data["type"]).upper()
    return "AVRO" if "schema" in data or "schema_id" in data else "JSON"


def encode_v3(data: Any, what: str) -> tuple[bytes | None, str | None]:
    """A v3 produce request's key or value of type BINARY, JSON or STRING as (stored bytes, type); None passes."""
    kind = v3_type(data, what)
    if kind is None:
        return None, None
    value = data.get("data")
    if kind == "BINARY":
        if not isinstance(value, str):
            raise RestError(400, BAD_REQUEST, f"{what}.data must be base64 text for type BINARY")
        return b64decode(value, what, v3=True), kind
    if kind == "STRING":
        if not isinstance(value, str):
            raise RestError(400, BAD_REQUEST, f"{what}.data must be text for type STRING")
        return value.encode(), kind
    if kind == "JSON":
        return (None if value is None else json.dumps(value, separators=(",", ":")).encode()), kind
    raise RestError(400, BAD_REQUEST, f"{what}.type must be BINARY, JSON or STRING")
