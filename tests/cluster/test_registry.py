"""Three `odradek serve --zookeeper` brokers on a real ZooKeeper: the registry in Kafka's znode layout, the shared
cluster id, Metadata listing every live broker and the controller, and the two refusals (a taken broker id, data of
another cluster)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from .conftest import metadata_of


def test_three_brokers_register_in_kafkas_json(cluster, zk):
    assert sorted(zk.get_children("/brokers/ids"), key=int) == ["1", "2", "3"]
    for broker in cluster.brokers:
        data, stat = zk.get(f"/brokers/ids/{broker.node_id}")
        assert stat.ephemeralOwner != 0
        registration = json.loads(data)
        assert registration["version"] == 5
        assert (registration["host"], registration["port"]) == ("127.0.0.1", broker.port)
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}"]
        assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert registration["jmx_port"] == -1
        assert registration["timestamp"].isdigit()


def test_cluster_id_is_created_once_and_shared(cluster, zk):
    stored = json.loads(zk.get("/cluster/id")[0])
    assert stored["version"] == "1"
    cluster_id = stored["id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{22}", cluster_id)
    for broker in cluster.brokers:
        properties = (broker.data_dir / "meta.properties").read_text()
        assert f"cluster.id={cluster_id}\n" in properties
        assert metadata_of(broker).cluster_id == cluster_id


def test_metadata_from_every_broker_lists_all_brokers_and_the_controller(cluster, zk):
    controller = json.loads(zk.get("/controller")[0])
    assert controller["version"] == 2 and controller["kraftControllerEpoch"] == -1
    assert int(zk.get("/controller_epoch")[0]) >= 1
    for broker in cluster.brokers:
        metadata = metadata_of(broker)
        assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
            b.node_id: ("127.0.0.1", b.port) for b in cluster.brokers}
        assert metadata.controller_id == controller["brokerid"]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make test installs it)")
def test_kcat_lists_the_three_brokers_and_the_controller(cluster, zk):
    controller_id = json.loads(zk.get("/controller")[0])["brokerid"]
    listing = subprocess.run(["kcat", "-L", "-b", cluster.brokers[1].bootstrap_servers, "-m", "10"],
                             capture_output=True, text=True, timeout=30).stdout
    assert " 3 brokers:" in listing
    for broker in cluster.brokers:
        line = f"broker {broker.node_id} at 127.0.0.1:{broker.port}"
        assert line in listing
    assert f"broker {controller_id} at 127.0.0.1:{cluster.broker(controller_id).port} (controller)" in listing


def test_a_second_broker_with_a_taken_id_is_refused(cluster, zk, tmp_path):
    taken = cluster.brokers[1]
    owner = zk.get(f"/brokers/ids/{taken.node_id}")[1].ephemeralOwner
    duplicate = cluster.new_broker(taken.node_id, tmp_path / "duplicate",
                                   settings={"zookeeper.session.timeout.ms": 4000})
    with pytest.raises(RuntimeError) as refused:
        duplicate.start()
    assert (f"broker.id {taken.node_id} is already registered in ZooKeeper at /brokers/ids/{taken.node_id} by a "
            f"live broker (127.0.0.1:{taken.port}") in str(refused.value)
    assert "every broker needs its own broker.id" in str(refused.value)
    assert zk.get(f"/brokers/ids/{taken.node_id}")[1].ephemeralOwner == owner  # the first one keeps its place
    assert len(metadata_of(taken).brokers) == 3


def test_a_broker_whose_data_belongs_to_another_cluster_is_refused(cluster, zk, tmp_path):
    data_dir = tmp_path / "elsewhere"
    data_dir.mkdir()
    (data_dir / "meta.properties").write_text("version=1\ncluster.id=AnotherClusterXXXXXXXX\nnode.id=4\n")
    stranger = cluster.new_broker(4, data_dir)
    with pytest.raises(RuntimeError) as refused:
        stranger.start()
    cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    assert (f"The Cluster ID {cluster_id} doesn't match stored clusterId AnotherClusterXXXXXXXX in "
            f"{data_dir.resolve() / 'meta.properties'}. The broker is trying to join the wrong cluster") in str(
        refused.value)
    assert not zk.exists("/brokers/ids/4")


def test_a_single_node_broker_never_loads_the_zookeeper_client():
    """Without zookeeper.connect a broker is the single node it always was: kazoo is not even imported."""
    script = ("import sys; from odradek.embedded import Broker\n"
              "with Broker() as broker: print(sorted(m for m in sys.modules if m.startswith('kazoo')))")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60).stdout.strip() == "[]"


def test_the_odradek_cluster_fixture_gives_three_brokers_on_their_own_chroot(odradek_cluster, cluster):
    addresses = odradek_cluster.bootstrap_servers.split(",")
    assert len(addresses) == 3
    assert odradek_cluster.zookeeper_connect != cluster.zookeeper_connect  # same ZooKeeper, another chroot
    metadata = metadata_of(odradek_cluster.brokers[0])
    assert sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values()) == sorted(addresses)
    assert metadata.cluster_id != metadata_of(cluster.brokers[0]).cluster_id
