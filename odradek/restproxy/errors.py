"""The REST proxy's errors as Confluent's REST Proxy answers them: an HTTP status and a JSON body
{"error_code": <int>, "message": <str>}, the error_code a five-digit code (HTTP status and a sequence number) or the
HTTP status itself.

RestError is raised anywhere a request is refused; `of_client_error` maps a broker's or librdkafka's refusal
(odradek.client.ClientError, named by librdkafka's error name) to the code Confluent's proxy gives the same Kafka
exception (its KafkaExceptionMapper): authentication 40101, authorization 40301, unknown topic or partition 40403
(40401 / 40402 where the v2 API names them), a bad request 40002, a retriable error 50003, any other 50002.
"""

from __future__ import annotations

from odradek.client import ClientError

# v2 and v3
BAD_REQUEST = 400  # the body is not JSON
UNAUTHORIZED = 401
NOT_FOUND = 404
NOT_ACCEPTABLE = 406
CONFLICT = 409
PAYLOAD_TOO_LARGE = 413
UNSUPPORTED_MEDIA_TYPE = 415
UNPROCESSABLE = 422  # JSON, but not the shape the endpoint takes
TOO_MANY_REQUESTS = 429
KAFKA_BAD_REQUEST = 40002
KAFKA_AUTHENTICATION = 40101
KAFKA_AUTHORIZATION = 40301
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
KAFKA_UNKNOWN_TOPIC_PARTITION = 40403
CONSUMER_GROUP_NOT_FOUND = 40405
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
JSON_CONVERSION = 42203
INVALID_CONSUMER_CONFIG = 42204
INVALID_PAYLOAD = 42206
PRODUCE_BATCH = 42208  # a records:batch request that breaks its rules (ids not distinct, empty, too many entries)
KAFKA_ERROR = 50002
KAFKA_RETRIABLE = 50003

BAD_REQUEST_ERRORS = frozenset({
    "TOPIC_ALREADY_EXISTS", "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR", "INVALID_REPLICA_ASSIGNMENT",
    "INVALID_CONFIG", "INVALID_REQUEST", "POLICY_VIOLATION", "TOPIC_EXCEPTION", "INVALID_TOPIC_EXCEPTION",
    "UNSUPPORTED_VERSION", "INVALID_ARG", "_INVALID_ARG", "NON_EMPTY_GROUP", "TOPIC_DELETION_DISABLED",
    "UNKNOWN_TOPIC_OR_PART_ASSIGN", "INVALID_GROUP_ID", "RECORD_LIST_TOO_LARGE", "MSG_SIZE_TOO_LARGE",
    "_MSG_SIZE_TOO_LARGE", "INVALID_RECORD", "SECURITY_DISABLED"})
NOT_FOUND_ERRORS = {"UNKNOWN_TOPIC_OR_PART": KAFKA_UNKNOWN_TOPIC_PARTITION, "_UNKNOWN_TOPIC":
                    KAFKA_UNKNOWN_TOPIC_PARTITION, "_UNKNOWN_PARTITION": KAFKA_UNKNOWN_TOPIC_PARTITION,
                    "GROUP_ID_NOT_FOUND": CONSUMER_GROUP_NOT_FOUND, "BROKER_NOT_AVAILABLE": NOT_FOUND}


class RestError(Exception):
    """A refusal: `status` the HTTP status, `code` the body's error_code."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.code, "message": self.message}


def of_client_error(exc: ClientError) -> RestError:
    name = exc.name
    if name == "_AUTHENTICATION" or name == "SASL_AUTHENTICATION_FAILED":
        return RestError(401, KAFKA_AUTHENTICATION, f"Authentication failed: {exc}")
    if name.endswith("_AUTHORIZATION_FAILED"):
        return RestError(403, KAFKA_AUTHORIZATION, f"Not authorized: {exc}")
    if name in NOT_FOUND_ERRORS:
        return RestError(404, NOT_FOUND_ERRORS[name], str(exc))
    if name in BAD_REQUEST_ERRORS:
        return RestError(400, KAFKA_BAD_REQUEST, str(exc))
    if exc.retriable or name in ("_TIMED_OUT", "REQUEST_TIMED_OUT", "_TRANSPORT"):
        return RestError(500, KAFKA_RETRIABLE, f"Kafka retriable error: {exc}")
    return RestError(500, KAFKA_ERROR, f"Kafka error: {exc}")


def topic_not_found(topic: str) -> RestError:
    return RestError(404, TOPIC_NOT_FOUND, f"Topic not found: {topic}")


def partition_not_found(topic: str, partition: int) -> RestError:
    return RestError(404, PARTITION_NOT_FOUND, f"Partition not found: {topic}-{partition}")


def unprocessable(message: str, code: int = UNPROCESSABLE) -> RestError:
    return RestError(422, code, message)
