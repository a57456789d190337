"""The REST API of Confluent Schema Registry as a starlette app over odradek.registry.service: Confluent's routes,
query parameters, response bodies, content type (application/vnd.schemaregistry.v1+json) and error JSON
(`{"error_code": 40401, "message": "Subject 'x' not found."}`).

With SASL on the registry's cluster connection, every request logs in with HTTP basic auth and is checked against
the subject's topic ACLs (odradek.registry.auth); listings show the subjects the caller may read.
The `/contexts/{ctx}/...` paths are rewritten into the requests they stand for (context_path), as Confluent's
ContextFilter does, before auth or routing sees them.
Endpoints are plain functions (starlette runs them in its thread pool: a write waits for the cluster). A body that
is not JSON is a 400 and one of the wrong shape a 422, as Confluent answers them; nothing a client sends is a 500.
"""

from __future__ import annotations

import importlib.metadata

import json
import urllib.parse
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from odradek.registry import schemas
from odradek.registry.auth import Access
from odradek.registry.service import Registry, RegistryError
from odradek.registry.state import CONTEXT_PREFIX, Version, context_of, qualifier, unqualified
from odradek.registry.store import StoreError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES = ["JSON", "PROTOBUF", "AVRO"]  # the order Confluent lists them in


def reply(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status, media_type=CONTENT_TYPE)


def error(status: int, error_code: int, message: str) -> Response:
    return reply({"error_code": error_code, "message": message}, status)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _int(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query_params.get(name, default))
    except ValueError:
        raise RegistryError(422, 422, f"Invalid {name} {request.query_params[name]!r}: a number is expected")


def _page(request: Request, items: list) -> list:
    offset, limit = _int(request, "offset", 0), _int(request, "limit", -1)
    items = items[max(offset, 0):]
    return items if limit < 0 else items[:limit]


def _schema_id(request: Request) -> int:
    try:
        return int(request.path_params["id"])
    except ValueError:
        raise RegistryError(404, 40403, "Schema not found") from None


def _rights(method: str, path: str) -> tuple[bool, str | None, bool]:
    """(checked, subject or None for the global config / mode, write) of a request; unchecked ones need a login."""
    parts = path.strip("/").split("/")
    if parts[0] == "subjects" and len(parts) > 1:
        return True, parts[1], method in ("POST", "DELETE") and not (method == "POST" and len(parts) == 2)
    if parts[0] == "compatibility" and len(parts) > 2:
        return True, parts[2], False
    if parts[0] in ("config", "mode"):
        return True, parts[1] if len(parts) > 1 else None, method in ("PUT", "DELETE")
    return False, None, False


def context_path(path: str, query: str) -> tuple[str, str]:
    """A `/contexts/{ctx}/...` request as the request it stands for, as Confluent's ContextFilter rewrites it: the
    subject after a `subjects` segment, or after a leading `config` / `mode`, is qualified with the context (unless
    it names one already), a bare `config` / `mode` becomes the context's own, `schemas/ids/...` looks the id up
    in the context (its `subject` parameter) and the `schemas` and `subjects` listings keep to the context (their
    `subjectPrefix`). Other paths are left alone."""
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[0] != "contexts" or not parts[1]:
        return path, query
    prefix, rest = qualifier(parts[1]), parts[2:]

    def qualify(name: str) -> str:
        return name if name.startswith((CONTEXT_PREFIX, ":*:")) else prefix + name

    for index, part in enumerate(rest):
        if (part == "subjects" or (index == 0 and part in ("config", "mode"))) and index + 1 < len(rest):
            rest[index + 1] = qualify(rest[index + 1])
    if rest[0] in ("config", "mode") and len(rest) == 1 and prefix:
        rest.append(prefix)
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    if rest[:2] == ["schemas", "ids"]:
        params = [(k, v) for k, v in params if k != "subject"] + \
            [("subject", qualify(dict(params).get("subject", "")))]
    elif rest in (["schemas"], ["subjects"]):
        prefixes = [v for k, v in params if k == "subjectPrefix"] or [""]
        params = [(k, v) for k, v in params if k != "subjectPrefix"] + [("subjectPrefix", qualify(v)) for v in prefixes]
    return "/" + "/".join(rest), urllib.parse.urlencode(params)


class _Contexts:
    """ASGI middleware: the `/contexts/{ctx}/...` aliases (context_path), before anything looks at the path."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/contexts/"):
            path, query = context_path(scope["path"], scope.get("query_string", b"").decode("latin-1"))
            scope = {**scope, "path": path, "raw_path": urllib.parse.quote(path).encode(),
                     "query_string": query.encode("latin-1")}
        await self.app(scope, receive, send)


class _Authenticated:
    """ASGI middleware: with `access` enabled, HTTP basic auth against the cluster's users, then the subject's
    rights (odradek.registry.auth); the caller is left in the scope for the listings to filter by."""

    def __init__(self, app, access: Access):
        self.app = app
        self.access = access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.access.enabled:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        caller = await run_in_threadpool(self.access.login, request.headers.get("authorization"))
        if caller is None:
            answer = error(401, 401, "Unauthorized")
            answer.headers["WWW-Authenticate"] = 'Basic realm="odradek schema registry"'
            await answer(scope, receive, send)
            return
        checked, subject, write = _rights(request.method, scope["path"])
        if checked and not await run_in_threadpool(caller.may, subject, write):
            operation = "Write" if write else "Read"
            what = f"Subject: {subject}" if subject is not None else "the global config"
            await error(403, 40301, f"User is denied operation {operation} on {what}")(scope, receive, send)
            return
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)


def create_app(registry: Registry, cluster_id: Callable[[], str] | None = None, access: Access | None = None):
    state_lock = registry.store.lock

    def visible(request: Request, subjects):
        """The subjects the caller may read (all without auth)."""
        caller = request.scope.get("state", {}).get("caller")
        return [s for s in subjects if caller is None or caller.may(s, False)]

    def schema_body(version: Version, request: Request, with_subject: bool) -> dict:
        body: dict[str, Any] = {}
        if with_subject:
            body.update(subject=version.subject, version=version.version)
        body["id"] = version.id
        body["guid"] = schemas.guid(version.schema_type, version.schema)
        if version.schema_type != "AVRO":
            body["schemaType"] = version.schema_type
        if version.references:
            body["references"] = version.references
        if version.metadata:
            body["metadata"] = version.metadata
        if version.rule_set:
            body["ruleSet"] = version.rule_set
        if version.schema_type == "PROTOBUF" and request.query_params.get("format") == "serialized":
            body["schema"] = registry.serialized(version)
        else:
            body["schema"] = version.schema
        return body

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise RegistryError(400, 400, f"Unrecognized JSON in the request body: {exc}") from None

    # ---- schemas ----

    def root(request):
        return reply({})

    def schema_types(request):
        return reply(SCHEMA_TYPES)

    def list_schemas(request):
        prefix = request.query_params.get("subjectPrefix", "")
        deleted, latest_only = _flag(request, "deleted"), _flag(request, "latestOnly")
        with state_lock:
            found = []
            for subject in registry.state.subjects(deleted=deleted):
                if subject.startswith(prefix):
                    versions = registry.state.live(subject, deleted=deleted)
                    found += versions[-1:] if latest_only else versions
        allowed = set(visible(request, {v.subject for v in found}))
        return reply(_page(request, [schema_body(v, request, True) for v in found if v.subject in allowed]))

    def by_id_version(request) -> Version:
        """The id's schema, in the context of the `subject` parameter (the default context without one)."""
        return registry.schema_by_id(_schema_id(request), request.query_params.get("subject"))

    def by_id_uses(request) -> list[Version]:
        context = context_of(by_id_version(request).subject)
        with state_lock:
            return registry.state.uses_of(_schema_id(request), context)

    def by_id(request):
        version = by_id_version(request)
        body = schema_body(version, request, False)
        del body["id"]
        if _flag(request, "fetchMaxId"):
            with state_lock:
                body["maxId"] = registry.state.max_id(context_of(version.subject))
        return reply(body)

    def by_id_schema(request):
        return Response(by_id_version(request).schema, media_type=CONTENT_TYPE)

    def by_id_subjects(request):
        uses, deleted = by_id_uses(request), _flag(request, "deleted")
        subject = request.query_params.get("subject")
        subject = subject if subject and unqualified(subject) else None  # ":.ctx:" names the context only
        found = sorted({v.subject for v in uses if (deleted or not v.deleted) and subject in (None, v.subject)})
        return reply(_page(request, visible(request, found)))

    def by_id_versions(request):
        uses, deleted = by_id_uses(request), _flag(request, "deleted")
        allowed = set(visible(request, {v.subject for v in uses}))
        return reply(_page(request, [{"subject": v.subject, "version": v.version} for v in
                                     sorted(uses, key=lambda v: (v.subject, v.version))
                                     if (deleted or not v.deleted) and v.subject in allowed]))

    def by_guid(request):
        version = registry.schema_by_guid(request.path_params["guid"])
        body = schema_body(version, request, False)
        del body["guid"]
        return reply(body)

    # ---- subjects ----

    def subjects(request):
        prefix = request.query_params.get("subjectPrefix", "")
        deleted, deleted_only = _flag(request, "deleted"), _flag(request, "deletedOnly")
        with state_lock:
            state = registry.state
            names = state.subjects(deleted=deleted or deleted_only)
            if deleted_only:
                names = [s for s in names if any(v.deleted for v in state.live(s, deleted=True))]
        return reply(_page(request, visible(request, [s for s in names if s.startswith(prefix)])))

    def versions(request):
        subject = request.path_params["subject"]
        deleted, deleted_only = _flag(request, "deleted"), _flag(request, "deletedOnly")
        with state_lock:
            found = registry.state.live(subject, deleted=deleted or deleted_only)
        if not found:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return reply(_page(request, [v.version for v in found if not deleted_only or v.deleted]))

    def version(request):
        found = registry.get_version(request.path_params["subject"], request.path_params["version"],
                                     _flag(request, "deleted"))
        return reply(schema_body(found, request, True))

    def version_schema(request):
        found = registry.get_version(request.path_params["subject"], request.path_params["version"],
                                     _flag(request, "deleted"))
        return Response(found.schema, media_type=CONTENT_TYPE)

    def referenced_by(request):
        found = registry.get_version(request.path_params["subject"], request.path_params["version"])
        with state_lock:
            return reply(_page(request, registry.state.referenced_by(found.subject, found.version)))

    async def register(request):
        body = await body_of(request)
        registered = await _in_thread(registry.register, request.path_params["subject"], body,
                                      _flag(request, "normalize"))
        # the id, version and guid only: a client keeps what it sent (Protobuf: maybe base64) as the schema
        return reply({"id": registered.id, "version": registered.version,
                      "guid": schemas.guid(registered.schema_type, registered.schema)})

    async def lookup(request):
        body = await body_of(request)
        found = await _in_thread(registry.lookup, request.path_params["subject"], body,
                                 _flag(request, "normalize"), _flag(request, "deleted"))
        return reply(schema_body(found, request, True))

    async def delete_subject(request):
        return reply(await _in_thread(registry.delete_subject, request.path_params["subject"],
                                      _flag(request, "permanent")))

    async def delete_version(request):
        return reply(await _in_thread(registry.delete_version, request.path_params["subject"],
                                      request.path_params["version"], _flag(request, "permanent")))

    def subject_metadata(request):
        subject = request.path_params["subject"]
        wanted = dict(zip(request.query_params.getlist("key"), request.query_params.getlist("value")))
        deleted = _flag(request, "deleted")
        with state_lock:
            versions = registry.state.live(subject, deleted=deleted)
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        for candidate in reversed(versions):
            properties = (candidate.metadata or {}).get("properties") or {}
            if all(properties.get(key) == value for key, value in wanted.items()):
                return reply(schema_body(candidate, request, True))
        raise RegistryError(404, 40403, "Schema not found")

    # ---- compatibility ----

    async def compatibility(request):
        body = await body_of(request)
        subject = request.path_params["subject"]
        problems = await _in_thread(registry.test_compatibility, subject, request.path_params.get("version"), body,
                                    _flag(request, "normalize"))
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            answer["messages"] = problems
        return reply(answer)

    # ---- config and mode ----

    def _subject(request) -> str | None:
        return request.path_params.get("subject")

    def get_config(request):
        return reply(registry.get_config(_subject(request), _flag(request, "defaultToGlobal")))

    async def put_config(request):
        return reply(await _in_thread(registry.set_config, _subject(request), await body_of(request)))

    async def delete_config(request):
        return reply(await _in_thread(registry.delete_config, _subject(request)))

    def get_mode(request):
        return reply({"mode": registry.get_mode(_subject(request), _flag(request, "defaultToGlobal"))})

    async def put_mode(request):
        return reply({"mode": await _in_thread(registry.set_mode, _subject(request), await body_of(request),
                                               _flag(request, "force"))})

    async def delete_mode(request):
        return reply({"mode": await _in_thread(registry.delete_mode, request.path_params["subject"])})

    # ---- the rest ----

    def contexts(request):
        with state_lock:
            return reply(_page(request, registry.state.contexts()))

    def metadata_id(request):
        return reply({"scope": {"path": [], "clusters": {
            "kafka-cluster": cluster_id() if cluster_id else "",
            "schema-registry-cluster": registry.store.group_id}}})

    def metadata_version(request):
        return reply({"version": importlib.metadata.version("odradek"), "commitId": ""})

    v = "{version:str}"
    routes = [
        Route("/", root), Route("/schemas/types", schema_types), Route("/schemas", list_schemas),
        Route("/schemas/ids/{id}", by_id), Route("/schemas/ids/{id}/schema", by_id_schema),
        Route("/schemas/ids/{id}/subjects", by_id_subjects), Route("/schemas/ids/{id}/versions", by_id_versions),
        Route("/schemas/guids/{guid}", by_guid),
        Route("/subjects", subjects),
        Route("/subjects/{subject}/versions", versions, methods=["GET"]),
        Route("/subjects/{subject}/versions", register, methods=["POST"]),
        Route(f"/subjects/{{subject}}/versions/{v}", version, methods=["GET"]),
        Route(f"/subjects/{{subject}}/versions/{v}", delete_version, methods=["DELETE"]),
        Route(f"/subjects/{{subject}}/versions/{v}/schema", version_schema),
        Route(f"/subjects/{{subject}}/versions/{v}/referencedby", referenced_by),
        Route("/subjects/{subject}/metadata", subject_metadata),
        Route("/subjects/{subject}", lookup, methods=["POST"]),
        Route("/subjects/{subject}", delete_subject, methods=["DELETE"]),
        Route(f"/compatibility/subjects/{{subject}}/versions/{v}", compatibility, methods=["POST"]),
        Route("/compatibility/subjects/{subject}/versions", compatibility, methods=["POST"]),
        Route("/config", get_config, methods=["GET"]), Route("/config", put_config, methods=["PUT"]),
        Route("/config", delete_config, methods=["DELETE"]),
        Route("/config/{subject}", get_config, methods=["GET"]),
        Route("/config/{subject}", put_config, methods=["PUT"]),
        Route("/config/{subject}", delete_config, methods=["DELETE"]),
        Route("/mode", get_mode, methods=["GET"]), Route("/mode", put_mode, methods=["PUT"]),
        Route("/mode/{subject}", get_mode, methods=["GET"]), Route("/mode/{subject}", put_mode, methods=["PUT"]),
        Route("/mode/{subject}", delete_mode, methods=["DELETE"]),
        Route("/contexts", contexts), Route("/v1/metadata/id", metadata_id),
        Route("/v1/metadata/version", metadata_version),
    ]

    def registry_error(request, exc: RegistryError):
        return error(exc.status, exc.error_code, exc.message)

    def store_error(request, exc: StoreError):
        return error(500, 50001, f"Error while registering schema: {exc}")

    def http_error(request, exc: HTTPException):
        return error(exc.status_code, exc.status_code, f"HTTP {exc.status_code} {exc.detail}")

    app = Starlette(routes=routes, exception_handlers={RegistryError: registry_error, StoreError: store_error,
                                                       HTTPException: http_error})
    return _Contexts(_Authenticated(app, access) if access is not None and access.enabled else app)


async def _in_thread(function, *args):
    """A blocking call (a write waits for the cluster, protoc runs) off the event loop."""
    return await run_in_threadpool(function, *args)
