"""Request and response headers, declared in the same DSL as the messages (Kafka's RequestHeader.json and
ResponseHeader.json).

Which header version goes with which message is decided by the registry: request header v2 / response header v1
for flexible versions, v1 / v0 otherwise, and ApiVersions responses always v0 (a client that sent an ApiVersions
version we do not support must still be able to read our answer).  client_id stays a non-compact string even in
header v2, hence its field-level `flexible_versions="none"`.
"""

from __future__ import annotations

from .schema import INT16, INT32, STRING, field, message

RequestHeader = message(
    "RequestHeader", valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("api_key", INT16, "0+"),
        field("api_version", INT16, "0+"),
        field("correlation_id", INT32, "0+"),
        field("client_id", STRING, "1+", nullable_versions="1+", ignorable=True, flexible_versions="none"),
    ],
)

ResponseHeader = message(
    "ResponseHeader", valid_versions="0-1", flexible_versions="1+",
    fields=[
        field("correlation_id", INT32, "0+"),
    ],
)
