"""The web console (`odradek console`, or `odradek serve --set console.port=...`): the cluster at a glance in a
browser, reading only through the Kafka protocol and ZooKeeper so it works against any Kafka-compatible cluster.

- cluster: what it reads and changes (Admin, SimpleConsumer, Producer; kazoo read-only), one page at a time:
  topics, messages and searches, groups, ACLs, SCRAM users, broker settings, quotas;
- render: how records, settings and pages are shown, which records a search reads (pure functions);
- rates: produce/fetch rates from the brokers' Prometheus metrics, and every group's lag over time (sampled);
- app: the Starlette app, Jinja2 templates and htmx/uPlot (vendored in static/);
- server: uvicorn on 127.0.0.1 by default. docs/console.md is the user's guide.
"""

from odradek.console.server import Console, ConsoleSettings

__all__ = ["Console", "ConsoleSettings"]
