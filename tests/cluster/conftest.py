"""The cluster tests' shared pieces: a three-broker cluster per module under its own chroot of the session's
ZooKeeper (odradek_zookeeper, from odradek's pytest plugin), a kazoo client that reads it as Kafka's tools would, and
Metadata as a client sees it."""

from __future__ import annotations

import contextlib
import re
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from odradek.cluster.metadata import PartitionAssignment
from odradek.cluster.partition import Partition
from odradek.config import LogConfig
from odradek.embedded import Cluster
from odradek.records.batch import Record, encode_batch, validate_batches
from odradek.storage.log import Log


def new_cluster(odradek_zookeeper, tmp_path_factory, name: str, brokers: int = 3,
                settings: dict | None = None) -> Cluster:
    """A cluster (not started) under a chroot of its own of the session's ZooKeeper, its data in a directory
    named after `name`."""
    chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
    return Cluster(brokers, zookeeper=odradek_zookeeper.connect + chroot, data_dir=tmp_path_factory.mktemp(name),
                   settings=settings)


# what Python itself writes to a broker's log about a defect of ours: a coroutine made and dropped, an asyncio task or
# callback whose exception nobody handled, a kazoo watch callback that raised
PYTHON_DEFECTS = re.compile("was never awaited|Task exception was never retrieved|Exception in callback|"
                            "Exception in worker queue thread")


def python_defects(cluster: Cluster) -> list[str]:
    """The lines of the brokers' logs where Python reports a defect; a fixture checks it once its cluster stopped."""
    return [f"broker {broker.node_id}: {line}" for broker in cluster.brokers if broker.log_path.exists()
            for line in broker.log_path.read_text(errors="replace").splitlines() if PYTHON_DEFECTS.search(line)]


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "cluster") as c:
        yield c
    assert not python_defects(c)


@pytest.fixture(scope="module")
def zk(cluster):
    """A kazoo client inside the cluster's chroot."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def metadata_of(broker, timeout: float = 10):
    """What confluent-kafka's list_topics gets from this one broker."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    return admin.list_topics(timeout=timeout)


@contextlib.contextmanager
def leading_partition(tmp_path, config: LogConfig | None = None):
    """A Partition that broker 1 leads with followers 2 and 3 in its ISR, holding one record neither has fetched:
    (partition, the time in ms it was made at)."""
    log = Log.open(tmp_path / "t-0", config or LogConfig(), clean_shutdown=True)
    now = int(time.time() * 1000)
    partition = Partition("t", 0, uuid.uuid4(), log, PartitionAssignment(1, 0, [1, 2, 3], [1, 2, 3]), 1)
    try:
        partition.update_assignment(partition.assignment, now)
        data = encode_batch([Record(0, now, None, b"v")])
        partition.append(data, validate_batches(data))
        yield partition, now
    finally:
        log.close()
