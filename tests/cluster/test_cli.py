"""The cluster's commands as a user runs them: `odradek brokers list` (asking a broker, or ZooKeeper), `odradek zk
ls|get`, and `odradek cluster up` from start to Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from types import SimpleNamespace

from tests.cli.run import odradek

from .conftest import metadata_of


def brokers_table(output: str) -> list[list[str]]:
    """The rows of `odradek brokers list`, each split into ID, HOST, PORT, RACK[, CONTROLLER]."""
    return [line.split() for line in output.splitlines()[2:]]


def test_brokers_list_asks_a_broker_or_reads_zookeeper(cluster, zk):
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    expected = [[str(b.node_id), "127.0.0.1", str(b.port), "-"] + (["yes"] if b.node_id == controller else [])
                for b in cluster.brokers]
    from_broker = odradek(cluster.brokers[2], "brokers", "list")
    assert from_broker.returncode == 0, from_broker.stderr
    from_zookeeper = odradek(None, "brokers", "list", "--zookeeper", cluster.zookeeper_connect)
    assert from_zookeeper.returncode == 0, from_zookeeper.stderr
    cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    for result in (from_broker, from_zookeeper):
        assert result.stdout.splitlines()[0] == f"cluster id {cluster_id}, controller {controller}"
        assert brokers_table(result.stdout) == expected


def test_zk_ls_and_get_read_the_registry(cluster, zk):
    listing = odradek(None, "zk", "ls", "/brokers/ids", "--zookeeper", cluster.zookeeper_connect)
    assert listing.stdout.splitlines() == ["1", "2", "3"]
    got = odradek(None, "zk", "get", "/cluster/id", "--zookeeper", cluster.zookeeper_connect)
    assert json.loads(got.stdout) == json.loads(zk.get("/cluster/id")[0])
    missing = odradek(None, "zk", "get", "/no/such/znode", "--zookeeper", cluster.zookeeper_connect)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"odradek: no znode /no/such/znode in ZooKeeper {cluster.zookeeper_connect}"


def test_cluster_up_runs_zookeeper_and_brokers_until_ctrl_c(odradek_zookeeper, tmp_path):
    """(odradek_zookeeper only for its skip where no ZooKeeper can run: `cluster up` starts its own.)"""
    up = subprocess.Popen([sys.executable, "-m", "odradek", "cluster", "up", "--brokers", "2", "--data-dir",
                           str(tmp_path), "--set", "broker.rack=rack-a"], stdout=subprocess.PIPE, text=True)
    try:
        printed = []
        while not printed or not printed[-1].startswith("Ctrl-C"):
            line = up.stdout.readline()
            assert line, f"cluster up ended early: {printed}"
            printed.append(line.strip())
        bootstrap = next(line.split("=", 1)[1] for line in printed if line.startswith("bootstrap.servers="))
        addresses = bootstrap.split(",")
        assert len(addresses) == 2 and all(f"  {a}  log " in "\n".join(printed) for a in addresses)

        first = SimpleNamespace(bootstrap_servers=addresses[0])
        assert sorted(metadata_of(first).brokers) == [1, 2]
        listing = odradek(first, "brokers", "list")
        assert [row[3] for row in brokers_table(listing.stdout)] == ["rack-a", "rack-a"]
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0
    for address in addresses:
        host, port = address.rsplit(":", 1)
        with socket.socket() as sock:
            assert sock.connect_ex((host, int(port))) != 0, f"{address} still listening after Ctrl-C"


def serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "odradek", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_joins_with_its_zookeeper_and_broker_id_flags_and_leaves_at_once(cluster, zk, tmp_path):
    broker = serve("--zookeeper", cluster.zookeeper_connect, "--broker-id", "9", "--data-dir", str(tmp_path),
                   "--set", "broker.rack=rack-9", "--set", "advertised.listeners=PLAINTEXT://localhost:19999")
    try:
        ready = broker.stdout.readline()
        assert "broker 9 ready on" in ready, broker.stderr.read() if broker.poll() is not None else ready
        registration = json.loads(zk.get("/brokers/ids/9")[0])
        assert (registration["host"], registration["port"], registration["rack"]) == ("localhost", 19999, "rack-9")
        assert registration["endpoints"] == ["PLAINTEXT://localhost:19999"]
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(30) == 0
    assert zk.exists("/brokers/ids/9") is None  # a clean stop closes the session: no wait for its timeout
    assert "session lost" not in broker.stderr.read()  # ending its own session is no loss to warn about


def test_serve_says_when_zookeeper_cannot_be_reached(tmp_path):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    broker = serve("--zookeeper", f"127.0.0.1:{port}", "--data-dir", str(tmp_path),
                   "--set", "zookeeper.connection.timeout.ms=1000")
    assert broker.wait(30) == 1
    assert f"odradek: could not connect to ZooKeeper at 127.0.0.1:{port} within 1s" in broker.stderr.read()
