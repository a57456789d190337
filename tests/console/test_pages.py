"""The console in a real browser (headless Chromium) against a real broker with real data: each page loads with no
console error and shows what the cluster holds, and the flows a user runs work end to end: create a topic, produce
a message and see it in the browser, edit a setting, add partitions, delete with confirmation, page through a
partition, reset a group's offsets with a dry run first, delete the group."""

from __future__ import annotations

import json
import time

import confluent_kafka
import pytest

from odradek.client import Admin, Producer
from odradek.embedded import wait_until
from tests.console.conftest import http_get, screenshot

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def admin(console):
    return Admin(console.bootstrap_servers)


def refused(page, selector: str) -> None:
    """Click and expect the console to answer 400 with its error page (which Chromium logs as a console error)."""
    with page.expect_console_message(lambda message: "400" in message.text):
        page.click(selector)
    page.console_errors.clear()


def test_overview_shows_the_cluster_and_its_rates(console, admin, page, topic_name):
    admin.create_topic(topic_name, 2)
    page.goto(console.url)
    cluster = admin.describe_cluster()
    assert page.text_content("#cluster-id") == cluster.cluster_id
    assert int(page.text_content("#topic-count")) >= 1
    broker_row = page.locator("#brokers tbody tr").first
    assert "controller" in broker_row.text_content() and "up" in broker_row.text_content()
    # the sampler scrapes every 5 s and the chart has a point per scrape after the first: records produced once it
    # has one show in a later point (produced before the console's first scrape, they would be in no rate)
    page.wait_for_function("Number(document.querySelector('#rates-chart').dataset.points || 0) >= 1",
                           timeout=30_000)
    with Producer(console.bootstrap_servers) as producer:
        for index in range(200):
            producer.send(topic_name, f"value-{index}", key=f"key-{index}")
        producer.flush()
    assert wait_until(lambda: max(json.loads(page.evaluate("fetch('/rates.json').then(r => r.text())"))["produced"])
                      > 0, 30, interval=1)
    screenshot(page, "overview")


def test_create_topic_produce_browse_edit_and_delete(console, admin, page, topic_name):
    page.goto(console.url + "topics")
    page.click("text=Create a topic")
    page.fill("input[name=name]", topic_name)
    page.fill("input[name=partitions]", "2")
    page.fill("textarea[name=configs]", "retention.ms=3600000")
    page.click("form[action='/topics'] button")
    page.wait_for_url(f"**/topics/{topic_name}?notice=*")
    assert page.locator("#partitions tbody tr").count() == 2
    assert admin.topic_configs(topic_name) == {"retention.ms": "3600000"}
    # time and size settings in human units beside the raw value
    assert page.text_content("tr[data-config='retention.ms'] .unit") == "1 h"
    assert page.text_content("tr[data-config='segment.bytes'] .unit") == "1 GiB"
    screenshot(page, "topic")

    # produce a test message with a header, then see it browsing partition 1
    page.click("text=Browse messages")
    page.click("text=Produce a test message")
    page.fill("#produce input[name=partition]", "1")
    page.fill("#produce input[name=key]", "order-42")
    page.fill("#produce textarea[name=value]", '{"amount": 12.5, "currency": "EUR"}')
    page.fill("#produce textarea[name=headers]", "source=console")
    page.click("#produce button")
    page.wait_for_url("**/messages?partition=1*")
    row = page.locator("#messages tbody tr").first
    assert "order-42" in row.text_content() and '"amount": 12.5' in row.text_content()
    assert "source=console" in row.text_content()
    page.select_option("#browse select[name=format]", "json")
    page.click("#browse button")
    assert '"amount": 12.5,\n  "currency": "EUR"' in page.locator("#messages pre.value").first.inner_text()
    screenshot(page, "messages")
    page.select_option("#browse select[name=format]", "hex")
    page.click("#browse button")
    assert page.locator("#messages pre.value").first.inner_text().startswith("7b 22 61 6d")

    # edit a setting: the broker takes a valid one and refuses a bad one with its reason
    page.goto(console.url + f"topics/{topic_name}")
    page.fill("tr[data-config='cleanup.policy'] input[name=value]", "compact")
    page.click("tr[data-config='cleanup.policy'] button")
    page.wait_for_url("**notice=*")
    assert admin.topic_configs(topic_name)["cleanup.policy"] == "compact"
    assert "override" in page.get_attribute("tr[data-config='cleanup.policy']", "class")
    page.fill("tr[data-config='retention.ms'] input[name=value]", "not-a-number")
    refused(page, "tr[data-config='retention.ms'] button")
    assert "retention.ms" in page.text_content(".error")
    assert admin.topic_configs(topic_name)["retention.ms"] == "3600000"

    # add partitions, then delete: a wrong confirmation deletes nothing
    page.goto(console.url + f"topics/{topic_name}")
    page.fill("input[name=partitions]", "3")
    page.click("text=Add partitions")
    page.wait_for_url("**notice=*")
    assert page.locator("#partitions tbody tr").count() == 3
    page.click("text=Delete this topic")
    page.fill("input[name=confirm]", "some-other-topic")
    refused(page, "text=Delete topic and its data")
    assert "to confirm" in page.text_content(".error")
    assert topic_name in admin.list_topics()
    page.goto(console.url + f"topics/{topic_name}")
    page.click("text=Delete this topic")
    page.fill("input[name=confirm]", topic_name)
    page.click("text=Delete topic and its data")
    page.wait_for_url("**/topics?notice=*")
    assert topic_name not in admin.list_topics()


def test_topic_search_and_paging(console, admin, page, topic_name):
    names = [f"{topic_name}-{index:02d}" for index in range(55)]
    for name in names:
        admin.create_topic(name, 1)
    page.goto(console.url + "topics")
    page.fill("input[type=search]", topic_name)
    page.wait_for_selector("text=page 1 of 2 (55)")  # htmx swapped in the search's answer
    assert page.locator("#topics-table tbody tr").count() == 50
    page.fill("input[type=search]", names[54])
    page.wait_for_function("document.querySelectorAll('#topics-table tbody tr').length == 1")
    assert page.text_content("#topics-table tbody tr a") == names[54]
    screenshot(page, "topics")


def test_messages_page_through_a_partition(console, admin, page, topic_name):
    admin.create_topic(topic_name, 1)
    with Producer(console.bootstrap_servers) as producer:
        base_ms = int(time.time() * 1000) - 3_600_000
        for index in range(120):  # one record a second, an hour ago
            producer.send(topic_name, f"value-{index}", key=f"key-{index}", partition=0,
                          timestamp_ms=base_ms + index * 1000)
        producer.flush()

    def offsets() -> list[int]:
        return [int(cell) for cell in page.locator("#messages tr.record td:first-child").all_text_contents()]

    page.goto(console.url + f"topics/{topic_name}/messages")
    assert offsets() == list(range(119, 69, -1))  # newest first, one page of 50
    page.click("a[rel=next]")
    assert offsets() == list(range(69, 19, -1))
    page.click("a[rel=next]")
    assert offsets() == list(range(19, -1, -1)) and page.locator("a[rel=next]").count() == 0
    page.goto(console.url + f"topics/{topic_name}/messages?order=oldest&offset=10")
    assert offsets() == list(range(10, 60))
    page.goto(console.url + f"topics/{topic_name}/messages?key=key-11")  # key-11, key-110 ... key-119
    assert offsets() == [119, 118, 117, 116, 115, 114, 113, 112, 111, 110, 11]
    page.goto(console.url + f"topics/{topic_name}/messages?order=oldest&time={base_ms + 100_500}")
    assert offsets() == list(range(101, 120))
    page.goto(console.url + f"topics/{topic_name}/messages?order=newest&time={base_ms + 100_500}")
    assert offsets() == list(range(100, 50, -1))
    page.goto(console.url + f"topics/{topic_name}/messages?order=oldest&time={base_ms + 200_000}")  # none so recent
    assert offsets() == [] and "No records here." in page.text_content("#messages")


def test_search_all_partitions_with_a_bound_and_export_as_json(console, admin, page, topic_name):
    admin.create_topic(topic_name, 3)
    with Producer(console.bootstrap_servers) as producer:
        for index in range(60):
            status = "paid" if index % 10 == 0 else "open"
            producer.send(topic_name, json.dumps({"order": index, "status": status}), key=f"customer-{index % 7}",
                          partition=index % 3, headers=[("source", "web" if index % 2 else "app")])
        producer.flush()

    def search(text: str, field: str, match: str = "contains", limit: int = 10_000) -> list[tuple[int, int]]:
        page.goto(console.url + f"topics/{topic_name}/messages")
        page.fill("#search input[name=search]", text)
        page.select_option("#search select[name=in]", field)
        page.select_option("#search select[name=match]", match)
        page.fill("#search input[name=limit]", str(limit))
        page.click("#search button")
        page.wait_for_selector("#search-summary")
        rows = page.locator("#messages tr.record")
        return [(int(rows.nth(i).locator("td.partition").text_content()),
                 int(rows.nth(i).locator("td").first.text_content())) for i in range(rows.count())]

    # index i is at partition i % 3, offset i // 3
    assert sorted(search("customer-1", "key", "exact")) == sorted((i % 3, i // 3) for i in range(1, 60, 7))
    assert page.locator("#search-bound").count() == 0  # it looked through all 60
    assert len(search("customer", "key")) == 50 and "60 match(es)" in page.text_content("#search-summary")
    assert len(search("source=web", "header", "exact")) == 30

    # a bound of 12 records: the newest 4 of each partition, and the page says the bound stopped it
    bounded = search("status", "value", limit=12)
    assert sorted(bounded) == sorted((p, offset) for p in range(3) for offset in range(16, 20))
    assert "the newest 12 records of 60" in page.text_content("#search-bound")
    screenshot(page, "search")

    # the page's messages as JSON, in the page's order
    exported = json.loads(page.request.get(console.url + page.get_attribute("#export", "href").lstrip("/")).text())
    assert [(m["partition"], m["offset"]) for m in exported] == bounded
    first = exported[0]
    assert json.loads(first["value"])["order"] == first["offset"] * 3 + first["partition"]
    assert first["key"] == f"customer-{(first['offset'] * 3 + first['partition']) % 7}"
    assert first["headers"] == [["source", "web" if first["partition"] % 2 != first["offset"] % 2 else "app"]]


def lag_series(console, group_id: str) -> dict:
    return json.loads(http_get(console.url + f"groups/{group_id}/lag.json")[1])


def test_topic_list_shows_records_and_size_and_group_list_lag_and_members(console, admin, page, topic_name):
    admin.create_topic(topic_name, 2)
    with Producer(console.bootstrap_servers) as producer:
        for index in range(30):
            producer.send(topic_name, "x" * 100, partition=index % 2)
        producer.flush()
    group_id = f"listed-{topic_name}"
    admin.set_group_offsets(group_id, {(topic_name, 0): 5, (topic_name, 1): 15})  # lag 10 + 0
    row = f"#topics-table tr:has(a:text-is('{topic_name}'))"
    page.goto(console.url + f"topics?q={topic_name}")
    assert page.text_content(f"{row} td.records") == "30"
    # the size comes from the brokers' metrics, scraped every 5 s: a later scrape has the records
    assert wait_until(lambda: page.reload() or page.text_content(f"{row} td.size").endswith("KiB"), 30, interval=2)
    page.goto(console.url + "groups")
    group_row = f"#groups tr[data-group='{group_id}']"
    assert page.text_content(f"{group_row} td.lag") == "10" and page.text_content(f"{group_row} td.members") == "0"


def test_group_lag_reset_with_dry_run_and_delete(console, admin, page, topic_name):
    group_id = f"group-{topic_name}"
    admin.create_topic(topic_name, 2)
    with Producer(console.bootstrap_servers) as producer:
        for index in range(40):
            producer.send(topic_name, f"value-{index}", partition=index % 2)
        producer.flush()
    admin.set_group_offsets(group_id, {(topic_name, 0): 5, (topic_name, 1): 20})  # lag 15 + 0
    # the console samples every group's lag from its start: the chart has points before anyone opens the page
    assert wait_until(lambda: 15 in lag_series(console, group_id)["lag"], 30, interval=1)
    page.goto(console.url + "groups")
    page.click(f"text={group_id}")
    assert page.text_content("#total-lag") == "15"
    page.wait_for_function("Number(document.querySelector('#lag-chart').dataset.points || 0) >= 1")
    assert page.locator("#offsets tbody tr").count() == 2

    page.fill("#reset input[name=topics]", topic_name)
    page.select_option("#reset select[name=target]", "earliest")
    page.click("#reset button")
    assert "Dry run" in page.text_content("#reset-plan caption")
    assert page.locator("#reset-plan tbody tr").all_text_contents() == [f"{topic_name}00", f"{topic_name}10"]
    assert admin.committed_offsets(group_id) == {(topic_name, 0): 5, (topic_name, 1): 20}  # nothing changed yet
    page.wait_for_function("Number(document.querySelector('#lag-chart').dataset.points || 0) >= 1")
    screenshot(page, "group")
    page.click("text=Apply these offsets")
    assert "Applied" in page.text_content("#reset-plan caption")
    assert admin.committed_offsets(group_id) == {(topic_name, 0): 0, (topic_name, 1): 0}
    assert page.text_content("#total-lag") == "40"

    page.click("text=Delete this group")
    page.click(f"text=Delete group {group_id}")
    page.wait_for_url("**/groups?notice=*")
    assert group_id not in [group for group, _ in admin.list_groups()]
    screenshot(page, "groups")


def test_group_members_and_assignment(console, admin, page, topic_name):
    group_id = f"members-{topic_name}"
    admin.create_topic(topic_name, 2)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": console.bootstrap_servers, "group.id": group_id,
                                         "client.id": "console-test-client", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        page.goto(console.url + f"groups/{group_id}")
        assert "console-test-client" in page.text_content("#members")
        assert page.text_content("#group-state") == "stable"
        # Kafka refuses to reset or delete a group with active members: the page offers neither and says why
        assert "only while it has no active members" in page.text_content("#reset-refused")
        assert page.locator("#reset").count() == 0 and page.locator("text=Delete this group").count() == 0
        page.goto(console.url + "groups")
        assert page.text_content(f"#groups tr[data-group='{group_id}'] td.members") == "1"
    finally:
        consumer.close()


def test_quotas_page_sets_refuses_and_removes_a_quota(console, admin, page, topic_name):
    user = f"quota-{topic_name[-8:]}"

    def set_quota(entity_type: str, name: str, key: str, value: str) -> None:
        page.goto(console.url + "quotas")
        page.select_option("#set-quota select[name=entity_type]", entity_type)
        page.fill("#set-quota input[name=entity_name]", name)
        page.select_option("#set-quota select[name=key]", key)
        page.fill("#set-quota input[name=value]", value)

    set_quota("user", user, "producer_byte_rate", "1048576")
    page.click("#set-quota button")
    page.wait_for_url("**/quotas?notice=*")
    row = f"#quotas tr[data-entity='user={user}'][data-key='producer_byte_rate']"
    assert page.text_content(f"{row} .unit") == "1 MiB/s"
    assert ((("user", user),), {"producer_byte_rate": 1048576.0}) in admin.describe_client_quotas()
    screenshot(page, "quotas")
    # connection_creation_rate is an IP's quota, not a user's: the broker refuses, and the page shows its reason
    set_quota("user", user, "connection_creation_rate", "10")
    refused(page, "#set-quota button")
    assert "connection_creation_rate" in page.text_content(".error")
    page.goto(console.url + "quotas")
    page.click(f"{row} button")
    page.wait_for_url("**/quotas?notice=*")
    assert page.locator(row).count() == 0 and all(entity != (("user", user),)
                                                  for entity, _ in admin.describe_client_quotas())
