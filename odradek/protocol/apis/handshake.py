"""Connection set-up: version negotiation and SASL, and the SCRAM credentials SASL checks against.

Transcribed field by field from Kafka's JSON message definitions (clients/src/main/resources/common/message);
names are Kafka's in snake_case.
"""

from __future__ import annotations

from ..schema import BOOL, BYTES, INT8, INT16, INT32, INT64, STRING, array, field, message, struct

ApiVersionsRequest = message(
    "ApiVersionsRequest", api_key=18, valid_versions="0-4", flexible_versions="3+",
    fields=[
        field("client_software_name", STRING, "3+", ignorable=True),
        field("client_software_version", STRING, "3+", ignorable=True),
    ],
)

ApiVersionsResponse = message(
    "ApiVersionsResponse", api_key=18, valid_versions="0-4", flexible_versions="3+", write_tagged=False,
    fields=[
        field("error_code", INT16, "0+"),
        field("api_keys", array(struct("ApiVersion", [
            field("api_key", INT16, "0+"),
            field("min_version", INT16, "0+"),
            field("max_version", INT16, "0+"),
        ])), "0+"),
        field("throttle_time_ms", INT32, "1+", ignorable=True),
        field("supported_features", array(struct("SupportedFeatureKey", [
            field("name", STRING, "3+"),
            field("min_version", INT16, "3+"),
            field("max_version", INT16, "3+"),
        ])), "3+", tagged_versions="3+", tag=0, ignorable=True),
        field("finalized_features_epoch", INT64, "3+", tagged_versions="3+", tag=1, default=-1, ignorable=True),
        field("finalized_features", array(struct("FinalizedFeatureKey", [
            field("name", STRING, "3+"),
            field("max_version_level", INT16, "3+"),
            field("min_version_level", INT16, "3+"),
        ])), "3+", tagged_versions="3+", tag=2, ignorable=True),
        field("zk_migration_ready", BOOL, "3+", tagged_versions="3+", tag=3, default=False, ignorable=True),
    ],
)

SaslHandshakeRequest = message(
    "SaslHandshakeRequest", api_key=17, valid_versions="0-1", flexible_versions="none",
    fields=[
        field("mechanism", STRING, "0+"),
    ],
)

SaslHandshakeResponse = message(
    "SaslHandshakeResponse", api_key=17, valid_versions="0-1", flexible_versions="none",
    fields=[
        field("error_code", INT16, "0+"),
        field("mechanisms", array(STRING), "0+"),
    ],
)

SaslAuthenticateRequest = message(
    "SaslAuthenticateRequest", api_key=36, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("auth_bytes", BYTES, "0+"),
    ],
)

SaslAuthenticateResponse = message(
    "SaslAuthenticateResponse", api_key=36, valid_versions="0-2", flexible_versions="2+",
    fields=[
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+"),
        field("auth_bytes", BYTES, "0+"),
        field("session_lifetime_ms", INT64, "1+", default=0, ignorable=True),
    ],
)

DescribeUserScramCredentialsRequest = message(
    "DescribeUserScramCredentialsRequest", api_key=50, valid_versions="0", flexible_versions="0+",
    fields=[
        field("users", array(struct("UserName", [
            field("name", STRING, "0+"),
        ])), "0+", nullable_versions="0+"),
    ],
)

DescribeUserScramCredentialsResponse = message(
    "DescribeUserScramCredentialsResponse", api_key=50, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable_versions="0+"),
        field("results", array(struct("DescribeUserScramCredentialsResult", [
            field("user", STRING, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+"),
            field("credential_infos", array(struct("CredentialInfo", [
                field("mechanism", INT8, "0+"),
                field("iterations", INT32, "0+"),
            ])), "0+"),
        ])), "0+"),
    ],
)

AlterUserScramCredentialsRequest = message(
    "AlterUserScramCredentialsRequest", api_key=51, valid_versions="0", flexible_versions="0+",
    fields=[
        field("deletions", array(struct("ScramCredentialDeletion", [
            field("name", STRING, "0+"),
            field("mechanism", INT8, "0+"),
        ])), "0+"),
        field("upsertions", array(struct("ScramCredentialUpsertion", [
            field("name", STRING, "0+"),
            field("mechanism", INT8, "0+"),
            field("iterations", INT32, "0+"),
            field("salt", BYTES, "0+"),
            field("salted_password", BYTES, "0+"),
        ])), "0+"),
    ],
)

AlterUserScramCredentialsResponse = message(
    "AlterUserScramCredentialsResponse", api_key=51, valid_versions="0", flexible_versions="0+",
    fields=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct("AlterUserScramCredentialsResult", [
            field("user", STRING, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable_versions="0+"),
        ])), "0+"),
    ],
)
