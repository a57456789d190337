"""The console's web application: a Starlette (ASGI) app of server-rendered Jinja2 pages, made live with htmx
(fragments polled every few seconds) and charts drawn by uPlot from small JSON series; both vendored under static/
so it works offline.

Each handler asks odradek.console.cluster.ClusterView (blocking client calls, run in Starlette's thread pool) and
renders a template; forms post and redirect back with a notice, so every page works without JavaScript except
the charts. Changes need a same-origin POST (no cross-site form or DNS-rebound host can drive the console), and a
failed change shows the broker's reason on the page instead of an error code alone; a list the principal may not
read (ACLs, users, a broker's settings) shows the broker's refusal in its place.
"""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path

import confluent_kafka
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from odradek.client import ClientError
from odradek.client.options import timestamp_ms
from odradek.console import render
from odradek.console.cluster import (ACL_OPERATIONS, ACL_PATTERN_TYPES, ACL_PERMISSIONS, ACL_RESOURCE_TYPES,
                                     QUOTA_ENTITY_TYPES, QUOTA_KEYS, SEARCH_LIMIT, ClusterView, group_lag)
from odradek.console.rates import LagHistory, MetricsSampler
from odradek.console.schemas import RegistryRefused, SchemaView
from odradek.security.scram import DEFAULT_ITERATIONS, MECHANISMS

HERE = Path(__file__).parent
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]
NOT_FOUND_ERRORS = {"UNKNOWN_TOPIC_OR_PART", "GROUP_ID_NOT_FOUND"}


def same_origin(request: Request) -> bool:
    """A change may come only from the console's own pages: the browser's Origin (or Sec-Fetch-Site) says so. An
    origin is its scheme, host and port together (RFC 6454): https://host:port is another origin than the console
    served as http://host:port."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    parts = urllib.parse.urlsplit(origin)
    return (parts.scheme, parts.netloc) == (request.url.scheme, request.headers.get("host"))


def create_app(view: ClusterView, sampler: MetricsSampler | None = None, loopback_only: bool = True,
               lag_history: LagHistory | None = None, schemas: SchemaView | None = None) -> Starlette:
    """The console over `view`; `sampler` gives the rate chart and partition sizes (None: no metrics known);
    `lag_history` is the groups' lag over time (a LagSampler's, from the console's start); `schemas` the Schemas
    pages' registry (None: no such pages)."""
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["rendered"] = render.render_bytes
    templates.env.filters["time"] = render.format_time
    templates.env.filters["bytes"] = render.human_bytes
    templates.env.filters["setting"] = render.human_setting
    templates.env.globals["zookeeper"] = view.zookeeper is not None
    templates.env.globals["metrics"] = sampler is not None and bool(sampler.urls)
    templates.env.globals["schemas"] = schemas is not None

    def shown(data: bytes | None, fmt: str) -> str:
        """A key or value in the page's format; "schema" decodes it with its writer's schema where it can."""
        decoded = schemas.decode(data) if fmt == "schema" and schemas is not None else None
        return decoded if decoded is not None else render.render_bytes(data, "text" if fmt == "schema" else fmt)

    templates.env.filters["shown"] = shown
    lag_history = lag_history if lag_history is not None else LagHistory()

    def page(request: Request, name: str, status_code: int = 200, **context) -> Response:
        context.setdefault("notice", request.query_params.get("notice", ""))
        response = templates.TemplateResponse(request, name, context, status_code=status_code)
        response.headers["Vary"] = "HX-Request"  # a polled fragment is never served from cache as the whole page
        return response

    def back(url: str, notice: str) -> RedirectResponse:
        return RedirectResponse(f"{url}?{urllib.parse.urlencode({'notice': notice})}", status_code=303)

    async def form_of(request: Request):
        if not same_origin(request):
            raise HTTPException(403, "changes are accepted from the console's own pages only")
        return await request.form()

    def fragment(request: Request) -> bool:
        return request.headers.get("hx-request") == "true"

    def page_number(request: Request) -> int:
        text = request.query_params.get("page", "1")
        return int(text) if text.isdigit() else 1

    # --------------------------------------------------------------------------------------------- overview
    async def overview(request: Request) -> Response:
        data = await run_in_threadpool(view.overview)
        return page(request, "_overview_stats.html" if fragment(request) else "overview.html", overview=data,
                    bootstrap=view.bootstrap_servers)

    async def rates(request: Request) -> Response:
        return JSONResponse(sampler.history.series() if sampler is not None else {"time": []})

    # ----------------------------------------------------------------------------------------------- topics
    async def topics(request: Request) -> Response:
        query = request.query_params.get("q", "")
        sizes = sampler.log_sizes if sampler is not None and sampler.urls else None
        rows = await run_in_threadpool(view.topics, query, page_number(request), sizes)
        return page(request, "_topics_table.html" if fragment(request) else "topics.html", topics=rows, q=query)

    async def create_topic(request: Request) -> Response:
        form = await form_of(request)
        name = form.get("name", "").strip()
        configs = dict(line.split("=", 1) for line in form.get("configs", "").splitlines() if "=" in line)
        await run_in_threadpool(view.create_topic, name, int(form.get("partitions") or -1),
                                int(form.get("replication_factor") or -1),
                                {key.strip(): value.strip() for key, value in configs.items()})
        return back(f"/topics/{urllib.parse.quote(name)}", f"Created topic {name}.")

    async def topic(request: Request) -> Response:
        name = request.path_params["name"]
        sizes = sampler.log_sizes if sampler is not None else None
        detail = await run_in_threadpool(view.topic, name, page_number(request), sizes)
        return page(request, "topic.html", topic=detail)

    async def set_config(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        await run_in_threadpool(view.set_topic_config, name, form["key"], form.get("value", ""))
        return back(f"/topics/{urllib.parse.quote(name)}", f"Set {form['key']} of {name}.")

    async def add_partitions(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        await run_in_threadpool(view.add_partitions, name, int(form["partitions"]))
        return back(f"/topics/{urllib.parse.quote(name)}", f"{name} now has {form['partitions']} partitions.")

    async def delete_topic(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        if form.get("confirm") != name:
            raise ValueError(f"type the topic's name, {name}, to confirm its deletion")
        await run_in_threadpool(view.delete_topic, name)
        return back("/topics", f"Deleted topic {name}.")

    # --------------------------------------------------------------------------------------------- messages
    async def read_messages(request: Request) -> dict:
        """What a messages page shows: a page of one partition, or a search across all of them (`search`)."""
        name = request.path_params["name"]
        params = request.query_params
        partition = int(params.get("partition") or 0)
        offset = int(params["offset"]) if params.get("offset", "").lstrip("-").isdigit() else None
        at = timestamp_ms(params["time"]) if params.get("time") else None
        newest_first = params.get("order", "newest") != "oldest"
        fmt = params.get("format", "text")
        fmt = fmt if fmt in render.FORMATS or (fmt == "schema" and schemas is not None) else "text"
        key = params.get("key", "")
        search = params.get("search", "")
        field = params.get("in", "value")
        exact = params.get("match") == "exact"
        limit = int(params["limit"]) if params.get("limit", "").isdigit() else SEARCH_LIMIT
        if search:
            found = await run_in_threadpool(view.search, name, field, search, exact, limit)
        else:
            found = await run_in_threadpool(view.messages, name, partition, offset, at, newest_first, key)
        return dict(topic=name, partition=partition, found=found, order="newest" if newest_first else "oldest",
                    format=fmt, key=key, offset="" if offset is None else offset, time=params.get("time", ""),
                    search=search, field=field, exact=exact, limit=limit, query=request.url.query)

    async def messages(request: Request) -> Response:
        shown = await read_messages(request)
        if shown["format"] == "schema":  # the writers' schemas looked up before the page renders from memory
            await run_in_threadpool(schemas.prefetch, [data for m in shown["found"].messages
                                                       for data in (m.key, m.value)])
        return page(request, "messages.html", **shown)

    async def messages_export(request: Request) -> Response:
        """The page of messages its query names, as a JSON download."""
        shown = await read_messages(request)
        return JSONResponse(render.messages_json(shown["found"].messages), headers={
            "Content-Disposition": f'attachment; filename="{urllib.parse.quote(shown["topic"])}-messages.json"'})

    async def produce(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_of(request)
        headers = [tuple(part.strip() for part in line.split("=", 1)) for line in form.get("headers", "").splitlines()
                   if "=" in line]
        partition = int(form["partition"]) if form.get("partition", "").isdigit() else None
        sent_partition, offset = await run_in_threadpool(view.produce, name, partition, form.get("key", ""),
                                                         form.get("value", ""), headers)
        return RedirectResponse(f"/topics/{urllib.parse.quote(name)}/messages?partition={sent_partition}&"
                                + urllib.parse.urlencode({"notice": f"Produced offset {offset} to partition "
                                                                    f"{sent_partition}."}), status_code=303)

    # ----------------------------------------------------------------------------------------------- groups
    async def groups(request: Request) -> Response:
        share_page = request.query_params.get("share_page", "1")
        try:  # a broker before Kafka 3.8 has no ListGroups v5 (types): the page says so
            share_groups, share_refusal = await run_in_threadpool(
                view.share_groups, int(share_page) if share_page.isdigit() else 1), None
        except ClientError as exc:
            share_groups, share_refusal = render.page_of([], 1, 1), str(exc)
        return page(request, "groups.html", groups=await run_in_threadpool(view.groups, page_number(request)),
                    share_groups=share_groups, share_refusal=share_refusal)

    async def group(request: Request) -> Response:
        group_id = request.path_params["group"]
        described = await run_in_threadpool(view.group, group_id)
        lag_history.record(group_id, time.time(), group_lag(described.offsets))
        shown = render.page_of(described.offsets, page_number(request), 100)
        return page(request, "_group_offsets.html" if fragment(request) else "group.html", group=described,
                    offsets=shown, lag=group_lag(described.offsets))

    async def group_lag_series(request: Request) -> Response:
        return JSONResponse(lag_history.series(request.path_params["group"]))

    async def planned_reset(request: Request, plan_of, execute) -> tuple[str, dict, dict, bool]:
        """A reset form's plan (`plan_of(group, topics, target, value)`), carried out by `execute(group, plan)`
        when the form says execute: the group, the form, the plan and whether it ran."""
        group_id = request.path_params["group"]
        form = await form_of(request)
        topics = [name.strip() for name in form.get("topics", "").split(",") if name.strip()]
        plan = await run_in_threadpool(plan_of, group_id, topics, form.get("target", "earliest"),
                                       form.get("value", ""))
        executed = form.get("execute") == "yes"
        if executed:
            await run_in_threadpool(execute, group_id, plan)
        return group_id, form, plan, executed

    async def reset_offsets(request: Request) -> Response:
        group_id, form, plan, executed = await planned_reset(request, view.reset_plan, view.reset_offsets)
        described = await run_in_threadpool(view.group, group_id)
        return page(request, "group.html", group=described, offsets=render.page_of(described.offsets, 1, 100),
                    lag=group_lag(described.offsets), plan=sorted(plan.items()), executed=executed, form=form)

    async def delete_group(request: Request) -> Response:
        group_id = request.path_params["group"]
        await form_of(request)
        await run_in_threadpool(view.delete_group, group_id)
        return back("/groups", f"Deleted group {group_id}.")

    # ----------------------------------------------------------------------------------------- share groups
    async def share_group(request: Request, **context) -> Response:
        group_id = request.path_params["group"]
        in_flight = await run_in_threadpool(sampler.share_records) if sampler is not None else None
        detail = await run_in_threadpool(view.share_group, group_id, page_number(request), in_flight)
        return page(request, "_share_group_partitions.html" if fragment(request) else "share_group.html",
                    detail=detail, **context)

    async def reset_share_offsets(request: Request) -> Response:
        _, form, plan, executed = await planned_reset(request, view.share_reset_plan, view.share_reset_offsets)
        return await share_group(request, plan=sorted(plan.items()), executed=executed, form=form)

    async def delete_share_group(request: Request) -> Response:
        group_id = request.path_params["group"]
        await form_of(request)
        await run_in_threadpool(view.delete_share_group, group_id)
        return back("/groups", f"Deleted share group {group_id}.")

    # ------------------------------------------------------------------------------------------- security
    async def listing(request: Request, name: str, read, **context) -> Response:
        """A page over what `read` returns, or over the broker's refusal (shown on the page: the principal may
        not see it, or the brokers run no authorizer)."""
        try:
            items, refusal = await run_in_threadpool(read), None
        except ClientError as exc:
            items, refusal = [], str(exc)
        return page(request, name, items=items, refusal=refusal, **context)

    async def acls(request: Request) -> Response:
        return await listing(request, "acls.html", view.acls, resource_types=ACL_RESOURCE_TYPES,
                             pattern_types=ACL_PATTERN_TYPES, operations=ACL_OPERATIONS, permissions=ACL_PERMISSIONS)

    async def add_acl(request: Request) -> Response:
        form = await form_of(request)
        await run_in_threadpool(view.add_acl, form)
        return back("/acls", f"Added: {form.get('permission')} {form.get('principal')} {form.get('operation')}.")

    async def remove_acl(request: Request) -> Response:
        form = await form_of(request)
        await run_in_threadpool(view.remove_acl, form)
        return back("/acls", f"Removed: {form.get('permission')} {form.get('principal')} {form.get('operation')}.")

    async def users(request: Request) -> Response:
        return await listing(request, "users.html", view.scram_users, mechanisms=list(MECHANISMS))

    async def set_user(request: Request) -> Response:
        form = await form_of(request)
        iterations = int(form["iterations"]) if form.get("iterations", "").isdigit() else DEFAULT_ITERATIONS
        await run_in_threadpool(view.set_scram_user, form.get("user", "").strip(), form.get("mechanism", ""),
                                form.get("password", ""), iterations)
        return back("/users", f"Set the {form.get('mechanism')} password of {form.get('user')}.")

    async def delete_user(request: Request) -> Response:
        form = await form_of(request)
        await run_in_threadpool(view.delete_scram_user, form.get("user", ""), form.get("mechanism", ""))
        return back("/users", f"Deleted the {form.get('mechanism')} credential of {form.get('user')}.")

    async def quotas(request: Request) -> Response:
        return await listing(request, "quotas.html", view.quotas, entity_types=QUOTA_ENTITY_TYPES,
                             quota_keys=QUOTA_KEYS)

    async def set_quota(request: Request) -> Response:
        form = await form_of(request)
        await run_in_threadpool(view.set_quota, form.get("entity_type", ""), form.get("entity_name", ""),
                                form.get("key", ""), form.get("value", ""))
        return back("/quotas", f"Set {form.get('key')} of {form.get('entity_type')} "
                               f"{form.get('entity_name') or '(default)'}.")

    # ---------------------------------------------------------------------------------------------- schemas
    def registry() -> SchemaView:
        if schemas is None:
            raise HTTPException(404, "no schema registry is configured (odradek console --schema-registry-url)")
        return schemas

    async def schema_subjects(request: Request) -> Response:
        try:
            rows, refusal = await run_in_threadpool(registry().subjects), None
        except RegistryRefused as exc:
            rows, refusal = [], str(exc)
        return page(request, "schemas.html", subjects=rows, refusal=refusal, registry_url=schemas.url)

    async def schema_subject(request: Request, candidate: tuple[str, str] | None = None) -> Response:
        subject = request.path_params["subject"]
        compared = None
        if request.query_params.get("from", "").isdigit() and request.query_params.get("to", "").isdigit():
            compared = (int(request.query_params["from"]), int(request.query_params["to"]))
        verdict, messages, refusal, detail = None, [], None, None
        try:
            detail = await run_in_threadpool(registry().subject, subject, compared)
            if candidate is not None:
                verdict, messages = await run_in_threadpool(registry().check, subject, *candidate)
        except RegistryRefused as exc:
            refusal = str(exc)
        return page(request, "schema.html", status_code=404 if detail is None else 200, subject=subject,
                    detail=detail, refusal=refusal, verdict=verdict, messages=messages,
                    candidate=candidate[1] if candidate else "")

    async def check_schema(request: Request) -> Response:
        form = await form_of(request)
        return await schema_subject(request, (form.get("schema_type", "AVRO"), form.get("schema", "")))

    async def broker(request: Request) -> Response:
        broker_id = int(request.path_params["id"])
        return await listing(request, "broker.html", lambda: view.broker_configs(broker_id), broker_id=broker_id)

    async def set_broker_config(request: Request) -> Response:
        broker_id = int(request.path_params["id"])
        form = await form_of(request)
        await run_in_threadpool(view.set_broker_config, broker_id, form["key"], form.get("value", ""))
        return back(f"/brokers/{broker_id}", f"Set {form['key']} of broker {broker_id}.")

    # -------------------------------------------------------------------------------------------- ZooKeeper
    async def zookeeper(request: Request) -> Response:
        path = request.query_params.get("path", "/")
        children, data = await run_in_threadpool(view.znode, path)
        return page(request, "_znode.html" if fragment(request) else "zookeeper.html", path=path,
                    children=children, data=data.decode("utf-8", "replace"))

    # ----------------------------------------------------------------------------------------------- errors
    async def failed(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return PlainTextResponse(exc.detail, exc.status_code)
        if isinstance(exc, confluent_kafka.KafkaException):  # a client call odradek.client does not wrap
            exc = ClientError.of(exc)
        status = 404 if getattr(exc, "name", None) in NOT_FOUND_ERRORS else 400
        if getattr(exc, "name", None) == "GROUP_AUTHORIZATION_FAILED" and "/messages" in request.url.path:
            # reading records asks the coordinator of the console's read group: say which ACL that takes
            user = view.client_config.get("sasl.username")
            return page(request, "error.html", status, error=str(exc), read_group=view.read_group,
                        principal=f"User:{user}" if user else "the console's principal")
        return page(request, "error.html", status, error=str(exc))

    routes = [
        Route("/", overview),
        Route("/rates.json", rates),
        Route("/topics", topics),
        Route("/topics", create_topic, methods=["POST"]),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/config", set_config, methods=["POST"]),
        Route("/topics/{name}/partitions", add_partitions, methods=["POST"]),
        Route("/topics/{name}/delete", delete_topic, methods=["POST"]),
        Route("/topics/{name}/messages", messages),
        Route("/topics/{name}/messages.json", messages_export),
        Route("/topics/{name}/messages", produce, methods=["POST"]),
        Route("/groups", groups),
        Route("/groups/{group}", group),
        Route("/groups/{group}/lag.json", group_lag_series),
        Route("/groups/{group}/reset", reset_offsets, methods=["POST"]),
        Route("/groups/{group}/delete", delete_group, methods=["POST"]),
        Route("/share-groups/{group}", share_group),
        Route("/share-groups/{group}/reset", reset_share_offsets, methods=["POST"]),
        Route("/share-groups/{group}/delete", delete_share_group, methods=["POST"]),
        Route("/acls", acls),
        Route("/acls", add_acl, methods=["POST"]),
        Route("/acls/delete", remove_acl, methods=["POST"]),
        Route("/users", users),
        Route("/users", set_user, methods=["POST"]),
        Route("/users/delete", delete_user, methods=["POST"]),
        Route("/quotas", quotas),
        Route("/quotas", set_quota, methods=["POST"]),
        Route("/schemas", schema_subjects),
        Route("/schemas/{subject}", schema_subject),
        Route("/schemas/{subject}/check", check_schema, methods=["POST"]),
        Route("/brokers/{id:int}", broker),
        Route("/brokers/{id:int}/config", set_broker_config, methods=["POST"]),
        Route("/zookeeper", zookeeper),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_HOSTS)] if loopback_only else []
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={ClientError: failed, confluent_kafka.KafkaException: failed,
                                         ValueError: failed, KeyError: failed, HTTPException: failed})
