"""The web console (`odradek console`, or `odradek serve --set console.port=...`): the cluster at a glance in a
browser, reading only through the Kafka protocol and ZooKeeper so it works against any Kafka-compatible cluster.

- cluster: what it reads and changes (Admin, SimpleConsumer, Producer; kazoo read-only), one page at a time:
  topics, messages and searches, consumer and share groups (a share-partition's in-flight records read from
  __share_group_state), ACLs, SCRAM users, broker settings, quotas;
- render: how records, settings and pages are shown, which records a search reads (pure functions);
- rates: produce/fetch rates from the brokers' Prometheus metrics, every group's lag over time (sampled), and the
  share-partitions' in-flight records by state (scraped when a share group's page is read);
- app: the Starlette app, Jinja2 templates and htmx/uPlot (vendored in static/);
- server: uvicorn on 127.0.0.1 by default. docs/console.md is the user's guide.
"""

from odradek.console.server import Console, ConsoleSettings

__all__ = ["Console", "ConsoleSettings"]
