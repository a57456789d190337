"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, the broker (its dynamic configs) and groups.

Every value is reported with the source a Kafka user expects and, when asked, its synonyms in Kafka's order
(ConfigHelper.configSynonyms): a topic override (TOPIC_CONFIG), then the broker keys that default it, layer by layer
(DYNAMIC_BROKER_CONFIG for this broker, DYNAMIC_DEFAULT_BROKER_CONFIG for the cluster default, STATIC_BROKER_CONFIG,
then Kafka's own DEFAULT_CONFIG of that broker key), each layer in the broker keys' precedence (log.retention.ms,
.minutes, .hours). Configs come back in the order they were asked for (all of them, in table order, when none were
named). AlterConfigs replaces a resource's whole set; IncrementalAlterConfigs edits it key by key (SET, DELETE,
APPEND, SUBTRACT for list keys). On a BROKER resource, name "" is the cluster default and "<node id>" this broker:
what Kafka refuses is refused with its message (odradek.config.dynamic_broker_configs_refusal: a static Kafka
setting, an SSL store setting without its listener's prefix, a per-broker setting at the cluster default), anything
else is stored (names Kafka does not know and listener-prefixed ones too, described back as strings, passwords
hidden), and Kafka's validation failures are INVALID_REQUEST (KAFKA-13609 keeps them so). A BROKER_LOGGER resource
("<node id>") is the broker's Python loggers under log4j's level names, as Kafka's RuntimeLoggerManager serves its
log4j loggers (`kafka-configs --entity-type broker-loggers`): described with each logger's effective level ("root"
is the root logger), set or unset (back to inheriting) only by IncrementalAlterConfigs. A GROUP resource (type 32,
`kafka-configs --entity-type groups`) is a group id's share group configs (odradek/coordinator/share_configs.py:
Kafka's names, checks and INVALID_CONFIG answers), kept in the catalogue and told to the share coordinator; they
are served on a single node (a ZooKeeper cluster's share groups run with its brokers' group.share.* configs). With
an authorizer, describing needs DESCRIBE_CONFIGS and altering ALTER_CONFIGS on the topic or the group, or on the
cluster for a broker or broker logger resource.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging

from odradek.cluster.metadata import validate_topic_name
from odradek.config import (BROKER_CONFIGS, DEPRECATED_TOPIC_CONFIGS, KAFKA_DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIGS,
                            TOPIC_DEFAULT_BROKER_KEYS, ConfigKey, ConfigSource, ConfigType, broker_default_for,
                            broker_key_synonyms, dynamic_base_name, dynamic_broker_configs_refusal,
                            validate_topic_configs)
from odradek.coordinator.share_configs import GROUP_CONFIGS, group_config_key, value_in_force
from odradek.coordinator.share_configs import validate as validate_group_configs
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation, ResourceType

DESCRIBE_CONFIGS = api("DescribeConfigs")
ALTER_CONFIGS = api("AlterConfigs")
INCREMENTAL_ALTER_CONFIGS = api("IncrementalAlterConfigs")
DescribeConfigsResponse = DESCRIBE_CONFIGS.response
AlterConfigsResponse = ALTER_CONFIGS.response
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS.response

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

ROOT_LOGGER = "root"
# Kafka's LogLevelConfig.VALID_LOG_LEVELS as Python levels, most severe first; log4j's TRACE is below DEBUG
LOG4J_LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
                "DEBUG": logging.DEBUG, "TRACE": 5}

# Every broker key DescribeConfigs lists for a broker: its own settings, then the topic defaults.
ALL_BROKER_KEYS: dict[str, ConfigKey] = {**BROKER_CONFIGS, **TOPIC_DEFAULT_BROKER_KEYS}


def kafka_default(name: str) -> str | None:
    """Kafka's default of a broker key as DescribeConfigs shows it (None: Kafka defines none)."""
    key = ALL_BROKER_KEYS.get(name)
    return None if key is None or key.default is None else key.render(key.default)


def config_key(name: str) -> ConfigKey:
    """The broker key of `name` (its listener prefix set aside); a name no table knows is a string Kafka takes as
    given, and hidden as Kafka hides a password when it names one."""
    key = ALL_BROKER_KEYS.get(dynamic_base_name(name))
    if key is not None:
        return key if key.name == name else dataclasses.replace(key, name=name)
    return ConfigKey(name, ConfigType.STRING, None, "")


def is_sensitive(name: str) -> bool:
    """Kafka's PASSWORD-typed settings: never shown in DescribeConfigs."""
    base = dynamic_base_name(name)
    return base.endswith((".password", "sasl.jaas.config")) or base == "ssl.keystore.key"


def in_order(entries: list, wanted) -> list:
    """The entries named in `wanted`, in its order (each once), or all of them when nothing was named."""
    if not wanted:
        return entries
    by_name = {entry.name: entry for entry in entries}
    return [by_name[name] for name in dict.fromkeys(wanted) if name in by_name]


def require_on(access, operation: AclOperation, resource) -> None:
    """Kafka's check of a config resource: the operation on the topic, or on the cluster for a broker or broker
    logger resource, on the group for a group resource (TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED, with the
    error's own text, as Kafka's ConfigHelper answers: kafka-topics --describe then says "Topic authorization
    failed.")."""
    if resource.resource_type == TOPIC:
        if not access.allows(operation, ResourceType.TOPIC, resource.resource_name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    elif resource.resource_type in (BROKER, BROKER_LOGGER):
        access.require_cluster(operation)
    elif resource.resource_type == GROUP:
        access.require(operation, ResourceType.GROUP, resource.resource_name)


def existing_logger(name: str) -> logging.Logger | None:
    """The Python logger of that name if the process made it ("root": the root logger), as log4j's exists()."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    logger = logging.Logger.manager.loggerDict.get(name)
    return logger if isinstance(logger, logging.Logger) else None


def log4j_level(level: int) -> str:
    """The log4j name of a Python level: the most severe one it logs (NOTSET logs everything, TRACE)."""
    return next((name for name, value in LOG4J_LEVELS.items() if level >= value), "TRACE")


def logger_entries() -> list:
    """Every logger with its effective level, root first (Kafka's Log4jController.loggers)."""
    names = [ROOT_LOGGER, *sorted(name for name, logger in logging.Logger.manager.loggerDict.items()
                                  if isinstance(logger, logging.Logger))]
    return [DescribeConfigsResponse.DescribeConfigsResourceResult(
        name=name, value=log4j_level(existing_logger(name).getEffectiveLevel()), read_only=False, is_default=False,
        config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, is_sensitive=False, synonyms=[],
        config_type=ConfigType.STRING, documentation=None) for name in names]


def alter_loggers(changes, validate_only: bool) -> None:
    """Kafka's RuntimeLoggerManager: every change checked first (INVALID_CONFIG for an unknown logger or level,
    INVALID_REQUEST for APPEND, SUBTRACT or unsetting root), then SET gives a logger its level and DELETE makes it
    inherit its parent's again."""
    for change in changes:
        op = change.config_operation
        if op not in (SET, DELETE):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{OPERATION_NAMES.get(op, op)} operation is not allowed "
                                                        "for the BROKER_LOGGER resource")
        if op == SET and change.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {change.name}")
        if existing_logger(change.name) is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {change.name} does not exist!")
        if op == SET and change.value not in LOG4J_LEVELS:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Cannot set the log level of {change.name} to {change.value} as it is not a supported "
                             f"log level. Valid log levels are {', '.join(sorted(LOG4J_LEVELS))}")
        if op == DELETE and change.name == ROOT_LOGGER:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Removing the log level of the {ROOT_LOGGER} logger is "
                                                        "not allowed")
    if not validate_only:
        for change in changes:
            existing_logger(change.name).setLevel(LOG4J_LEVELS[change.value] if change.config_operation == SET
                                                  else logging.NOTSET)


def handlers(broker) -> dict:
    def layers() -> list[tuple[dict, ConfigSource]]:
        """The broker's settings, highest precedence first (Kafka's defaults are the last layer)."""
        return [(broker.dynamic_configs(str(broker.node_id)), ConfigSource.DYNAMIC_BROKER_CONFIG),
                (broker.dynamic_configs(""), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (broker.static_props, ConfigSource.STATIC_BROKER_CONFIG)]

    def broker_synonyms(name: str, names) -> list[tuple[str, str | None, ConfigSource]]:
        """Kafka's ConfigHelper.configSynonyms: each layer's values of `names`, layer by layer, from the first that
        is `name` itself on (none when `name` is set nowhere, even if a synonym after it is: a topic's retention.ms
        lists nothing while only log.retention.hours has a value)."""
        found = [(each, layer[each], source) for layer, source in layers() for each in names if each in layer]
        found += [(each, kafka_default(each), ConfigSource.DEFAULT_CONFIG) for each in names
                  if kafka_default(each) is not None]
        return list(itertools.dropwhile(lambda synonym: synonym[0] != name, found))

    def topic_entries(name: str, include_synonyms: bool, include_docs: bool) -> list:
        return entries_of_topic(broker.metadata.topics[name].configs, include_synonyms, include_docs)

    def entries_of_topic(overrides: dict, include_synonyms: bool, include_docs: bool) -> list:
        """Every topic config of a topic with these overrides, as DescribeConfigs lists them (CreateTopics v5+
        answers them too: broker.topic_config_entries)."""
        entries = []
        for key in TOPIC_CONFIGS.values():
            synonyms = broker_synonyms(key.broker_synonyms[0], key.broker_synonyms) if key.broker_synonyms else []
            if key.name in overrides:
                value = key.parse(overrides[key.name])
                synonyms.insert(0, (key.name, key.render(value), ConfigSource.TOPIC_CONFIG))
            else:
                value = broker_default_for(key, broker.props)[0]
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG  # Kafka's, even where it differs
            entries.append(entry(key, value, source, synonyms if include_synonyms else [], include_docs, False))
        return entries

    broker.topic_config_entries = entries_of_topic

    def broker_entries(resource_name: str, include_synonyms: bool, include_docs: bool) -> list:
        """This broker's keys ("<id>"), or the cluster-default dynamic keys set ("" lists only those, as Kafka)."""
        def dynamic_entries(layer: str, source: ConfigSource) -> list:
            return [entry(config_key(name), config_key(name).parse(raw), source,
                          [(name, None if is_sensitive(name) else raw, source)] if include_synonyms else [],
                          include_docs, False)
                    for name, raw in broker.dynamic_configs(layer).items()
                    if resource_name == "" or name not in ALL_BROKER_KEYS]
        if resource_name == "":
            return dynamic_entries("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        entries = []
        for key in ALL_BROKER_KEYS.values():
            synonyms = broker_synonyms(key.name, broker_key_synonyms(key.name))
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            value = broker.config[key.name] if key.name in BROKER_CONFIGS else (
                key.parse(broker.props[key.name]) if key.name in broker.props else key.default)
            entries.append(entry(key, value, source, synonyms if include_synonyms else [], include_docs,
                                 key.name not in KAFKA_DYNAMIC_BROKER_CONFIGS))
        own = dynamic_entries(resource_name, ConfigSource.DYNAMIC_BROKER_CONFIG)
        own_names = {item.name for item in own}
        return entries + own + [item for item in dynamic_entries("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
                                if item.name not in own_names]

    def entry(key: ConfigKey, value, source: ConfigSource, synonyms, include_docs: bool, read_only: bool):
        sensitive = is_sensitive(key.name)
        return DescribeConfigsResponse.DescribeConfigsResourceResult(
            name=key.name, value=None if sensitive else key.render(value), read_only=read_only,
            is_default=source == ConfigSource.DEFAULT_CONFIG, config_source=source, is_sensitive=sensitive,
            synonyms=[DescribeConfigsResponse.DescribeConfigsSynonym(name=name, value=raw, source=src)
                      for name, raw, src in synonyms],
            config_type=key.type if key.type != ConfigType.UNKNOWN else ConfigType.STRING,
            documentation=key.doc if include_docs else None)

    def check_broker_name(resource_name: str) -> None:
        """"" (the cluster default) or this broker's id, as Kafka's validateResourceNameIsCurrentNodeId."""
        if resource_name == "":
            return
        try:
            node_id = int(resource_name)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Node id must be an integer, but it is: {resource_name}") from None
        if node_id != broker.node_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {broker.node_id}, but received {resource_name}")

    def group_entries(group_id: str, include_synonyms: bool, include_docs: bool) -> list:
        """Every served group config: the group's own (GROUP_CONFIG), else what it runs with (DEFAULT_CONFIG)."""
        own = broker.metadata.group_configs.get(group_id, {})
        entries = []
        for key in GROUP_CONFIGS.values():
            source = ConfigSource.GROUP_CONFIG if key.name in own else ConfigSource.DEFAULT_CONFIG
            synonyms = [(key.name, own[key.name], source)] if key.name in own and include_synonyms else []
            entries.append(entry(key, value_in_force(key.name, own, broker.config), source, synonyms,
                                 include_docs, False))
        return entries

    def check_group_resource(resource_name: str) -> None:
        """Group configs are kept in a single node's catalogue; a ZooKeeper cluster's share groups run with the
        brokers' group.share.* configs."""
        if broker.config["zookeeper.connect"]:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {GROUP}")
        if not resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")

    def check_logger_resource_name(resource_name: str) -> None:
        """A BROKER_LOGGER resource is this broker's id, never the cluster default."""
        if resource_name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        check_broker_name(resource_name)

    def answer_describe_configs(connection, header, request):
        version = header.api_version
        include_synonyms = version >= 1 and request.include_synonyms
        include_docs = version >= 3 and request.include_documentation
        access = broker.access(connection)
        results = []
        for resource in request.resources:
            result = DescribeConfigsResponse.DescribeConfigsResult(
                error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name, configs=[])
            try:
                require_on(access, AclOperation.DESCRIBE_CONFIGS, resource)
                if resource.resource_type == TOPIC:
                    if resource.resource_name not in broker.metadata.topics:
                        validate_topic_name(resource.resource_name)  # INVALID_TOPIC_EXCEPTION first, as Kafka
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         f"Topic {resource.resource_name} does not exist")
                    entries = topic_entries(resource.resource_name, include_synonyms, include_docs)
                elif resource.resource_type == BROKER:
                    check_broker_name(resource.resource_name)
                    entries = broker_entries(resource.resource_name, include_synonyms, include_docs)
                elif resource.resource_type == BROKER_LOGGER:
                    check_logger_resource_name(resource.resource_name)
                    entries = logger_entries()
                elif resource.resource_type == GROUP:
                    check_group_resource(resource.resource_name)
                    entries = group_entries(resource.resource_name, include_synonyms, include_docs)
                else:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Unsupported resource type {resource.resource_type}")
            except KafkaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
            else:
                result.configs = in_order(entries, resource.configuration_keys)
            results.append(result)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def alter_topic(resource, compute, validate_only: bool):
        topic = broker.metadata.topics.get(resource.resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist")
        new_configs = compute(dict(topic.configs), resource.configs, topic_key)
        if validate_only:
            validate_topic_configs(new_configs)
        else:
            await broker.catalogue_write(broker.alter_topic_configs, topic.name, new_configs)

    async def alter_broker(resource, compute, validate_only: bool):
        check_broker_name(resource.resource_name)
        new_configs = compute(dict(broker.dynamic_configs(resource.resource_name)), resource.configs, config_key)
        refusal = dynamic_broker_configs_refusal(new_configs, per_broker=resource.resource_name != "")
        if refusal is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, refusal)
        try:
            for name, raw in new_configs.items():
                config_key(name).parse(raw)
        except KafkaError as exc:  # Kafka answers a broker config's bad value with INVALID_REQUEST (KAFKA-13609)
            raise KafkaError(ErrorCode.INVALID_REQUEST, exc.message) from None
        broker.check_dynamic_configs(resource.resource_name, new_configs)
        if not validate_only:
            await broker.alter_dynamic_configs(resource.resource_name, new_configs)

    async def alter_group(resource, compute, validate_only: bool):
        group_id = resource.resource_name
        check_group_resource(group_id)
        new_configs = compute(dict(broker.metadata.group_configs.get(group_id, {})), resource.configs,
                              group_config_key)
        validate_group_configs(new_configs, broker.config)
        if not validate_only:
            await broker.catalogue_write(broker.metadata.set_group_configs, group_id, new_configs)
            broker.share_coordinator.configs_changed(group_id)

    def topic_key(name: str) -> ConfigKey | None:
        """The topic key of that name (None for a deprecated one, which is taken and ignored)."""
        key = TOPIC_CONFIGS.get(name)
        if key is None and name not in DEPRECATED_TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        return key

    def replace_all(current: dict, changes, key_of) -> dict:
        return {c.name: c.value for c in changes if c.value is not None}

    def edit(current: dict, changes, key_of) -> dict:
        for change in changes:
            key = key_of(change.name)
            op = change.config_operation
            if op == SET:
                current[change.name] = change.value
            elif op == DELETE:
                current.pop(change.name, None)
            elif op in (APPEND, SUBTRACT):
                if key is None or key.type != ConfigType.LIST:
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"Config {change.name} is not a list, so it cannot be appended to")
                items = key.parse(current.get(change.name, key.render(key.default)))
                for item in key.parse(change.value or ""):
                    if op == APPEND and item not in items:
                        items.append(item)
                    elif op == SUBTRACT and item in items:
                        items.remove(item)
                current[change.name] = ",".join(items)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
        return current

    def answer_alter(response_class, compute):
        async def answer(connection, header, request):
            access = broker.access(connection)
            responses = []
            for resource in request.resources:
                result = response_class.AlterConfigsResourceResponse(
                    error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                    resource_name=resource.resource_name)
                try:
                    require_on(access, AclOperation.ALTER_CONFIGS, resource)
                    names = [config.name for config in resource.configs]
                    if len(set(names)) != len(names):
                        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                    if resource.resource_type == TOPIC:
                        await alter_topic(resource, compute, request.validate_only)
                    elif resource.resource_type == BROKER:
                        await alter_broker(resource, compute, request.validate_only)
                    elif resource.resource_type == GROUP:
                        await alter_group(resource, compute, request.validate_only)
                    elif resource.resource_type == BROKER_LOGGER and response_class is AlterConfigsResponse:
                        raise KafkaError(ErrorCode.INVALID_REQUEST, "AlterConfigs is deprecated and does not "
                                                                    "support the resource type BROKER_LOGGER")
                    elif resource.resource_type == BROKER_LOGGER:
                        check_logger_resource_name(resource.resource_name)
                        alter_loggers(resource.configs, request.validate_only)
                    else:
                        raise KafkaError(ErrorCode.INVALID_REQUEST,
                                         f"Unknown resource type {resource.resource_type}")
                except KafkaError as exc:
                    result.error_code, result.error_message = exc.code, exc.message
                responses.append(result)
            return response_class(throttle_time_ms=0, responses=responses)
        return answer

    return {DESCRIBE_CONFIGS.key: answer_describe_configs,
            ALTER_CONFIGS.key: answer_alter(AlterConfigsResponse, replace_all),
            INCREMENTAL_ALTER_CONFIGS.key: answer_alter(IncrementalAlterConfigsResponse, edit)}
