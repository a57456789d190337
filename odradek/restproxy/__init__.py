"""The REST proxy (`odradek rest-proxy`, or `rest.proxy.port` beside a broker): Confluent REST Proxy's v2 and v3
APIs over HTTP, for what cannot carry a Kafka client (a browser, curl, a serverless function), talking to any
Kafka-compatible cluster through confluent-kafka.

- formats: media types, the embedded formats and the checks of request fields (pure functions);
- errors: RestError and Confluent's error codes, a broker's refusal mapped to them;
- clients: an Admin and a Producer per principal (basic auth logs each request in as its SASL user), bounded;
- consumers: the v2 consumer instances, each a real group member, expiring when idle;
- v2, v3: the routes; app: the Starlette app and what the routes share; server: uvicorn, TLS.
docs/rest-proxy.md is the user's guide, with the endpoints served beside Confluent's.
"""

from odradek.restproxy.app import ProxySettings
from odradek.restproxy.server import RestProxy

__all__ = ["ProxySettings", "RestProxy"]
