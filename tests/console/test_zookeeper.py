"""The console against a cluster (zookeeper.connect under a chroot of the session's ZooKeeper), in a browser: the
ZooKeeper page opens the registries as a tree, read-only, with each znode's data; while a broker of the cluster is
down every page answers at once from Metadata, the overview shows that broker down with the partitions it leaves
under-replicated or offline, and the topic and group pages mark the offline partition."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from odradek.client import Admin
from odradek.embedded import BrokerProcess, wait_until
from tests.console.conftest import screenshot, start_console_broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def chroot(odradek_zookeeper) -> str:
    return f"{odradek_zookeeper.connect}/console-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cluster_console(chroot, tmp_path_factory):
    served = start_console_broker(tmp_path_factory.mktemp("console-zk") / "data",
                                  **{"zookeeper.connect": chroot, "offsets.topic.replication.factor": 1})
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


def timed_goto(page, url: str) -> float:
    started = time.perf_counter()
    page.goto(url)
    return time.perf_counter() - started


def test_a_stopped_broker_costs_no_wait_and_shows_what_it_leaves(cluster_console, chroot, tmp_path, topic_name,
                                                                  page):
    admin = Admin(cluster_console.bootstrap_servers)
    group_id = f"group-{topic_name}"
    early, replicated, solo = f"{topic_name}-early", f"{topic_name}-rf2", f"{topic_name}-rf1"
    admin.create_topic(early, 1)
    admin.set_group_offsets(group_id, {(early, 0): 0})  # the group's coordinator is on broker 1, alone so far
    second = BrokerProcess(tmp_path / "broker-2", settings={"zookeeper.connect": chroot, "broker.id": 2})
    second.start()
    try:
        admin.create_topic(replicated, 2, 2)
        admin.create_topic(solo, 2, 1)  # one partition on each broker
        admin.set_group_offsets(group_id, {(solo, 0): 0, (solo, 1): 0, (replicated, 0): 0, (replicated, 1): 0})
        page.goto(cluster_console.url)
        assert broker_row(page, 1) == ["2", second.bootstrap_servers, "", "", "up"]
    finally:
        second.stop()
    page.wait_for_function("document.querySelector('#brokers').innerText.includes('down')", timeout=30_000)
    assert broker_row(page, 1) == ["2", "", "", "", "down"]
    [lost] = [p.partition for p in admin.topic_layouts()[solo] if p.replicas == [2]]
    assert wait_until(lambda: all(p.leader == 1 for p in admin.topic_layouts()[replicated]), 30)

    # every page answers from Metadata at once: nothing waits out the console's 15 s client timeout on broker 2
    waits = {"overview": timed_goto(page, cluster_console.url)}
    assert page.text_content(f"#affected tr[data-partition='{solo}-{lost}'] td:last-child") == "offline"
    assert page.text_content(f"#affected tr[data-partition='{solo}-{lost}'] td:nth-child(6)") == "2"
    for index in (0, 1):
        assert page.text_content(f"#affected tr[data-partition='{replicated}-{index}'] td:last-child") == \
            "under-replicated"
    screenshot(page, "overview-cluster")
    waits["topics"] = timed_goto(page, cluster_console.url + f"topics?q={topic_name}")
    waits["topic"] = timed_goto(page, cluster_console.url + f"topics/{solo}")
    assert page.locator("#partitions td.offline").count() == 1
    waits["group list"] = timed_goto(page, cluster_console.url + "groups")
    waits["group"] = timed_goto(page, cluster_console.url + f"groups/{group_id}")
    assert page.locator("#offsets td.offline").count() == 1
    waits["messages"] = timed_goto(page, cluster_console.url + f"topics/{replicated}/messages")
    waits["search"] = timed_goto(page, cluster_console.url + f"topics/{solo}/messages?search=x")
    with page.expect_console_message(lambda message: "400" in message.text):
        waits["offline partition"] = timed_goto(page, cluster_console.url + f"topics/{solo}/messages?partition={lost}")
    page.console_errors.clear()
    assert "is offline" in page.text_content(".error")
    # a page that asked the down broker would take at least the 15 s client timeout however fast the machine is;
    # the bound sits below that floor, far above what a page takes (well under a second unloaded)
    assert all(seconds < 12 for seconds in waits.values()), waits
