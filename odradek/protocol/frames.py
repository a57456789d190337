"""Whole frames: bytes in, (header, typed message) out, and back.  Sans-IO: no sockets, no buffering.

Request frames arrive WITHOUT their 4-byte size prefix (the network shell has already used it to cut the
frame); encoded frames come back WITH it.  A response is a list of chunks so that a `FileRegion` in a `records`
field stays a separate object for sendfile; without regions it is a single bytes chunk.

Every failure to parse is a `ProtocolError` (see `codec.run_decoder`).
"""

from __future__ import annotations

import struct

from . import _codec
from .codec import Encoded, decoder, encoder, run_decoder, struct_encoder
from .errors import ProtocolError, UnsupportedVersion
from .headers import RequestHeader, ResponseHeader
from .registry import API_BY_KEY, Api

_I32 = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_KEY_AND_VERSION = struct.Struct(">I")  # both as one number: the key of the per-(api, version) tables below
_REQUEST_HEADER_DECODERS = [decoder(RequestHeader, v) for v in range(3)]
_REQUEST_HEADER_ENCODERS = [encoder(RequestHeader, v) for v in range(3)]
_RESPONSE_HEADER_DECODERS = [decoder(ResponseHeader, v) for v in range(2)]

# Per advertised (api key, version), filled at its first request: what decoding a request and encoding its answer
# need, so that each request costs one dict lookup instead of a walk through the registry.
_REQUEST_DECODING: dict[int, tuple] = {}  # (header decoder, body decoder, what a failure names)
_RESPONSE_ENCODING: dict[tuple[int, int], tuple] = {}  # (response class, flexible header?, body encoder)


def _known_api(key: int) -> Api:
    a = API_BY_KEY.get(key)
    if a is None:
        raise ProtocolError(f"unknown api key {key}")
    return a


def decode_request(frame) -> tuple:
    """Parse one request frame (no size prefix) into (RequestHeader, request object).

    Raises UnsupportedVersion(header) for a known API at a version we do not advertise: for ApiVersions answer
    with `encode_response(RequestHeader(api_key=18, api_version=0, correlation_id=...), ApiVersionsResponse(
    error_code=UNSUPPORTED_VERSION, api_keys=[...]))` (KIP-511); for anything else close the connection."""
    decoded = _codec.decode_request(frame, _REQUEST_DECODING)  # in C for the (api, version)s seen before
    if decoded is not None:
        return decoded
    key, version = _KEY_VERSION.unpack_from(frame, 0)  # the frame is long enough: decode_request checked
    a = _known_api(key)
    header_decoder = _REQUEST_HEADER_DECODERS[a.request_header_version(version)]
    if not a.min_version <= version <= a.max_version:
        raise UnsupportedVersion(run_decoder(header_decoder, frame, 0, "request header")[0])
    # remembered for the versions we serve only, so no peer can grow the table
    _REQUEST_DECODING[_KEY_AND_VERSION.unpack_from(frame, 0)[0]] = (
        header_decoder, a.codec("request_decoder", version), f"{a.name} v{version} request")
    return decode_request(frame)


def _check_body(cls: type, version: int, body):
    if type(body) is not cls:
        raise TypeError(f"expected {cls.__name__}, got {type(body).__name__}")
    if version not in cls._schema.valid_versions:
        raise ValueError(f"{cls.__name__} has no version {version}")


def encode_response(header, body) -> list:
    """The complete response frame for request `header`, as chunks (bytes and FileRegion objects)."""
    encoding = _RESPONSE_ENCODING.get((header.api_key, header.api_version))
    if encoding is None:
        encoding = _response_encoding(header.api_key, header.api_version, body)
    cls, flexible_header, body_encoder = encoding
    if type(body) is not cls:
        raise TypeError(f"expected {cls.__name__}, got {type(body).__name__}")
    return body_encoder.answer(header.correlation_id, flexible_header, body)


def _response_encoding(key: int, version: int, body) -> tuple:
    """(response class, whether its header is the flexible one, body encoder) for answers to (key, version)."""
    a = _known_api(key)
    _check_body(a.response, version, body)
    encoding = _RESPONSE_ENCODING[key, version] = (a.response, bool(a.response_header_version(version)),
                                                    a.codec("response_encoder", version))
    return encoding


def pre_encode(api_key: int, version: int, value) -> Encoded:
    """`value`, a struct nested in that API's response, encoded as that response's `version` encodes it: it can
    then stand for `value` as an array element in any answer of that version, and costs a copy instead of an
    encode (Metadata's topic entries, the same for every client until the topic changes)."""
    a = _known_api(api_key)
    w: list = []
    struct_encoder(type(value)._schema, version, a.is_flexible(version), a.response._schema.write_tagged,
                   strict=False)(value, w)
    return Encoded(b"".join(w))


def encode_request(header, body) -> bytes:
    """A complete request frame, size prefix included (for tests, tools and inter-broker clients)."""
    a = _known_api(header.api_key)
    version = header.api_version
    _check_body(a.request, version, body)
    w: list = []
    _REQUEST_HEADER_ENCODERS[a.request_header_version(version)](header, w)
    a.codec("request_encoder", version)(body, w)
    data = b"".join(w)
    return _I32.pack(len(data)) + data


def decode_response(api_key: int, api_version: int, frame) -> tuple:
    """Parse a response frame (no size prefix) to a request we sent: returns (correlation_id, response)."""
    a = _known_api(api_key)
    if api_version not in a.response._schema.valid_versions:
        raise ProtocolError(f"{a.name} has no version {api_version}")
    mv = _codec.byte_view(frame)
    header, pos = run_decoder(_RESPONSE_HEADER_DECODERS[a.response_header_version(api_version)], mv, 0,
                               "response header")
    body, _ = run_decoder(a.codec("response_decoder", api_version), mv, pos, f"{a.name} v{api_version} response")
    return header.correlation_id, body
