"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics (and DescribeConfigs for the broker).

Every value is reported with the source a Kafka user expects: a topic override (TOPIC_CONFIG), a broker setting it
inherits (STATIC_BROKER_CONFIG, named by its broker key) or Kafka's default (DEFAULT_CONFIG), and with synonyms
when asked, most specific first, as Kafka lists them. AlterConfigs replaces a topic's whole override set;
IncrementalAlterConfigs edits it key by key (SET, DELETE, APPEND, SUBTRACT for list keys).
"""

from __future__ import annotations

from odradek.config import (BROKER_CONFIGS, TOPIC_CONFIGS, ConfigKey, ConfigSource, ConfigType, broker_default_for,
                            validate_topic_configs)
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api

DESCRIBE_CONFIGS = api("DescribeConfigs")
ALTER_CONFIGS = api("AlterConfigs")
INCREMENTAL_ALTER_CONFIGS = api("IncrementalAlterConfigs")
DescribeConfigsResponse = DESCRIBE_CONFIGS.response
AlterConfigsResponse = ALTER_CONFIGS.response
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS.response

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def handlers(broker) -> dict:
    def topic_entries(name: str, include_synonyms: bool, include_docs: bool) -> list:
        overrides = broker.metadata.topics[name].configs
        entries = []
        for key in TOPIC_CONFIGS.values():
            synonyms = []
            if key.name in overrides:
                synonyms.append((key.name, key.parse(overrides[key.name]), ConfigSource.TOPIC_CONFIG))
            for broker_key in key.broker_synonyms:
                if broker_key in broker.props:
                    synonyms.append((broker_key, broker.props[broker_key], ConfigSource.STATIC_BROKER_CONFIG))
            synonyms.append((key.name, key.default, ConfigSource.DEFAULT_CONFIG))
            if key.name in overrides:
                value, source = synonyms[0][1], ConfigSource.TOPIC_CONFIG
            else:
                value, from_key = broker_default_for(key, broker.props)
                source = ConfigSource.STATIC_BROKER_CONFIG if from_key else ConfigSource.DEFAULT_CONFIG
            entries.append(entry(key, value, source, synonyms if include_synonyms else [], include_docs, False))
        return entries

    def broker_entries(include_synonyms: bool, include_docs: bool) -> list:
        entries = []
        for key in BROKER_CONFIGS.values():
            value = broker.config[key.name]
            source = ConfigSource.STATIC_BROKER_CONFIG if key.name in broker.props else ConfigSource.DEFAULT_CONFIG
            synonyms = [(key.name, value, source)] if include_synonyms else []
            entries.append(entry(key, value, source, synonyms, include_docs, True))
        return entries

    def entry(key: ConfigKey, value, source: ConfigSource, synonyms, include_docs: bool, read_only: bool):
        return DescribeConfigsResponse.DescribeConfigsResourceResult(
            name=key.name, value=key.render(value), read_only=read_only,
            is_default=source == ConfigSource.DEFAULT_CONFIG, config_source=source, is_sensitive=False,
            synonyms=[DescribeConfigsResponse.DescribeConfigsSynonym(
                name=name, value=key.render(key.parse(raw)) if not isinstance(raw, str) else raw, source=src)
                for name, raw, src in synonyms],
            config_type=key.type if key.type != ConfigType.UNKNOWN else ConfigType.STRING,
            documentation=key.doc if include_docs else None)

    def answer_describe_configs(connection, header, request):
        version = header.api_version
        include_synonyms = version >= 1 and request.include_synonyms
        include_docs = version >= 3 and request.include_documentation
        results = []
        for resource in request.resources:
            result = DescribeConfigsResponse.DescribeConfigsResult(
                error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name, configs=[])
            try:
                if resource.resource_type == TOPIC:
                    if resource.resource_name not in broker.metadata.topics:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         f"Topic {resource.resource_name} does not exist")
                    entries = topic_entries(resource.resource_name, include_synonyms, include_docs)
                elif resource.resource_type == BROKER:
                    if resource.resource_name not in ("", str(broker.node_id)):
                        raise KafkaError(ErrorCode.INVALID_REQUEST,
                                         f"Unexpected broker id, expected {broker.node_id}")
                    entries = broker_entries(include_synonyms, include_docs)
                else:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Unsupported resource type {resource.resource_type}")
            except KafkaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
            else:
                wanted = resource.configuration_keys
                result.configs = entries if wanted is None else [e for e in entries if e.name in set(wanted)]
            results.append(result)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    def alter(resource, compute, validate_only: bool):
        if resource.resource_type != TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Only topic configs can be altered on this broker (broker configs are static)")
        topic = broker.metadata.topics.get(resource.resource_name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist")
        new_configs = compute(dict(topic.configs), resource.configs)
        if validate_only:
            validate_topic_configs(new_configs)
        else:
            broker.alter_topic_configs(topic.name, new_configs)

    def replace_all(current: dict, changes) -> dict:
        return {c.name: c.value for c in changes if c.value is not None}

    def edit(current: dict, changes) -> dict:
        for change in changes:
            key = TOPIC_CONFIGS.get(change.name)
            if key is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {change.name}")
            op = change.config_operation
            if op == SET:
                current[change.name] = change.value
            elif op == DELETE:
                current.pop(change.name, None)
            elif op in (APPEND, SUBTRACT):
                if key.type != ConfigType.LIST:
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
        def answer(connection, header, request):
            responses = []
            for resource in request.resources:
                result = response_class.AlterConfigsResourceResponse(
                    error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                    resource_name=resource.resource_name)
                try:
                    alter(resource, compute, request.validate_only)
                except KafkaError as exc:
                    result.error_code, result.error_message = exc.code, exc.message
                responses.append(result)
            return response_class(throttle_time_ms=0, responses=responses)
        return answer

    return {DESCRIBE_CONFIGS.key: answer_describe_configs,
            ALTER_CONFIGS.key: answer_alter(AlterConfigsResponse, replace_all),
            INCREMENTAL_ALTER_CONFIGS.key: answer_alter(IncrementalAlterConfigsResponse, edit)}
