"""Confluent REST Proxy's v3 API (its OpenAPI document, api/v3/openapi.yaml of confluentinc/kafka-rest, is the
reference): the cluster, brokers and their configs, the cluster-wide broker defaults (broker-configs), topics
(create, delete, partition count, configs), partitions and their replicas (by partition and by broker),
consumer groups with their consumers and lag, ACLs, and records produced one at a time, streamed or in a batch.

Every resource has its `kind` (KafkaTopic, KafkaTopicList, ...), `metadata.self` (its URL under the request's
base URL) and `metadata.resource_name` (crn:///kafka=<cluster id>/topic=<name>...), and relationships as
{"related": URL}. Requests take application/json (415 otherwise); a missing resource is 404 with error_code 404.

Records (POST .../topics/{topic}/records): a body of one JSON object is answered with that record's result and
the HTTP status of its error_code; a body of several objects, or one sent chunked (a stream), is answered 200 with
one result per record, one JSON object a line, in the order they came, each sent as soon as the broker has it.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import dataclasses
import datetime
import json
import re
from collections.abc import AsyncIterator

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ConfigResource,
                                   ResourcePatternType, ResourceType)
from confluent_kafka.schema_registry import SchemaRegistryError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from odradek.client import ClientError, murmur2_partitioner
from odradek.restproxy.app import Proxy, body_of, json_body, too_large
from odradek.restproxy.errors import (BAD_REQUEST, NOT_FOUND, PRODUCE_BATCH, UNSUPPORTED_MEDIA_TYPE, RestError,
                                      of_client_error, unprocessable)
from odradek.restproxy.formats import b64decode, encode_v3, field, media_type, parse_json, schema_format, v3_type
from odradek.restproxy.schemas import registration_failed

_SPACE = re.compile(r"\s*")
SCHEMA_TYPES = {"AVRO": "avro", "JSONSCHEMA": "jsonschema", "PROTOBUF": "protobuf"}
MAX_BATCH_ENTRIES = 10  # Confluent's api.v3.produce.batch.maximum.entries default
MAX_BATCH_ID_LENGTH = 80


def not_found(what: str) -> RestError:
    return RestError(404, NOT_FOUND, f"{what} not found")


def require_json(request: Request) -> None:
    if media_type(request.headers.get("content-type")) != "application/json":
        raise RestError(415, UNSUPPORTED_MEDIA_TYPE, "HTTP 415 Unsupported Media Type")


def answer(content, status: int = 200) -> Response:
    return JSONResponse(content, status)


def iso(timestamp_ms: int | None) -> str | None:
    if timestamp_ms is None:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text) -> int | None:
    if text is None:
        return None
    try:
        return int(datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise RestError(400, BAD_REQUEST, f"timestamp {text!r} is not an ISO 8601 date-time") from None


def enum_of(kind, text, name: str, default: str):
    """The confluent-kafka enum member named `text` (`default` when absent); 400 for another name."""
    text = default if text is None else str(text).upper()
    try:
        return kind[text]
    except KeyError:
        raise RestError(400, BAD_REQUEST, f"{name} {text!r} is not one of "
                                          f"{', '.join(member.name for member in kind)}") from None


@dataclasses.dataclass(frozen=True)
class ConfigOwner:
    """What configs belong to: their kind, the Admin resource (type and name), the URL parts of their list, the
    resource name's prefix before a config's name, and the fields each config carries of its owner."""
    kind: str
    type: ConfigResource.Type
    name: str
    parts: tuple
    crn: str
    fields: dict
    checks_set: bool = True  # a config set must be one the owner lists (not for the cluster-wide defaults)


class Links:
    """URLs and resource names under one cluster, for one request's base URL."""

    def __init__(self, request: Request, cluster_id: str):
        self.cluster_id = cluster_id
        self.base = f"{str(request.base_url).rstrip('/')}/v3/clusters/{cluster_id}"
        self.crn_base = f"crn:///kafka={cluster_id}"

    def url(self, *parts) -> str:
        return "/".join([self.base, *(str(part) for part in parts)])

    def related(self, *parts) -> dict:
        return {"related": self.url(*parts)}

    def resource(self, kind: str, parts: tuple, crn: str | None = None, **fields) -> dict:
        metadata = {"self": self.url(*parts)}
        if crn is not None:
            metadata["resource_name"] = f"{self.crn_base}{crn}"
        return {"kind": kind, "metadata": metadata, "cluster_id": self.cluster_id, **fields}

    def listing(self, kind: str, parts: tuple, data: list) -> dict:
        return {"kind": kind, "metadata": {"self": self.url(*parts), "next": None}, "data": data}


def routes(proxy: Proxy) -> list[Route]:
    async def context(request: Request):
        """(clients, links) of the request, 404 unless its cluster_id is the cluster's."""
        clients = await proxy.clients(request)
        cluster_id = await proxy.cluster_id(clients)
        asked = request.path_params.get("cluster_id")
        if asked is not None and asked != cluster_id:
            raise not_found(f"Cluster {asked}")
        return clients, Links(request, cluster_id)

    # ---------------------------------------------------------------------------------- cluster, brokers
    def cluster_json(links: Links, controller: int) -> dict:
        data = links.resource("KafkaCluster", (), "", acls=links.related("acls"),
                              brokers=links.related("brokers"), broker_configs=links.related("broker-configs"),
                              consumer_groups=links.related("consumer-groups"), topics=links.related("topics"),
                              partition_reassignments=links.related("topics", "-", "partitions", "-",
                                                                    "reassignment"))
        if controller >= 0:
            data["controller"] = links.related("brokers", controller)
        return data

    async def clusters(request: Request) -> Response:
        clients, links = await context(request)
        cluster = await proxy.call(clients.admin.describe_cluster)
        return answer({"kind": "KafkaClusterList", "metadata": {"self": links.base.rsplit("/", 1)[0], "next": None},
                       "data": [cluster_json(links, cluster.controller_id)]})

    async def cluster(request: Request) -> Response:
        clients, links = await context(request)
        info = await proxy.call(clients.admin.describe_cluster)
        return answer(cluster_json(links, info.controller_id))

    def broker_json(links: Links, broker) -> dict:
        return links.resource("KafkaBroker", ("brokers", broker.node_id), f"/broker={broker.node_id}",
                              broker_id=broker.node_id, host=broker.host, port=broker.port, rack=broker.rack,
                              configs=links.related("brokers", broker.node_id, "configs"),
                              partition_replicas=links.related("brokers", broker.node_id, "partition-replicas"))

    async def brokers(request: Request) -> Response:
        clients, links = await context(request)
        info = await proxy.call(clients.admin.describe_cluster)
        return answer(links.listing("KafkaBrokerList", ("brokers",), [broker_json(links, b) for b in info.brokers]))

    async def one_broker(request: Request, clients):
        broker_id = request.path_params["broker_id"]
        info = await proxy.call(clients.admin.describe_cluster)
        for broker in info.brokers:
            if broker.node_id == broker_id:
                return broker
        raise not_found(f"Broker {broker_id}")

    async def broker(request: Request) -> Response:
        clients, links = await context(request)
        return answer(broker_json(links, await one_broker(request, clients)))

    # ---------------------------------------------------------------------------------------- configs
    # Three owners of configs: a broker (KafkaBrokerConfig, BROKER resource "<id>"), the cluster-wide broker
    # defaults (KafkaClusterConfig, BROKER resource ""; only those set are listed, as Kafka answers) and a topic
    # (KafkaTopicConfig). As Confluent's config managers: changing a broker's or a topic's config that it does not
    # list is 404, as is resetting a cluster default that is not set; setting a cluster default is not checked
    # (there is no list of the names it may take).
    def config_json(links: Links, owner: ConfigOwner, entry) -> dict:
        def source_of(name: str) -> str:
            return "UNKNOWN" if name == "UNKNOWN_CONFIG" else name

        hidden = entry.sensitive
        return links.resource(owner.kind, (*owner.parts, entry.name), f"{owner.crn}{entry.name}", **owner.fields,
                              name=entry.name, value=None if hidden else entry.value,
                              is_default=entry.source == "DEFAULT_CONFIG", is_read_only=entry.read_only,
                              is_sensitive=entry.sensitive, source=source_of(entry.source),
                              synonyms=[{"name": name, "value": None if hidden else value, "source": source_of(source)}
                                        for name, value, source in entry.synonyms])

    def broker_owner(broker_id: int) -> ConfigOwner:
        return ConfigOwner("KafkaBrokerConfig", ConfigResource.Type.BROKER, str(broker_id),
                           ("brokers", broker_id, "configs"), f"/broker={broker_id}/config=", {"broker_id": broker_id})

    def topic_owner(name: str) -> ConfigOwner:
        return ConfigOwner("KafkaTopicConfig", ConfigResource.Type.TOPIC, name, ("topics", name, "configs"),
                           f"/topic={name}/config=", {"topic_name": name})

    async def config_owner(request: Request, clients, which: str) -> ConfigOwner:
        """The owner a request's path names (404 for a broker or topic that does not exist)."""
        if which == "broker":
            return broker_owner((await one_broker(request, clients)).node_id)
        if which == "cluster":
            return ConfigOwner("KafkaClusterConfig", ConfigResource.Type.BROKER, "", ("broker-configs",),
                               "/broker-config=", {"config_type": "BROKER"}, checks_set=False)
        name = request.path_params["topic"]
        await proxy.call(clients.partition_count, name)  # 40401 if it does not exist
        return topic_owner(name)

    async def entries_of(clients, owner: ConfigOwner) -> list:
        return await proxy.call(clients.admin.config_values, owner.type, owner.name)

    async def require_listed(clients, owner: ConfigOwner, names) -> None:
        listed = {entry.name for entry in await entries_of(clients, owner)}
        for name in names:
            if name not in listed:
                raise not_found(f"Config {name}")

    async def alter(clients, owner: ConfigOwner, set_configs: dict, delete_configs: list,
                    validate_only: bool = False) -> Response:
        await require_listed(clients, owner, [*(set_configs if owner.checks_set else ()), *delete_configs])
        await proxy.call(clients.admin.alter_configs, owner.type, owner.name, set_configs, delete_configs,
                         validate_only)
        return Response(status_code=204)

    def config_handlers(which: str) -> tuple:
        async def listing(request: Request) -> Response:
            clients, links = await context(request)
            owner = await config_owner(request, clients, which)
            return answer(links.listing(f"{owner.kind}List", owner.parts, [
                config_json(links, owner, entry) for entry in await entries_of(clients, owner)]))

        async def one(request: Request) -> Response:
            clients, links = await context(request)
            owner, key = await config_owner(request, clients, which), request.path_params["name"]
            for entry in await entries_of(clients, owner):
                if entry.name == key:
                    return answer(config_json(links, owner, entry))
            raise not_found(f"Config {key}")

        async def update(request: Request) -> Response:
            require_json(request)
            value = field(await json_body(request, proxy), "value", str)
            clients, _ = await context(request)
            owner = await config_owner(request, clients, which)
            return await alter(clients, owner, {request.path_params["name"]: value or ""}, [])

        async def reset(request: Request) -> Response:
            clients, _ = await context(request)
            owner = await config_owner(request, clients, which)
            return await alter(clients, owner, {}, [request.path_params["name"]])

        async def batch(request: Request) -> Response:
            require_json(request)
            body = await json_body(request, proxy)
            set_configs, delete_configs = {}, []
            for change in field(body, "data", list, required=True):
                key = field(change, "name", str, required=True)
                operation = str(field(change, "operation", str, default="SET")).upper()
                if operation == "DELETE":
                    delete_configs.append(key)
                elif operation == "SET":
                    set_configs[key] = field(change, "value", str, default="") or ""
                else:
                    raise RestError(400, BAD_REQUEST, f"operation {operation!r} is not SET or DELETE")
            clients, _ = await context(request)
            owner = await config_owner(request, clients, which)
            return await alter(clients, owner, set_configs, delete_configs,
                               field(body, "validate_only", bool, default=False))

        return listing, one, update, reset, batch

    async def every_broker_configs(request: Request) -> Response:
        clients, links = await context(request)
        info = await proxy.call(clients.admin.describe_cluster)
        owners = [broker_owner(broker.node_id) for broker in info.brokers]
        return answer(await every_config(clients, links, "KafkaBrokerConfigList", ("brokers", "-", "configs"),
                                         owners))

    async def every_topic_configs(request: Request) -> Response:
        clients, links = await context(request)
        names = await proxy.call(clients.admin.list_topics, True)
        owners = [topic_owner(name) for name in names]
        return answer(await every_config(clients, links, "KafkaTopicConfigList", ("topics", "-", "configs"),
                                         owners))

    async def every_config(clients, links: Links, kind: str, parts: tuple, owners: list) -> dict:
        """Every config of every owner, owner by owner (one DescribeConfigs each, all asked at once); a topic
        deleted meanwhile is left out."""
        async def entries_or_none(owner: ConfigOwner):
            try:
                return await entries_of(clients, owner)
            except RestError as exc:
                if exc.status == 404 and owner.type == ConfigResource.Type.TOPIC:
                    return []
                raise

        found = await asyncio.gather(*(entries_or_none(owner) for owner in owners))
        return links.listing(kind, parts, [config_json(links, owner, entry)
                                           for owner, entries in zip(owners, found) for entry in entries])

    # ----------------------------------------------------------------------------------------- topics
    def topic_json(links: Links, name: str, layouts: list) -> dict:
        return links.resource("KafkaTopic", ("topics", name), f"/topic={name}", topic_name=name,
                              is_internal=name.startswith("__"),
                              replication_factor=len(layouts[0].replicas) if layouts else 0,
                              partitions_count=len(layouts), partitions=links.related("topics", name, "partitions"),
                              configs=links.related("topics", name, "configs"),
                              partition_reassignments=links.related("topics", name, "partitions", "-",
                                                                    "reassignment"))

    async def layouts_of(clients, name: str) -> list:
        layouts = (await proxy.call(clients.admin.topic_layouts, True)).get(name)
        if layouts is None:
            raise not_found(f"Topic {name}")
        return layouts

    async def topics(request: Request) -> Response:
        clients, links = await context(request)
        layouts = await proxy.call(clients.admin.topic_layouts, True)
        return answer(links.listing("KafkaTopicList", ("topics",),
                                    [topic_json(links, name, parts) for name, parts in layouts.items()]))

    async def topic(request: Request) -> Response:
        clients, links = await context(request)
        name = request.path_params["topic"]
        return answer(topic_json(links, name, await layouts_of(clients, name)))

    async def create_topic(request: Request) -> Response:
        require_json(request)
        body = await json_body(request, proxy)
        name = field(body, "topic_name", str, required=True)
        partitions = field(body, "partitions_count", int, default=-1)
        replication = field(body, "replication_factor", int, default=-1)
        configs = {}
        for entry in field(body, "configs", list, default=[]):
            configs[field(entry, "name", str, required=True)] = field(entry, "value", str, default="")
        clients, links = await context(request)
        if field(body, "validate_only", bool, default=False):
            layouts = []
        else:
            await proxy.call(clients.admin.create_topic, name, partitions, replication, configs)
            layouts = await layouts_of(clients, name)
        data = topic_json(links, name, layouts)
        if not layouts:
            data.update(partitions_count=max(partitions, 0), replication_factor=max(replication, 0))
        return answer(data, 201)

    async def delete_topic(request: Request) -> Response:
        clients, _ = await context(request)
        name = request.path_params["topic"]
        await proxy.call(clients.partition_count, name)
        await proxy.call(clients.admin.delete_topic, name)
        clients.forget(name)
        return Response(status_code=204)

    async def update_topic(request: Request) -> Response:
        require_json(request)
        body = await json_body(request, proxy)
        count = field(body, "partitions_count", int, required=True)
        clients, links = await context(request)
        name = request.path_params["topic"]
        await layouts_of(clients, name)
        await proxy.call(clients.admin.add_partitions, name, count)
        clients.forget(name)
        return answer(topic_json(links, name, await layouts_of(clients, name)))

    # ------------------------------------------------------------------------------------- partitions
    def partition_json(links: Links, name: str, layout) -> dict:
        parts = ("topics", name, "partitions", layout.partition)
        data = links.resource("KafkaPartition", parts, f"/topic={name}/partition={layout.partition}",
                              topic_name=name, partition_id=layout.partition,
                              replicas=links.related(*parts, "replicas"),
                              reassignment=links.related(*parts, "reassignment"))
        if layout.leader >= 0:
            data["leader"] = links.related(*parts, "replicas", layout.leader)
        return data

    async def partitions(request: Request) -> Response:
        clients, links = await context(request)
        name = request.path_params["topic"]
        layouts = await layouts_of(clients, name)
        return answer(links.listing("KafkaPartitionList", ("topics", name, "partitions"),
                                    [partition_json(links, name, layout) for layout in layouts]))

    async def partition(request: Request) -> Response:
        clients, links = await context(request)
        name, layout = await layout_of(request, clients)
        return answer(partition_json(links, name, layout))

    def replica_json(links: Links, name: str, layout, broker_id: int) -> dict:
        parts = ("topics", name, "partitions", layout.partition, "replicas", broker_id)
        return links.resource("KafkaReplica", parts, f"/topic={name}/partition={layout.partition}/replica={broker_id}",
                              topic_name=name, partition_id=layout.partition, broker_id=broker_id,
                              is_leader=layout.leader == broker_id, is_in_sync=broker_id in layout.isr,
                              broker=links.related("brokers", broker_id))

    async def layout_of(request: Request, clients):
        name, index = request.path_params["topic"], request.path_params["partition_id"]
        layouts = await layouts_of(clients, name)
        if not 0 <= index < len(layouts):
            raise not_found(f"Partition {name}-{index}")
        return name, layouts[index]

    async def replicas(request: Request) -> Response:
        clients, links = await context(request)
        name, layout = await layout_of(request, clients)
        return answer(links.listing("KafkaReplicaList", ("topics", name, "partitions", layout.partition, "replicas"),
                                    [replica_json(links, name, layout, broker_id) for broker_id in layout.replicas]))

    async def replica(request: Request) -> Response:
        clients, links = await context(request)
        name, layout = await layout_of(request, clients)
        broker_id = request.path_params["broker_id"]
        if broker_id not in layout.replicas:
            raise not_found(f"Replica {broker_id} of partition {name}-{layout.partition}")
        return answer(replica_json(links, name, layout, broker_id))

    async def broker_replicas(request: Request) -> Response:
        clients, links = await context(request)
        broker_id = (await one_broker(request, clients)).node_id
        layouts = await proxy.call(clients.admin.topic_layouts, True)
        return answer(links.listing("KafkaReplicaList", ("brokers", broker_id, "partition-replicas"), [
            replica_json(links, name, layout, broker_id) for name, parts in layouts.items() for layout in parts
            if broker_id in layout.replicas]))

    # -------------------------------------------------------------------------------- consumer groups
    def group_json(links: Links, info) -> dict:
        parts = ("consumer-groups", info.group_id)
        data = links.resource("KafkaConsumerGroup", parts, f"/consumer-group={info.group_id}",
                              consumer_group_id=info.group_id, is_simple=not info.members and not info.assignor,
                              partition_assignor=info.assignor, state=info.state.replace("REBALANCING", "REBALANCE"),
                              type="CLASSIC", is_mixed_consumer_group=False,
                              consumers=links.related(*parts, "consumers"),
                              lag_summary=links.related(*parts, "lag-summary"))
        if info.coordinator >= 0:
            data["coordinator"] = links.related("brokers", info.coordinator)
        return data

    async def described(request: Request, clients):
        group_id = request.path_params["group"]
        listed = dict(await proxy.call(clients.admin.list_groups))
        if group_id not in listed:
            raise not_found(f"Consumer group {group_id}")
        return await proxy.call(clients.admin.describe_group, group_id)

    async def groups(request: Request) -> Response:
        clients, links = await context(request)
        found = []
        for group_id, _ in await proxy.call(clients.admin.list_groups):
            found.append(group_json(links, await proxy.call(clients.admin.describe_group, group_id)))
        return answer(links.listing("KafkaConsumerGroupList", ("consumer-groups",), found))

    async def group(request: Request) -> Response:
        clients, links = await context(request)
        return answer(group_json(links, await described(request, clients)))

    async def consumers(request: Request) -> Response:
        clients, links = await context(request)
        info = await described(request, clients)
        parts = ("consumer-groups", info.group_id, "consumers")
        return answer(links.listing("KafkaConsumerList", parts, [
            links.resource("KafkaConsumer", (*parts, member), f"/consumer-group={info.group_id}/consumer={member}",
                           consumer_group_id=info.group_id, consumer_id=member, instance_id=None,
                           client_id=client_id, assignments=links.related(*parts, member, "assignments"))
            for member, client_id, _ in info.members]))

    def lag_json(links: Links, info, offset) -> dict:
        clients_of = {member: client_id for member, client_id, _ in info.members}
        return links.resource("KafkaConsumerLag", ("consumer-groups", info.group_id, "lags", offset.topic,
                                                   "partitions", offset.partition),
                              f"/consumer-group={info.group_id}/lag={offset.topic}/partition={offset.partition}",
                              consumer_group_id=info.group_id, topic_name=offset.topic,
                              partition_id=offset.partition, current_offset=_or(offset.committed, -1),
                              log_end_offset=_or(offset.latest_offset, -1), lag=_or(offset.lag, 0),
                              consumer_id=offset.member, instance_id=None,
                              client_id=clients_of.get(offset.member, ""))

    async def lags(request: Request) -> Response:
        clients, links = await context(request)
        info = await described(request, clients)
        return answer(links.listing("KafkaConsumerLagList", ("consumer-groups", info.group_id, "lags"),
                                    [lag_json(links, info, offset) for offset in info.offsets]))

    async def lag_summary(request: Request) -> Response:
        clients, links = await context(request)
        info = await described(request, clients)
        worst = max(info.offsets, key=lambda offset: _or(offset.lag, 0), default=None)
        clients_of = {member: client_id for member, client_id, _ in info.members}
        parts = ("consumer-groups", info.group_id)
        data = links.resource("KafkaConsumerGroupLagSummary", (*parts, "lag-summary"),
                              f"/consumer-group={info.group_id}/lag-summary", consumer_group_id=info.group_id,
                              max_lag=_or(worst and worst.lag, 0),
                              total_lag=sum(_or(offset.lag, 0) for offset in info.offsets),
                              max_lag_consumer_id=worst.member if worst else "", max_lag_instance_id=None,
                              max_lag_client_id=clients_of.get(worst.member, "") if worst else "",
                              max_lag_topic_name=worst.topic if worst else "",
                              max_lag_partition_id=worst.partition if worst else 0)
        if worst is not None:
            data["max_lag_consumer"] = links.related(*parts, "consumers", worst.member or "-")
            data["max_lag_partition"] = links.related("topics", worst.topic, "partitions", worst.partition)
        return answer(data)

    # ------------------------------------------------------------------------------------------- ACLs
    def acl_json(links: Links, binding) -> dict:
        return {"kind": "KafkaAcl", "metadata": {"self": links.url("acls") + "?" + "&".join(
            f"{key}={value}" for key, value in [("resource_type", binding.restype.name),
                                                ("resource_name", binding.name),
                                                ("pattern_type", binding.resource_pattern_type.name),
                                                ("principal", binding.principal), ("host", binding.host),
                                                ("operation", binding.operation.name),
                                                ("permission", binding.permission_type.name)])},
                "cluster_id": links.cluster_id, "resource_type": binding.restype.name,
                "resource_name": binding.name, "pattern_type": binding.resource_pattern_type.name,
                "principal": binding.principal, "host": binding.host, "operation": binding.operation.name,
                "permission": binding.permission_type.name}

    def acl_filter(request: Request) -> AclBindingFilter:
        params = request.query_params
        try:
            return acl_filter_of(params)
        except ValueError as exc:  # UNKNOWN where a filter needs a definite value or ANY
            raise RestError(400, BAD_REQUEST, str(exc)) from None

    def acl_filter_of(params) -> AclBindingFilter:
        return AclBindingFilter(enum_of(ResourceType, params.get("resource_type"), "resource_type", "ANY"),
                                params.get("resource_name"),
                                enum_of(ResourcePatternType, params.get("pattern_type"), "pattern_type", "ANY"),
                                params.get("principal"), params.get("host"),
                                enum_of(AclOperation, params.get("operation"), "operation", "ANY"),
                                enum_of(AclPermissionType, params.get("permission"), "permission", "ANY"))

    async def acls(request: Request) -> Response:
        clients, links = await context(request)
        found = await proxy.call(clients.admin.describe_acls, acl_filter(request))
        return answer(links.listing("KafkaAclList", ("acls",), [acl_json(links, binding) for binding in found]))

    async def create_acl(request: Request) -> Response:
        require_json(request)
        body = await json_body(request, proxy)
        try:
            binding = AclBinding(enum_of(ResourceType, field(body, "resource_type", str, True), "resource_type", ""),
                                 field(body, "resource_name", str, True),
                                 enum_of(ResourcePatternType, field(body, "pattern_type", str, True),
                                         "pattern_type", ""),
                                 field(body, "principal", str, True), field(body, "host", str, True),
                                 enum_of(AclOperation, field(body, "operation", str, True), "operation", ""),
                                 enum_of(AclPermissionType, field(body, "permission", str, True), "permission", ""))
        except ValueError as exc:  # ANY, UNKNOWN or MATCH where a binding needs a definite value
            raise RestError(400, BAD_REQUEST, str(exc)) from None
        clients, _ = await context(request)
        await proxy.call(clients.admin.create_acls, [binding])
        return Response(status_code=201)

    async def delete_acls(request: Request) -> Response:
        clients, links = await context(request)
        deleted = await proxy.call(clients.admin.delete_acls, [acl_filter(request)])
        return answer({"data": [acl_json(links, binding) for binding in deleted]})

    # ---------------------------------------------------------------------------------------- records
    async def produce(request: Request) -> Response:
        require_json(request)
        clients, links = await context(request)
        name = request.path_params["topic"]
        try:
            count = await proxy.call(clients.partition_count, name)
        except RestError as exc:
            raise not_found(f"Topic {name}") if exc.status == 404 else exc
        producing = RecordStream(proxy, clients, links, name, count)
        if request.headers.get("content-length") is not None:
            body = await body_of(request, proxy.settings.max_request_bytes)
            objects = split_objects(body)
            if len(objects) == 1:
                result = await producing.finish(await producing.send(objects[0]))
                return answer(result, _status_of(result["error_code"]))
            return DuplexResponse(producing.results(_chunks_of(body)), media_type="application/json")
        return DuplexResponse(producing.results(request.stream()), media_type="application/json")

    async def produce_batch(request: Request) -> Response:
        """Up to MAX_BATCH_ENTRIES records, each with its `id`, sent at once and answered 207 with the results of
        those the broker took (`successes`) and the errors of the others (`failures`), by id."""
        require_json(request)
        entries = field(await json_body(request, proxy), "entries", list, required=True)
        ids = []
        for entry in entries:
            entry_id = entry.get("id") if isinstance(entry, dict) else None
            if not isinstance(entry_id, str) or not 1 <= len(entry_id) <= MAX_BATCH_ID_LENGTH:
                raise unprocessable("Batch entry identifier is not a valid string.", PRODUCE_BATCH)
            ids.append(entry_id)
        if len(set(ids)) != len(ids):
            raise unprocessable("Batch entry IDs are not distinct.", PRODUCE_BATCH)
        if not entries:
            raise unprocessable("Empty batch.", PRODUCE_BATCH)
        if len(entries) > MAX_BATCH_ENTRIES:
            raise unprocessable(f"Too many entries in batch (at most {MAX_BATCH_ENTRIES}).", PRODUCE_BATCH)
        clients, links = await context(request)
        name = request.path_params["topic"]
        try:
            count = await proxy.call(clients.partition_count, name)
        except RestError as exc:
            raise not_found(f"Topic {name}") if exc.status == 404 else exc
        producing = RecordStream(proxy, clients, links, name, count)
        sent = [await producing.send(entry) for entry in entries]
        successes, failures = [], []
        for entry_id, each in zip(ids, sent):
            result = await producing.finish(each)
            if result["error_code"] == 200:
                successes.append({"id": entry_id, **{k: v for k, v in result.items() if k != "error_code"}})
            else:
                failures.append({"id": entry_id, **result})
        return answer({"successes": successes, "failures": failures}, 207)

    def config_routes(path: str, which: str) -> list[Route]:
        listing, one, update, reset, batch = config_handlers(which)
        return [Route(path, listing, methods=["GET"]), Route(f"{path}:alter", batch, methods=["POST"]),
                Route(f"{path}/{{name}}", one, methods=["GET"]), Route(f"{path}/{{name}}", update, methods=["PUT"]),
                Route(f"{path}/{{name}}", reset, methods=["DELETE"])]

    return [
        Route("/v3/clusters", clusters, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}", cluster, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/brokers", brokers, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/brokers/{broker_id:int}", broker, methods=["GET"]),
        *config_routes("/v3/clusters/{cluster_id}/brokers/{broker_id:int}/configs", "broker"),
        Route("/v3/clusters/{cluster_id}/brokers/-/configs", every_broker_configs, methods=["GET"]),
        *config_routes("/v3/clusters/{cluster_id}/broker-configs", "cluster"),
        Route("/v3/clusters/{cluster_id}/topics/-/configs", every_topic_configs, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics", topics, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics", create_topic, methods=["POST"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}", topic, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}", delete_topic, methods=["DELETE"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}", update_topic, methods=["PATCH"]),
        *config_routes("/v3/clusters/{cluster_id}/topics/{topic}/configs", "topic"),
        Route("/v3/clusters/{cluster_id}/topics/{topic}/partitions", partitions, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id:int}", partition, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id:int}/replicas", replicas,
              methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}/partitions/{partition_id:int}/replicas/{broker_id:int}",
              replica, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/brokers/{broker_id:int}/partition-replicas", broker_replicas,
              methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}/records", produce, methods=["POST"]),
        Route("/v3/clusters/{cluster_id}/topics/{topic}/records:batch", produce_batch, methods=["POST"]),
        Route("/v3/clusters/{cluster_id}/consumer-groups", groups, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/consumer-groups/{group}", group, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/consumer-groups/{group}/consumers", consumers, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/consumer-groups/{group}/lags", lags, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/consumer-groups/{group}/lag-summary", lag_summary, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/acls", acls, methods=["GET"]),
        Route("/v3/clusters/{cluster_id}/acls", create_acl, methods=["POST"]),
        Route("/v3/clusters/{cluster_id}/acls", delete_acls, methods=["DELETE"]),
    ]


class DuplexResponse(StreamingResponse):
    """A streamed answer sent while the request's body is still read: Starlette's own, under ASGI before 2.4, reads
    receive() for a disconnect meanwhile and would take the body's chunks from the request."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await self.stream_response(send)
        except OSError:
            raise ClientDisconnect() from None


class RecordStream:
    """Records of one produce request sent as they are parsed, their results given back in order."""

    def __init__(self, proxy: Proxy, clients, links: Links, topic: str, partitions: int):
        self.proxy, self.clients, self.links, self.topic, self.partitions = proxy, clients, links, topic, partitions

    async def send(self, record) -> tuple | dict:
        """The record queued (its delivery's future, and what its result says of its key and value), or the error
        result of a record that cannot be sent."""
        try:
            if not isinstance(record, dict):
                raise RestError(400, BAD_REQUEST, "A record must be a JSON object")
            partition = field(record, "partition_id", int)
            if partition is not None and not 0 <= partition < self.partitions:
                raise RestError(404, NOT_FOUND, f"Partition {self.topic}-{partition} not found")
            key, key_info = await self.encode(record.get("key"), "key")
            value, value_info = await self.encode(record.get("value"), "value")
            headers = []
            for header in field(record, "headers", list, default=[]):
                raw = field(header, "value", str)
                headers.append((field(header, "name", str, required=True),
                                None if raw is None else b64decode(raw, "header value", v3=True)))
            timestamp = parse_time(record.get("timestamp"))
            future = self.clients.send(self.topic, value, key, murmur2_partitioner(key, self.partitions)
                                       if partition is None else partition, headers, timestamp)
        except RestError as exc:
            return exc.body()
        return future, key_info, value_info

    async def encode(self, data, what: str) -> tuple[bytes | None, dict | None]:
        """A key or value as stored, and what its result says of it (type, size, and a schema's subject and id)."""
        kind = v3_type(data, what)
        if kind not in SCHEMA_TYPES:
            stored, kind = encode_v3(data, what)
            return stored, kind and {"type": kind, "size": len(stored or b"")}
        fmt = schema_format(SCHEMA_TYPES[kind], self.proxy.schema_formats)
        subject = field(data, "subject", str, default=f"{self.topic}-{what}")
        schema, schema_id = field(data, "schema", str), field(data, "schema_id", int)
        stored, schema_id = await asyncio.to_thread(self._serialized, fmt, what, subject, schema, schema_id,
                                                    data.get("data"))
        return stored, {"type": kind, "size": len(stored or b""), "subject": subject, "schema_id": schema_id}

    def _serialized(self, fmt: str, what: str, subject: str, schema, schema_id, data):
        if schema is None and schema_id is None:  # the subject's latest schema
            try:
                schema_id = self.proxy.schemas.client.get_latest_version(subject).schema_id
            except SchemaRegistryError as exc:
                raise registration_failed(exc) from None
        return self.proxy.schemas.encode(fmt, self.topic, what == "key", schema, schema_id, data)

    def ready(self, sent) -> bool:
        return isinstance(sent, dict) or sent[0].done()

    async def finish(self, sent) -> dict:
        """The result of what send() gave, once the broker has answered."""
        if isinstance(sent, dict):
            return sent
        future, key_info, value_info = sent
        try:
            delivered = future.result() if future.done() else await asyncio.wrap_future(future)
        except ClientError as exc:
            return of_client_error(exc).body()
        return {"error_code": 200, "cluster_id": self.links.cluster_id, "topic_name": self.topic,
                "partition_id": delivered.partition, "offset": delivered.offset,
                "timestamp": iso(delivered.timestamp_ms), "key": key_info, "value": value_info}

    async def results(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """One result line per JSON object of the stream, sent in order as each is known."""
        decoder = json.JSONDecoder()
        text = codecs.getincrementaldecoder("utf-8")("replace")
        buffer = ""
        pending: collections.deque = collections.deque()
        limit = self.proxy.settings.max_request_bytes
        async for chunk in chunks:
            buffer += text.decode(chunk)
            index = 0
            while True:
                index = _SPACE.match(buffer, index).end()
                if index == len(buffer):
                    break
                try:
                    record, index = decoder.raw_decode(buffer, index)
                except json.JSONDecodeError:
                    break
                pending.append(await self.send(record))
            buffer = buffer[index:]
            while pending and self.ready(pending[0]):
                yield _line(await self.finish(pending.popleft()))
            if len(buffer) > limit:
                pending.append(too_large(limit).body())
                buffer = ""
                break
        buffer = (buffer + text.decode(b"", final=True)).strip()
        if buffer:
            pending.append(RestError(400, BAD_REQUEST, "Malformed JSON at the end of the stream").body())
        while pending:
            yield _line(await self.finish(pending.popleft()))


def split_objects(body: bytes) -> list:
    """The JSON values of a body of one or more of them, whitespace between (400 if it is not)."""
    text = body.decode("utf-8", "replace")
    decoder, found, index = json.JSONDecoder(), [], 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            parse_json(text[index:].encode())  # raises 400 with the parser's reason
        found.append(value)
    if not found:
        raise RestError(400, BAD_REQUEST, "Malformed JSON: the body is empty")
    return found


async def _chunks_of(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _line(result: dict) -> bytes:
    return json.dumps(result, separators=(",", ":")).encode() + b"\n"


def _status_of(error_code: int) -> int:
    return error_code if error_code < 1000 else error_code // 100


def _or(value, default):
    return default if value is None else value

