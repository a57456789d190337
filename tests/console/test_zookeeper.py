"""The console against a cluster (zookeeper.connect under a chroot of the session's ZooKeeper), in a browser: the
ZooKeeper page opens the registries as a tree, read-only, with each znode's data; the overview shows a broker that
holds replicas but has stopped as down."""

from __future__ import annotations

import json
import uuid

import pytest

from odradek.client import Admin
from odradek.embedded import BrokerProcess
from tests.console.conftest import screenshot, start_console_broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def chroot(odradek_zookeeper) -> str:
    return f"{odradek_zookeeper.connect}/console-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cluster_console(chroot, tmp_path_factory):
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


def broker_row(page, index: int) -> list[str]:
    return [cell.strip() for cell in page.locator("#brokers tbody tr").nth(index).locator("td").all_text_contents()]


def test_overview_shows_a_stopped_broker_as_down(cluster_console, chroot, tmp_path, topic_name, page):
    second = BrokerProcess(tmp_path / "broker-2", settings={"zookeeper.connect": chroot, "broker.id": 2})
    second.start()
    try:
        Admin(cluster_console.bootstrap_servers).create_topic(topic_name, 2, 2)
        page.goto(cluster_console.url)
        assert broker_row(page, 1) == ["2", second.bootstrap_servers, "", "", "up"]
    finally:
        second.stop()
    page.wait_for_function("document.querySelector('#brokers').innerText.includes('down')", timeout=30_000)
    assert broker_row(page, 1) == ["2", "", "", "", "down"]
    screenshot(page, "overview-cluster")
