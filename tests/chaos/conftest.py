"""The chaos tests' cluster: three brokers behind fault proxies (workload.ProxiedCluster), one per module, under its
own chroot of the session's ZooKeeper."""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.conftest import python_defects

from .workload import ProxiedCluster


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    chroot = f"/chaos-{uuid.uuid4().hex[:8]}"
    with ProxiedCluster(3, zookeeper=odradek_zookeeper.connect + chroot,
                        data_dir=tmp_path_factory.mktemp("chaos")) as c:
        yield c
    assert not python_defects(c)
