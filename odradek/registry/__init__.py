"""A schema registry speaking Confluent Schema Registry's REST API (docs/schema-registry.md), its schemas kept in
the compacted `_schemas` topic in Confluent's record format.

It is its own layer: it talks to Kafka only through Kafka clients (confluent-kafka), so it runs beside any
Kafka-compatible cluster (`odradek schema-registry -b ...`) or in a broker's process (`schema.registry.port`).
state (the record format, applied in memory), schemas (parsing), compatibility (Confluent's rules), store (the
topic's I/O), service (each call), app (the REST routes) and server (uvicorn) build on each other in that order.
"""

from odradek.registry.server import SchemaRegistry, SchemaRegistrySettings

__all__ = ["SchemaRegistry", "SchemaRegistrySettings"]
