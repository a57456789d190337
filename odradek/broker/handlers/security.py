"""SaslHandshake and SaslAuthenticate (KIP-152): drive the connection's SASL session (odradek.security.sasl).

On a listener without SASL, or after authentication, both answer as Kafka's KafkaApis does: ILLEGAL_SASL_STATE. A failed authentication is answered with SASL_AUTHENTICATION_FAILED and Kafka's message, then the
connection closes; a SaslAuthenticate after success is ILLEGAL_SASL_STATE and the connection stays usable.
"""

from __future__ import annotations

from odradek.errors import ErrorCode
from odradek.protocol import api
from odradek.security.sasl import SaslAuthenticationFailed

SASL_HANDSHAKE = api("SaslHandshake")
SASL_AUTHENTICATE = api("SaslAuthenticate")


def handlers(broker) -> dict:
    def answer_handshake(connection, header, request):
        session = connection.authenticating
        if session is None:  # as KafkaApis answers: no SASL here, or it is done
            return SASL_HANDSHAKE.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        code = session.handshake(request.mechanism, header.api_version)
        if code != ErrorCode.NONE:
            connection.close_after_answer = True
        return SASL_HANDSHAKE.response(error_code=code, mechanisms=list(session.mechanisms))

    def failure(code: ErrorCode, message: str):
        return SASL_AUTHENTICATE.response(error_code=code, error_message=message, auth_bytes=b"",
                                          session_lifetime_ms=0)

    def answer_authenticate(connection, header, request):
        session = connection.authenticating
        if session is None:
            message = ("SaslAuthenticate request received after successful authentication"
                       if connection.listener.uses_sasl else "SASL is not enabled on this listener")
            return failure(ErrorCode.ILLEGAL_SASL_STATE, message)
        if not session.expecting_tokens or session.raw_tokens:
            connection.close_after_answer = True
            return failure(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request, expected "
                           + ("SaslHandshake" if not session.expecting_tokens else "a bare SASL token"))
        try:
            challenge = session.step(request.auth_bytes)
        except SaslAuthenticationFailed as exc:
            connection.close_after_answer = True
            return failure(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
        connection.note_authentication()
        return SASL_AUTHENTICATE.response(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                                          session_lifetime_ms=0)

    return {SASL_HANDSHAKE.key: answer_handshake, SASL_AUTHENTICATE.key: answer_authenticate}
