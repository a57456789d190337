"""Request handlers, one module per area of the protocol; `build_handlers` maps API keys to them.

A handler takes (connection, request header, decoded request) and returns the response body, None when the request
gets no answer (Produce with acks=0), or a coroutine when it has to wait (Fetch long polls). Handlers turn
KafkaError into per-partition or per-resource error codes, and a failed file operation of a partition's log into
KAFKA_STORAGE_ERROR for that partition (`errors.storage_error`); anything else they raise closes that connection.
ApiVersions advertises exactly the APIs that have a handler here. Every handler but ApiVersions' counts its time
against the client's request_percentage quota (odradek/security/quotas.py).
"""

from __future__ import annotations

from odradek.broker.handlers import (acls, admin, api_versions, configs, fetch, groups, log_dirs, metadata, offsets,
                                     partition_admin, produce, quotas, security, share, share_state,
                                     transactions)
from odradek.security.quotas import with_request_quota


def build_handlers(broker) -> tuple[dict, object]:
    """(api key -> handler, the answer to an unsupported version of a request)."""
    handlers: dict = {}
    for module in (acls, metadata, produce, fetch, offsets, admin, partition_admin, configs, log_dirs, security,
                   transactions, groups, quotas, share, share_state):
        handlers.update(module.handlers(broker))
    handlers = {key: with_request_quota(broker.quotas, handler) for key, handler in handlers.items()}
    answer_api_versions, unsupported_version_answer = api_versions.make(set(handlers))
    handlers[api_versions.API_VERSIONS.key] = answer_api_versions
    return handlers, unsupported_version_answer
