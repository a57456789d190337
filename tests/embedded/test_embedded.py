"""The embedded broker and the pytest plugin, from a user's point of view."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import odradek
from odradek.client import Producer, SimpleConsumer


def test_importing_odradek_loads_nothing_heavy():
    """`import odradek` adds no module of ours, of confluent_kafka or of asyncio to what the interpreter started with
    (the installed odradek-spark.pth loads odradek.spark.worker_python, a few milliseconds, at every start)."""
    script = ("import sys; before = set(sys.modules); import odradek; print(sorted(m for m in set(sys.modules) - before"
              " if m.startswith(('odradek.', 'confluent_kafka', 'asyncio'))))")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_in_process_broker_starts_fast_and_serves_clients():
    started = time.perf_counter()
    with odradek.Broker() as broker:
        assert time.perf_counter() - started < 1.0
        host, port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        with Producer(broker.bootstrap_servers) as producer:
            producer.send_sync("greetings", "hello", "k")
        with SimpleConsumer(broker.bootstrap_servers, "greetings") as consumer:
            assert [(m.key, m.value) for m in consumer.fetch(0)] == [(b"k", b"hello")]
        data_dir = broker.data_dir
        assert data_dir.exists()
    assert not data_dir.exists()  # the temporary data directory is removed


def test_restart_keeps_port_and_data_in_a_given_directory(tmp_path):
    with odradek.Broker(data_dir=tmp_path / "data") as broker:
        address = broker.bootstrap_servers
        with Producer(address) as producer:
            producer.send_sync("kept", "before restart")
        broker.restart()
        assert broker.bootstrap_servers == address
        with SimpleConsumer(address, "kept") as consumer:
            assert [m.value for m in consumer.fetch(0)] == [b"before restart"]
    assert (tmp_path / "data").exists()


def test_broker_in_a_child_process():
    with odradek.Broker(process=True, settings={"num.partitions": 3}) as broker:
        assert broker.runner.process.poll() is None
        with Producer(broker.bootstrap_servers) as producer:
            assert producer.partition_count("auto-created") == 3


def test_pytest_fixture_in_a_users_suite(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        from confluent_kafka import Consumer, Producer

        def test_round_trip(odradek_broker):
            producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
            producer.produce("orders", b"order-1")
            assert producer.flush(10) == 0
            consumer = Consumer({"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "billing",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["orders"])
            message = None
            for _ in range(50):
                message = consumer.poll(0.2)
                if message is not None:
                    break
            consumer.close()
            assert message.value() == b"order-1"

        def test_each_test_gets_a_fresh_broker(odradek_broker):
            consumer = Consumer({"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "x"})
            assert "orders" not in consumer.list_topics(timeout=5).topics
            consumer.close()
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                          str(tmp_path / "test_user.py")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
    setups = [float(line.split("s")[0]) for line in run.stdout.splitlines() if " setup " in line]
    # a broker per test, each ready in seconds at most even on a loaded machine (bench/ measures how fast: its
    # ready time beside Kafka's); the first setup also pays the plugin's imports
    assert setups and max(setups) < 5.0, run.stdout
