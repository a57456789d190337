"""The REST proxy's Starlette (ASGI) application: the v2 routes (odradek.restproxy.v2) and the v3 routes
(odradek.restproxy.v3) over one Proxy, which holds the clients by principal and the v2 consumer instances.

Every request: the body read up to `max_request_bytes` (413 beyond), basic auth checked when the proxy asks for it
(401 without credentials; the credentials are the SASL user the request acts as), blocking client calls run in
Starlette's thread pool. Every failure is a JSON error body with Confluent's error_code: a RestError as raised,
a ClientError mapped by errors.of_client_error, a wrong path or method 404 / 405; anything else is logged and 500.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
from collections.abc import Callable, Mapping

import confluent_kafka
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from odradek.client import ClientError
from odradek.restproxy.clients import ClientPool, PrincipalClients
from odradek.restproxy.consumers import DEFAULT_INSTANCE_TIMEOUT_MS, DEFAULT_MAX_INSTANCES, ConsumerInstances
from odradek.restproxy.errors import KAFKA_BAD_REQUEST, PAYLOAD_TOO_LARGE, UNAUTHORIZED, RestError, of_client_error
from odradek.restproxy.formats import parse_json
from odradek.restproxy.schemas import SERVED, SchemaFormats

log = logging.getLogger("odradek.restproxy")
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # Confluent's consumer.request.max.bytes


@dataclasses.dataclass
class ProxySettings:
    bootstrap_servers: str
    client_config: Mapping[str, str] = dataclasses.field(default_factory=dict)  # security.protocol, sasl.*, ssl.*
    basic_auth: bool = False  # each request's basic-auth user and password log in to the brokers (SASL)
    timeout: float = 15.0
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    instance_timeout_ms: int = DEFAULT_INSTANCE_TIMEOUT_MS
    max_instances: int = DEFAULT_MAX_INSTANCES
    max_principals: int = 32
    schema_registry_url: str | None = None  # the avro and jsonschema formats go through this registry


class Proxy:
    """What the routes share: the settings, the clients by principal, the v2 consumer instances."""

    def __init__(self, settings: ProxySettings):
        self.settings = settings
        self.pool = ClientPool(settings.bootstrap_servers, settings.client_config, settings.timeout,
                               settings.max_principals)
        self.schemas = SchemaFormats(settings.schema_registry_url) if settings.schema_registry_url else None
        self.schema_formats = SERVED if self.schemas is not None else ()
        self.instances = ConsumerInstances(settings.instance_timeout_ms, settings.max_instances, self.schema_formats)
        self._cluster_id: str | None = None

    def credentials(self, request: Request) -> tuple[str, str] | None:
        """The request's basic-auth user and password (None when the proxy takes no basic auth); 401 without."""
        if not self.settings.basic_auth:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, encoded = header.partition(" ")
        try:
            user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            colon = ""
        if scheme.lower() != "basic" or not colon or not user:
            raise RestError(401, UNAUTHORIZED, "Unauthorized: basic authentication is required")
        return user, password

    async def clients(self, request: Request) -> PrincipalClients:
        return await self.call(self.pool.get, self.credentials(request))

    def owner(self, request: Request):
        """Who owns the consumer instances a request makes: its user (None without basic auth)."""
        credentials = self.credentials(request)
        return credentials and credentials[0]

    async def call(self, function: Callable, *args):
        """A blocking client call in the thread pool; a client's failure as the RestError Confluent answers, and
        an argument confluent-kafka refuses before asking (a partition count out of its range, an empty config
        name: ValueError, OverflowError) as a bad request."""
        try:
            return await run_in_threadpool(function, *args)
        except ClientError as exc:
            raise of_client_error(exc) from None
        except confluent_kafka.KafkaException as exc:
            raise of_client_error(ClientError.of(exc)) from None
        except (ValueError, OverflowError) as exc:
            raise RestError(400, KAFKA_BAD_REQUEST, f"Bad request: {exc}") from None

    async def cluster_id(self, clients: PrincipalClients) -> str:
        if self._cluster_id is None:
            self._cluster_id = (await self.call(clients.admin.describe_cluster)).cluster_id
        return self._cluster_id

    def close(self) -> None:
        self.instances.close()
        self.pool.close()


async def body_of(request: Request, limit: int) -> bytes:
    """The request's body, at most `limit` bytes (413 beyond, told by Content-Length or found reading)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def too_large(limit: int) -> RestError:
    return RestError(413, PAYLOAD_TOO_LARGE, f"Request body larger than {limit} bytes")


async def json_body(request: Request, proxy: Proxy, required: bool = True):
    """The request's JSON body (None for an empty body when not required; 400 if it is not JSON)."""
    body = await body_of(request, proxy.settings.max_request_bytes)
    if not body.strip() and not required:
        return None
    return parse_json(body)


def create_app(proxy: Proxy) -> Starlette:
    from odradek.restproxy import v2, v3

    async def failed(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            exc = RestError(exc.status_code, exc.status_code, f"HTTP {exc.status_code} {exc.detail}")
        elif not isinstance(exc, RestError):
            log.exception("%s %s failed", request.method, request.url.path)
            exc = RestError(500, 500, f"Internal server error: {type(exc).__name__}")
        headers = {"WWW-Authenticate": 'Basic realm="odradek"'} if exc.status == 401 else None
        content_type = "application/json" if request.url.path.startswith("/v3") else "application/vnd.kafka.v2+json"
        return JSONResponse(exc.body(), exc.status, headers=headers, media_type=content_type)

    return Starlette(routes=v2.routes(proxy) + v3.routes(proxy),
                     exception_handlers={RestError: failed, HTTPException: failed, Exception: failed})
