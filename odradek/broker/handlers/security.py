"""SaslHandshake and SaslAuthenticate (KIP-152): drive the connection's SASL session (odradek.security.sasl).

On a listener without SASL, or after authentication, both answer as Kafka's KafkaApis does: ILLEGAL_SASL_STATE; but
where connections.max.reauth.ms is set, a SaslHandshake on an authenticated connection starts a KIP-368
re-authentication (same mechanism, same principal), and a successful SaslAuthenticate v1+ says when the session ends.
A failed authentication is answered with SASL_AUTHENTICATION_FAILED and Kafka's message, then the connection closes;
a SaslAuthenticate after success is ILLEGAL_SASL_STATE and the connection stays usable.

DescribeUserScramCredentials and AlterUserScramCredentials manage the SCRAM credentials in the catalogue with Kafka's
checks and messages (KRaft's ScramControlManager and ScramImage): one change per user and request, known mechanism,
non-empty name, 4096..16384 iterations; the client sends the salted password, never the password. With an
authorizer, as KafkaApis: describing needs DESCRIBE on the cluster, altering ALTER on it, else every user asked
about is answered CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation
from odradek.security.sasl import SaslAuthenticationFailed
from odradek.security.scram import (MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS, ScramCredential,
                                    credential_from_salted)

SASL_HANDSHAKE = api("SaslHandshake")
SASL_AUTHENTICATE = api("SaslAuthenticate")
DESCRIBE_SCRAM = api("DescribeUserScramCredentials")
ALTER_SCRAM = api("AlterUserScramCredentials")
MECHANISM_NAMES = {number: name for name, number in MECHANISM_TYPES.items()}


def handlers(broker) -> dict:
    def answer_handshake(connection, header, request):
        session = connection.authenticating
        if session is None and connection.sasl is not None and connection.sasl.lifetime_ms > 0:
            session = connection.authenticating = connection.sasl  # KIP-368 re-authentication
            session.reauthenticate()
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
        try:
            challenge = session.step(request.auth_bytes)
        except SaslAuthenticationFailed as exc:
            connection.close_after_answer = True
            return failure(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
        connection.note_authentication()
        lifetime_ms = session.lifetime_ms if connection.authenticating is None else 0
        return SASL_AUTHENTICATE.response(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                                          session_lifetime_ms=lifetime_ms)

    def answer_describe_scram(connection, header, request):
        try:
            broker.access(connection).require_cluster(AclOperation.DESCRIBE)
        except KafkaError as exc:  # Kafka's getErrorResponse: the error on the request and on every user asked
            return DESCRIBE_SCRAM.response(
                throttle_time_ms=0, error_code=exc.code, error_message=exc.message, results=[
                    DESCRIBE_SCRAM.response.DescribeUserScramCredentialsResult(
                        user=user.name, error_code=exc.code, error_message=exc.message, credential_infos=[])
                    for user in request.users or ()])
        stored = broker.metadata.scram_credentials
        asked = [user.name for user in request.users] if request.users else sorted(stored)
        results = []
        for user in dict.fromkeys(asked):
            code, message, infos = ErrorCode.NONE, None, []
            if asked.count(user) > 1:
                code = ErrorCode.DUPLICATE_RESOURCE
                message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            elif user not in stored:
                code = ErrorCode.RESOURCE_NOT_FOUND
                message = f"Attempt to describe a user credential that does not exist: {user}"
            else:
                infos = [DESCRIBE_SCRAM.response.CredentialInfo(
                    mechanism=MECHANISM_TYPES[mechanism], iterations=ScramCredential.from_text(text).iterations)
                    for mechanism, text in sorted(stored[user].items())]
            results.append(DESCRIBE_SCRAM.response.DescribeUserScramCredentialsResult(
                user=user, error_code=code, error_message=message, credential_infos=infos))
        return DESCRIBE_SCRAM.response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                       results=results)

    def refusal(name: str, mechanism_type: int) -> tuple[ErrorCode, str] | None:
        if not name:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        if mechanism_type not in MECHANISM_NAMES:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        return None

    async def answer_alter_scram(connection, header, request):
        Result = ALTER_SCRAM.response.AlterUserScramCredentialsResult
        try:
            broker.access(connection).require_cluster(AclOperation.ALTER)
        except KafkaError as exc:  # Kafka's getErrorResponse: every user named, once
            named = dict.fromkeys(change.name for change in [*request.deletions, *request.upsertions])
            return ALTER_SCRAM.response(throttle_time_ms=0, results=[
                Result(user=name, error_code=exc.code, error_message=exc.message) for name in named])
        errors: dict[str, tuple[ErrorCode, str]] = {}
        changes: dict[str, tuple[str, str, ScramCredential | None]] = {}
        twice = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")

        def first_change(name: str) -> bool:
            """Kafka takes one change per user and request: a second one turns the user's result into an error."""
            if name in errors:
                return False
            if changes.pop(name, None) is not None:
                errors[name] = twice
                return False
            return True

        for deletion in request.deletions:
            name = deletion.name
            if not first_change(name):
                continue
            error = refusal(name, deletion.mechanism)
            mechanism = MECHANISM_NAMES.get(deletion.mechanism)
            if error is None and broker.metadata.scram_credential(name, mechanism) is None:
                error = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            if error is not None:
                errors[name] = error
            else:
                changes[name] = (name, mechanism, None)
        for upsertion in request.upsertions:
            name = upsertion.name
            if not first_change(name):
                continue
            error = refusal(name, upsertion.mechanism)
            if error is None and upsertion.iterations < MIN_ITERATIONS:
                error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            elif error is None and upsertion.iterations > MAX_ITERATIONS:
                error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            if error is not None:
                errors[name] = error
                continue
            mechanism = MECHANISM_NAMES[upsertion.mechanism]
            changes[name] = (name, mechanism, credential_from_salted(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations))
        if changes:
            await broker.catalogue_write(broker.metadata.set_scram_credentials, list(changes.values()))
        results = [Result(user=name, error_code=ErrorCode.NONE, error_message=None) for name in changes]
        results += [Result(user=name, error_code=code, error_message=message)
                    for name, (code, message) in errors.items()]
        return ALTER_SCRAM.response(throttle_time_ms=0, results=results)

    return {SASL_HANDSHAKE.key: answer_handshake, SASL_AUTHENTICATE.key: answer_authenticate,
            DESCRIBE_SCRAM.key: answer_describe_scram, ALTER_SCRAM.key: answer_alter_scram}
