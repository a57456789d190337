"""The Prometheus endpoint of a broker process (`--set metrics.port=...`), scraped after real traffic."""

from __future__ import annotations

import time
import urllib.request

from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek.client import Admin, ConsumerConnector, Producer
from odradek.embedded import BrokerProcess, free_port  # the one free-port probe
from tests.broker.raw_client import RawClient
from tests.broker.test_many_partitions import fetch_values


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_after_produce_consume_and_commit(tmp_path):
    port = free_port()
    settings = {"metrics.port": port, "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1}
    with BrokerProcess(tmp_path / "data", settings=settings) as broker:
        Admin(broker.bootstrap_servers).create_topic("metered", 2)
        with Producer(broker.bootstrap_servers) as producer:
            for i in range(100):
                producer.send("metered", "x" * 50, f"key-{i}")
        connector = ConsumerConnector(broker.bootstrap_servers, "metered-group", consumer_timeout_ms=1500)
        [stream] = connector.create_message_streams({"metered": 1})["metered"]
        for count, _ in enumerate(stream, 1):
            if count == 60:
                break
        connector.commit_offsets()
        connector.shutdown()
        time.sleep(0.2)
        metrics = scrape(port)

    topic = frozenset({("topic", "metered")})
    assert metrics[("odradek_topic_messages_in_total", topic)] == 100
    assert metrics[("odradek_topic_bytes_in_total", topic)] > 100 * 50
    assert metrics[("odradek_topic_messages_out_total", topic)] >= 60
    assert metrics[("odradek_topic_bytes_out_total", topic)] > 60 * 50
    log_sizes = [value for (name, labels), value in metrics.items()
                 if name == "odradek_log_size_bytes" and ("topic", "metered") in labels]
    assert len(log_sizes) == 2 and sum(log_sizes) == metrics[("odradek_topic_bytes_in_total", topic)]
    lag = sum(value for (name, labels), value in metrics.items()
              if name == "odradek_consumer_group_lag" and ("group", "metered-group") in labels)
    assert lag == 40
    assert metrics[("odradek_requests_total", frozenset({("api", "Produce")}))] >= 1
    assert metrics[("odradek_request_latency_seconds_count", frozenset({("api", "Fetch")}))] >= 1
    assert ("odradek_connections", frozenset()) in metrics
    assert ("odradek_log_cleaner_dead_thread_count", frozenset()) in metrics
    assert "created topic metered" in broker.log_tail(200)


def test_metrics_are_off_by_default(broker):
    assert "metrics on" not in broker.log_tail(200)


def test_fetches_of_a_thousand_partitions_bring_no_full_collections(tmp_path):
    """`odradek serve` collects its young objects every 50,000 allocations (cli/main.py): a hundred Fetches of 1,000
    partitions bring at most one full collection of the broker's objects (20-38 ms each at this size), where Python's
    default of 700 brought one every 16 or so. The broker's Prometheus endpoint shows the collector's counts."""
    port = free_port()
    with BrokerProcess(tmp_path / "data", settings={"metrics.port": port}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        names = [f"wide-{number}" for number in range(10)]
        for created in admin.create_topics([NewTopic(name, 100, 1) for name in names]).values():
            created.result(60)
        partitions = [(name, index) for name in names for index in range(100)]
        client = RawClient(broker.port)
        full_collections = ("python_gc_collections_total", frozenset({("generation", "2")}))
        before = scrape(port)
        for _ in range(100):
            assert len(fetch_values(client, partitions)) == 1000
        after = scrape(port)
        client.close()
    assert after[full_collections] - before[full_collections] <= 1
    assert after[("process_resident_memory_bytes", frozenset())] > 0
    assert after[("process_open_fds", frozenset())] > 0
