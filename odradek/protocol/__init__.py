"""The Kafka wire codec: bytes in, typed messages out, and back; sans-IO.

Schemas (`apis`, `headers`, `internal`) are declared in our DSL (`schema`) as transcriptions of Kafka's JSON
message definitions; `codec` turns them into a C encoder and decoder per version (`_codec.c`); `frames` handles whole frames;
`registry` says which APIs and versions we advertise.  Message classes live in `odradek.protocol.apis`.
"""

from .errors import ProtocolError, UnsupportedVersion
from .frames import decode_request, decode_response, encode_request, encode_response, pre_encode
from .headers import RequestHeader, ResponseHeader
from .registry import API_BY_KEY, Api, api

__all__ = [
    "API_BY_KEY", "Api", "ProtocolError", "RequestHeader", "ResponseHeader", "UnsupportedVersion", "api",
    "decode_request", "decode_response", "encode_request", "encode_response", "pre_encode",
]
