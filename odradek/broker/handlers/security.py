"""SaslHandshake and SaslAuthenticate: no SASL mechanism is served until security lands, so clients that ask get
UNSUPPORTED_SASL_MECHANISM with the (empty) list of what we do support, and a clear error rather than a hang.
"""

from __future__ import annotations

from odradek.errors import ErrorCode
from odradek.protocol import api

SASL_HANDSHAKE = api("SaslHandshake")
SASL_AUTHENTICATE = api("SaslAuthenticate")


def handlers(broker) -> dict:
    def answer_handshake(connection, header, request):
        return SASL_HANDSHAKE.response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=[])

    def answer_authenticate(connection, header, request):
        return SASL_AUTHENTICATE.response(
            error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message="SASL is not enabled on this listener",
            auth_bytes=b"", session_lifetime_ms=0)

    return {SASL_HANDSHAKE.key: answer_handshake, SASL_AUTHENTICATE.key: answer_authenticate}
