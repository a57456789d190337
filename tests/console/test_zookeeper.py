"""The ZooKeeper page in a browser, against a broker in cluster mode (zookeeper.connect under a chroot of the
session's ZooKeeper): the registries open as a tree, read-only, with each znode's data."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.console.conftest import screenshot, start_console_broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster_console(odradek_zookeeper, tmp_path_factory):
    chroot = f"{odradek_zookeeper.connect}/console-{uuid.uuid4().hex[:8]}"
    served = start_console_broker(tmp_path_factory.mktemp("console-zk") / "data", **{"zookeeper.connect": chroot})
    yield served
    served.broker.stop()


def test_zookeeper_tree_shows_the_registered_broker(cluster_console, page):
    page.goto(cluster_console.url)
    page.click("nav >> text=ZooKeeper")
    page.click(".tree summary:text-is('brokers')")
    page.click(".tree summary:text-is('ids')")
    page.click(".tree summary:text-is('1')")
    registration = page.locator(".znode[data-path='/brokers/ids/1'] > pre.znode-data")
    registration.wait_for()
    assert json.loads(registration.text_content())["port"] == int(cluster_console.bootstrap_servers.split(":")[1])
    screenshot(page, "zookeeper")
    # read-only: the page offers no form to change anything
    assert page.locator(".tree form, .tree button").count() == 0
