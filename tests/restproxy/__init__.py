"""The REST proxy against real brokers: Confluent REST Proxy v2 and v3 through httpx."""
