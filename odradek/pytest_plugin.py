"""The pytest plugin (registered as `odradek` under pytest11): a real broker, or a real cluster, for users' own test
suites.

`odradek_broker` gives each test a fresh in-process broker (odradek.embedded.Broker) with its data in the test's
tmp_path, on a free port: it starts in well under a second, with no JVM and no Docker. `odradek_zookeeper` is one
ZooKeeper server for the whole session (a JVM takes a second or two to start) and `odradek_cluster` three
`odradek serve` brokers coordinated by it, each cluster under a chroot of its own so that clusters never see each
other. The ZooKeeper tests are skipped, with the reason, where no ZooKeeper can run and we are not root (root
installs it: `make system-packages`); as root a missing ZooKeeper is an error, not a skip. Nothing is imported until
a test asks for a fixture, so the plugin costs nothing in suites that do not use it.
"""

from __future__ import annotations

import os
import uuid

import pytest


@pytest.fixture
def odradek_broker(tmp_path):
    """A running broker; use `odradek_broker.bootstrap_servers` as your clients' bootstrap.servers."""
    from odradek.embedded import Broker

    with Broker(data_dir=tmp_path / "odradek-broker") as broker:
        yield broker


@pytest.fixture(scope="session")
def odradek_zookeeper(tmp_path_factory):
    """A ZooKeeper server on a free 127.0.0.1 port for the session; `odradek_zookeeper.connect` is its address."""
    from odradek.embedded import ZOOKEEPER_CLASSPATH, ZooKeeperServer, zookeeper_available

    if not zookeeper_available() and os.geteuid() != 0:
        pytest.skip(f"no ZooKeeper server here (java and zookeeper-*.jar in {ZOOKEEPER_CLASSPATH}) and not root: "
                    "install Debian's zookeeper package (make system-packages as root) to run the cluster tests")
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def odradek_cluster(odradek_zookeeper, tmp_path):
    """Three running brokers (ids 1-3) under a fresh chroot of the session's ZooKeeper;
    `odradek_cluster.bootstrap_servers` lists them all."""
    from odradek.embedded import Cluster

    with Cluster(3, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                 data_dir=tmp_path / "odradek-cluster") as cluster:
        yield cluster
