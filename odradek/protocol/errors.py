"""The two ways decoding a frame can fail, kept distinct because the broker reacts differently.

`ProtocolError`: the bytes are not a request we can parse (too short, garbled, unknown API key); the connection
cannot be trusted any more and is closed.  `UnsupportedVersion`: the header parsed and names an API we serve, but
at a version outside what we advertise; it carries the header so the broker can still answer (ApiVersions gets an
UNSUPPORTED_VERSION v0 response listing our versions, per KIP-511; any other API closes the connection).
"""

from __future__ import annotations


class ProtocolError(Exception):
    pass


class UnsupportedVersion(ProtocolError):
    def __init__(self, header):
        super().__init__(f"api key {header.api_key} version {header.api_version} is not supported")
        self.header = header
