"""Confluent REST Proxy's v2 API: topics, partitions and brokers listed, records produced to a topic or a partition
in the binary or JSON embedded format, and consumer instances (docs/rest-proxy.md has the table).

Requests that carry embedded data name its format in their Content-Type (application/vnd.kafka.binary.v2+json,
application/vnd.kafka.json.v2+json), records reads in their Accept header; the others take and give
application/vnd.kafka.v2+json. A produce request is refused as a whole (404 40401 / 40402, 422) before any record
is sent when its topic, a partition or a record is wrong; otherwise each record's outcome is in `offsets`, its
error_code 1 (not retriable) or 2 (retriable) when the broker refused it, as Confluent's proxy answers.
"""

from __future__ import annotations

import concurrent.futures

import confluent_kafka
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from odradek.client import ClientError, murmur2_partitioner
from odradek.restproxy.app import Proxy, json_body
from odradek.restproxy.consumers import OFFSET_BEGINNING, OFFSET_END, ConsumerInstance, instance_not_found
from odradek.restproxy.errors import (CONSUMER_FORMAT_MISMATCH, NOT_ACCEPTABLE, RestError, partition_not_found,
                                      topic_not_found, unprocessable)
from odradek.restproxy.formats import (V2_JSON, decode_v2, encode_v2, field, partitions_of, produce_format,
                                       records_format, require_v2_answer, require_v2_body)

DEFAULT_RECORDS_TIMEOUT_MS = 1000  # Confluent's consumer.request.timeout.ms


def answer(content, status: int = 200, media_type: str = V2_JSON) -> Response:
    return JSONResponse(content, status, media_type=media_type)


def no_content() -> Response:
    return Response(status_code=204)


def routes(proxy: Proxy) -> list[Route]:
    # --------------------------------------------------------------------------------- topics and brokers
    async def list_topics(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        clients = await proxy.clients(request)
        return answer(await proxy.call(clients.admin.list_topics))

    def layout_of(clients, topic: str):
        layouts = clients.admin.topic_layouts().get(topic)
        if layouts is None:
            raise topic_not_found(topic)
        return layouts

    def partition_json(layout) -> dict:
        return {"partition": layout.partition, "leader": layout.leader,
                "replicas": [{"broker": broker, "leader": broker == layout.leader, "in_sync": broker in layout.isr}
                             for broker in layout.replicas]}

    async def topic(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        name = request.path_params["topic"]
        clients = await proxy.clients(request)
        layouts = await proxy.call(layout_of, clients, name)
        configs = await proxy.call(clients.admin.topic_config_values, name)
        return answer({"name": name, "configs": {entry.name: entry.value for entry in configs},
                       "partitions": [partition_json(layout) for layout in layouts]})

    async def partitions(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        clients = await proxy.clients(request)
        layouts = await proxy.call(layout_of, clients, request.path_params["topic"])
        return answer([partition_json(layout) for layout in layouts])

    async def one_partition(request: Request, clients):
        name, index = request.path_params["topic"], request.path_params["partition"]
        layouts = await proxy.call(layout_of, clients, name)
        if not 0 <= index < len(layouts):
            raise partition_not_found(name, index)
        return layouts[index]

    async def partition(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        clients = await proxy.clients(request)
        return answer(partition_json(await one_partition(request, clients)))

    async def partition_offsets(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        clients = await proxy.clients(request)
        layout = await one_partition(request, clients)
        name = request.path_params["topic"]
        earliest = await proxy.call(clients.admin.list_offsets, name, [layout.partition],
                                    confluent_kafka.admin.OffsetSpec.earliest())
        latest = await proxy.call(clients.admin.list_offsets, name, [layout.partition],
                                  confluent_kafka.admin.OffsetSpec.latest())
        return answer({"beginning_offset": earliest[layout.partition], "end_offset": latest[layout.partition]})

    async def brokers(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        clients = await proxy.clients(request)
        cluster = await proxy.call(clients.admin.describe_cluster)
        return answer({"brokers": [broker.node_id for broker in cluster.brokers]})

    # -------------------------------------------------------------------------------------------- produce
    async def produce(request: Request) -> Response:
        fmt = produce_format(request.headers.get("content-type"), proxy.schema_formats)
        require_v2_answer(request.headers.get("accept"))
        body = await json_body(request, proxy)
        records = field(body, "records", list, required=True)
        if not records:
            raise unprocessable("records may not be empty")
        name = request.path_params["topic"]
        fixed = request.path_params.get("partition")
        for index, record in enumerate(records):
            if not isinstance(record, dict):
                raise unprocessable(f"records[{index}] must be an object")
            field(record, "partition", int)
        clients = await proxy.clients(request)
        if fmt in proxy.schema_formats:
            encoded, schema_ids = await proxy.call(encode_with_schemas, fmt, name, body, records, fixed)
        else:
            encoded = [(encode_v2(fmt, record.get("key"), f"records[{index}].key"),
                        encode_v2(fmt, record.get("value"), f"records[{index}].value"),
                        fixed if fixed is not None else record.get("partition"))
                       for index, record in enumerate(records)]
            schema_ids = (None, None)
        count = await proxy.call(clients.partition_count, name)
        for _, _, index in encoded:
            if index is not None and not 0 <= index < count:
                raise partition_not_found(name, index)

        def send_all() -> list:
            return [clients.send(name, value, key, murmur2_partitioner(key, count) if index is None else index)
                    for key, value, index in encoded]

        def delivered():
            futures = send_all()
            concurrent.futures.wait(futures)
            return [future.exception() or future.result() for future in futures]

        results = await proxy.call(delivered)
        if any(isinstance(result, ClientError) and result.name == "UNKNOWN_TOPIC_OR_PART" for result in results):
            clients.forget(name)
        return answer({"key_schema_id": schema_ids[0], "value_schema_id": schema_ids[1],
                       "offsets": [offset_json(r) for r in results]})

    def encode_with_schemas(fmt: str, topic: str, body: dict, records: list, fixed: int | None):
        """The records' keys and values serialized with the request's schemas (key_schema or key_schema_id, and
        the value's), and the ids of those schemas (None for keys or values none of the records has)."""
        schemas = {part: (field(body, f"{part}_schema", str), field(body, f"{part}_schema_id", int))
                   for part in ("key", "value")}
        encoded, ids = [], {"key": None, "value": None}
        for record in records:
            parts = []
            for part in ("key", "value"):
                data = record.get(part)
                if data is None:
                    parts.append(None)
                    continue
                stored, ids[part] = proxy.schemas.encode(fmt, topic, part == "key", *schemas[part], data)
                parts.append(stored)
            encoded.append((*parts, fixed if fixed is not None else record.get("partition")))
        return encoded, (ids["key"], ids["value"])

    def offset_json(result) -> dict:
        if isinstance(result, BaseException):
            retriable = isinstance(result, ClientError) and result.retriable
            return {"partition": None, "offset": None, "error_code": 2 if retriable else 1, "error": str(result)}
        return {"partition": result.partition, "offset": result.offset, "error_code": None, "error": None}

    # ---------------------------------------------------------------------------------- consumer instances
    async def create_consumer(request: Request) -> Response:
        require_v2_body(request.headers.get("content-type"))
        require_v2_answer(request.headers.get("accept"))
        body = await json_body(request, proxy)
        if not isinstance(body, dict):
            raise unprocessable("The request body must be a JSON object")
        group = request.path_params["group"]
        credentials = proxy.credentials(request)
        await proxy.clients(request)  # proves the credentials before a consumer is made with them
        instance = await proxy.call(proxy.instances.create, group, body, credentials and credentials[0],
                                    proxy.pool.config_of(credentials))
        return answer({"instance_id": instance.name,
                       "base_uri": f"{request.base_url}consumers/{group}/instances/{instance.name}"})

    async def on_instance(request: Request, action):
        """`action(instance)` in the thread pool, holding the instance (40403 if it is gone meanwhile)."""
        instance = proxy.instances.get(request.path_params["group"], request.path_params["instance"],
                                       proxy.owner(request))

        def locked():
            with instance.lock:
                if instance.closed:
                    raise instance_not_found()
                return action(instance)

        return await proxy.call(locked)

    async def instance_body(request: Request, required: bool = True):
        require_v2_body(request.headers.get("content-type"))
        return await json_body(request, proxy, required)

    async def delete_consumer(request: Request) -> Response:
        proxy.credentials(request)
        await proxy.call(proxy.instances.delete, request.path_params["group"], request.path_params["instance"],
                         proxy.owner(request))
        return no_content()

    async def subscribe(request: Request) -> Response:
        body = await instance_body(request)
        topics = field(body, "topics", list)
        pattern = field(body, "topic_pattern", str)
        if (topics is None) == (pattern is None):
            raise unprocessable("give exactly one of topics and topic_pattern")
        if topics is not None and (not topics or not all(isinstance(name, str) and name for name in topics)):
            raise unprocessable("topics must be a list of topic names")
        await on_instance(request, lambda instance: instance.subscribe(topics or [], pattern))
        return no_content()

    async def subscription(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        return answer({"topics": await on_instance(request, lambda instance: instance.subscription)})

    async def unsubscribe(request: Request) -> Response:
        await on_instance(request, ConsumerInstance.unsubscribe)
        return no_content()

    async def assign(request: Request) -> Response:
        body = await instance_body(request)
        asked = [(topic, partition) for topic, partition, _ in partitions_of(body)]
        await on_instance(request, lambda instance: instance.assign(asked))
        return no_content()

    async def assignments(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        assigned = await on_instance(request, ConsumerInstance.assigned)
        return answer({"partitions": [{"topic": topic, "partition": index} for topic, index in assigned]})

    async def seek(request: Request) -> Response:
        body = await instance_body(request)
        offsets = {(topic, index): offset for topic, index, offset in partitions_of(body, "offsets", True)}
        if any(offset < 0 for offset in offsets.values()):
            raise unprocessable("offsets must be 0 or more")
        await on_instance(request, lambda instance: instance.seek(offsets))
        return no_content()

    def seek_to(end: int):
        async def handler(request: Request) -> Response:
            body = await instance_body(request)
            offsets = {(topic, index): end for topic, index, _ in partitions_of(body)}
            await on_instance(request, lambda instance: instance.seek(offsets))
            return no_content()
        return handler

    async def commit(request: Request) -> Response:
        body = await instance_body(request, required=False)
        offsets = None if body is None or field(body, "offsets", list) is None else partitions_of(body, "offsets",
                                                                                                  True)
        await on_instance(request, lambda instance: instance.commit(offsets))
        return Response(status_code=200)

    async def committed(request: Request) -> Response:
        require_v2_answer(request.headers.get("accept"))
        body = await instance_body(request)
        asked = [(topic, index) for topic, index, _ in partitions_of(body)]
        found = await on_instance(request, lambda instance: instance.committed(asked, proxy.settings.timeout))
        return answer({"offsets": [{"topic": topic, "partition": index, "offset": offset if offset >= 0 else -1,
                                    "metadata": ""} for topic, index, offset in found]})

    async def records(request: Request) -> Response:
        asked = records_format(request.headers.get("accept"))
        params = request.query_params
        timeout_ms = _number(params.get("timeout"), "timeout", DEFAULT_RECORDS_TIMEOUT_MS)
        limit = proxy.settings.max_response_bytes
        max_bytes = min(_number(params.get("max_bytes"), "max_bytes", limit), limit)

        def read(instance: ConsumerInstance):
            if asked != instance.format:
                raise RestError(406, CONSUMER_FORMAT_MISMATCH if asked else NOT_ACCEPTABLE,
                                "The requested embedded data format does not match the deserializer for this "
                                f"consumer instance ({instance.format})")
            taken = instance.read(min(timeout_ms, proxy.settings.timeout * 1000) / 1000, max_bytes)
            if asked in proxy.schema_formats:
                def decode(data, record, is_key):
                    return proxy.schemas.decode(asked, record.topic, is_key, data)
            else:
                def decode(data, record, is_key):
                    return decode_v2(asked, data)
            return [{"topic": record.topic, "key": decode(record.key, record, True),
                     "value": decode(record.value, record, False), "partition": record.partition,
                     "offset": record.offset} for record in taken]

        found = await on_instance(request, read)
        return answer(found, media_type=f"application/vnd.kafka.{asked}.v2+json")

    instance = "/consumers/{group}/instances/{instance}"
    return [
        Route("/topics", list_topics, methods=["GET"]),
        Route("/topics/{topic}", topic, methods=["GET"]),
        Route("/topics/{topic}", produce, methods=["POST"]),
        Route("/topics/{topic}/partitions", partitions, methods=["GET"]),
        Route("/topics/{topic}/partitions/{partition:int}", partition, methods=["GET"]),
        Route("/topics/{topic}/partitions/{partition:int}", produce, methods=["POST"]),
        Route("/topics/{topic}/partitions/{partition:int}/offsets", partition_offsets, methods=["GET"]),
        Route("/brokers", brokers, methods=["GET"]),
        Route("/consumers/{group}", create_consumer, methods=["POST"]),
        Route(instance, delete_consumer, methods=["DELETE"]),
        Route(f"{instance}/subscription", subscribe, methods=["POST"]),
        Route(f"{instance}/subscription", subscription, methods=["GET"]),
        Route(f"{instance}/subscription", unsubscribe, methods=["DELETE"]),
        Route(f"{instance}/assignments", assign, methods=["POST"]),
        Route(f"{instance}/assignments", assignments, methods=["GET"]),
        Route(f"{instance}/positions", seek, methods=["POST"]),
        Route(f"{instance}/positions/beginning", seek_to(OFFSET_BEGINNING), methods=["POST"]),
        Route(f"{instance}/positions/end", seek_to(OFFSET_END), methods=["POST"]),
        Route(f"{instance}/offsets", commit, methods=["POST"]),
        Route(f"{instance}/offsets", committed, methods=["GET"]),
        Route(f"{instance}/records", records, methods=["GET"]),
    ]


def _number(text: str | None, name: str, default: int) -> int:
    if text is None or text == "":
        return default
    if not text.isdigit():
        raise RestError(400, 400, f"{name} must be a whole number of 0 or more")
    return int(text)
