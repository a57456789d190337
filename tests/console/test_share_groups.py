"""Share groups (KIP-932) on the console, in a real browser against a real broker process with two real share
consumers (confluent-kafka's ShareConsumer) holding records: the groups page lists the share group with its state
and members; its page shows the members (client id, host, the partition they share) and, per share-partition, the
start offset, log end and lag after some records are accepted, the in-flight records by state (from the broker's
metrics) and the window's records with their delivery counts (a released record delivered again counts 2). Once the
consumers have left, the start offset is reset with a dry run first, and the group is deleted. With ACLs on, the
window takes READ on __share_group_state, and the page says so without it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AclOperation, AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from odradek.client import Admin
from odradek.client.share_groups import (alter_share_group_offsets, describe_share_groups, list_share_groups,
                                         share_group_offsets)
from odradek.console.cluster import KEY_SCAN_CHUNK, InFlightRange, in_flight_window
from odradek.console.rates import parse_share_records
from odradek.coordinator.share_state import SNAPSHOT_TYPE, UPDATE_TYPE, ShareStateRecord, state_partition_for
from odradek.embedded import wait_until
from tests.console.conftest import http_get, screenshot, start_console_broker
from tests.console.test_secured import READ_GROUP, acl, alice_console  # noqa: F401 (a fixture)
from tests.security.test_acls_sasl import sasl_broker  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(120)

SETTINGS = {"group.share.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 6000,
            "group.share.record.lock.duration.ms": 60_000, "share.coordinator.state.topic.num.partitions": 5}
CLIENT_IDS = ("console-share-first", "console-share-second")


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    served = start_console_broker(tmp_path_factory.mktemp("console-share") / "data", **SETTINGS)
    yield served
    served.broker.stop()


def start_at_earliest(bootstrap: str, group: str) -> None:
    """The group's share-partitions start at the log start (Kafka's default is its end)."""
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.incremental_alter_configs([change])[change].result(30)


def poll(share: ShareConsumer, wanted, seconds: float = 30) -> list:
    """Poll until `wanted(records so far)`; the records."""
    got: list = []
    deadline = time.monotonic() + seconds
    while not wanted(got) and time.monotonic() < deadline:
        got.extend(m for m in share.poll(0.5) if m.error() is None)
    assert wanted(got), [(m.offset(), m.delivery_count()) for m in got]
    return got


def cells(page, row: str) -> dict[str, str]:
    return {name: page.text_content(f"{row} td.{name}") for name in
            ("start", "lag", "available", "acquired", "acknowledged", "archived")}


def test_share_group_members_lag_in_flight_records_reset_and_delete(console, page, topic_name):
    group = f"share-{topic_name}"
    admin = Admin(console.bootstrap_servers)
    admin.create_topic(topic_name, 1)
    start_at_earliest(console.bootstrap_servers, group)
    producer = Producer({"bootstrap.servers": console.bootstrap_servers})
    for index in range(10):
        producer.produce(topic_name, f"job-{index}".encode())
    assert producer.flush(30) == 0

    first, second = (ShareConsumer({"bootstrap.servers": console.bootstrap_servers, "group.id": group,
                                    "client.id": client_id, "share.acknowledgement.mode": "explicit"})
                     for client_id in CLIENT_IDS)
    try:
        first.subscribe([topic_name])
        got = poll(first, lambda got: len(got) == 10)
        assert [m.offset() for m in got] == list(range(10))
        for m in got[:4]:
            first.acknowledge(m)  # accepted: done, the start offset moves past them
        first.acknowledge(got[4], AcknowledgeType.RELEASE)  # available again; 5-9 stay held by the first member
        first.commit_sync(10)
        second.subscribe([topic_name])  # a second member shares the partition and gets the released record
        again = poll(second, lambda got: any(m.offset() == 4 for m in got))
        assert [(m.offset(), m.delivery_count()) for m in again] == [(4, 2)]
        # both members heartbeat the group's new epoch (the first one's background thread, as it does not poll)
        assert wait_until(lambda: describe_share_groups(admin, [group])[0].state == "Stable", 30, interval=0.5)

        page.goto(console.url + "groups")
        row = f"#share-groups tr[data-group='{group}']"
        assert page.text_content(f"{row} td.state") == "stable"
        assert page.text_content(f"{row} td.members") == "2"
        page.click(f"{row} a")
        page.wait_for_url(f"**/share-groups/{group}")
        members = page.locator("#members tbody tr")
        assert sorted(members.locator("td.client").all_text_contents()) == sorted(CLIENT_IDS)
        assert members.locator("td.assigned").all_text_contents() == [f"{topic_name}:0"] * 2  # both share it
        assert all("127.0.0.1" in text for text in members.all_text_contents())
        # 4 of 10 accepted: the 6 from offset 4 are held by the two members (acquired), the lag is theirs
        partition = f"#share-partitions tr[data-partition='{topic_name}:0']"
        assert cells(page, partition) == {"start": "4", "lag": "6", "available": "0", "acquired": "6",
                                          "acknowledged": "0", "archived": "0"}
        assert page.text_content("#total-lag") == "6"
        # the window with delivery counts: offset 4 delivered twice (released, then acquired again), 5-9 once
        window = [(r.locator("td").nth(2).text_content(), r.locator("td.deliveries").text_content())
                  for r in page.locator("#in-flight tbody tr").all()]
        assert window == [("4", "2"), ("5–9", "1")]
        assert page.locator("#reset").count() == 0 and "only while it has no members" in page.text_content(
            "#reset-refused")
        screenshot(page, "share-group")
    finally:
        first.close()
        second.close()

    # the members left: the records they held are available again, and the group may be reset and deleted
    # the open page refreshes its numbers every 5 s: the group turns empty there without a reload
    page.wait_for_function("document.querySelector('#group-state').textContent === 'empty'", timeout=30_000)
    page.goto(console.url + f"share-groups/{group}")  # the reset form is offered on a page of an empty group
    assert cells(page, f"#share-partitions tr[data-partition='{topic_name}:0']")["available"] == "6"
    page.select_option("#reset select[name=target]", "earliest")
    page.click("#reset button")
    assert page.text_content("#reset-plan caption") == "Dry run: nothing changed yet"
    assert page.text_content("#reset-plan tbody td:nth-child(3)") == "0"
    assert [o.start_offset for o in share_group_offsets(admin, group)] == [4]  # nothing changed yet
    page.click("text=Apply these offsets")
    assert page.text_content("#reset-plan caption") == "Applied"
    assert [o.start_offset for o in share_group_offsets(admin, group)] == [0]
    assert page.text_content(f"#share-partitions tr[data-partition='{topic_name}:0'] td.lag") == "10"
    page.click("text=Delete this share group")
    page.click(f"text=Delete share group {group}")
    page.wait_for_url("**/groups?notice=*")
    assert group not in [g for g, _ in list_share_groups(admin)]
    assert f"Deleted share group {group}." in page.text_content(".notice")
    screenshot(page, "share-groups")


def test_a_window_behind_other_state_records_and_a_group_of_many_partitions(console, topic_name):
    """The window is found where other share-partitions' records pushed it more than a chunk back in the state
    topic's partition; a group's partitions are shown 100 a page."""
    admin = Admin(console.bootstrap_servers)
    held, many = f"held-{topic_name}", f"many-{topic_name}"
    admin.create_topic(held, 1)
    admin.create_topic(many, 120)
    producer = Producer({"bootstrap.servers": console.bootstrap_servers})
    for index in range(3):
        producer.produce(held, f"job-{index}".encode())
    assert producer.flush(30) == 0
    alter_share_group_offsets(admin, held, {(held, 0): 0})
    share = ShareConsumer({"bootstrap.servers": console.bootstrap_servers, "group.id": held,
                           "share.acknowledgement.mode": "explicit"})
    try:
        share.subscribe([held])
        assert [m.offset() for m in poll(share, lambda got: len(got) == 3)] == [0, 1, 2]  # held, not acknowledged
        # another group's share-partitions write their state after it, into the same state partition among others
        alter_share_group_offsets(admin, many, {(many, index): 0 for index in range(120)})
        state_partitions = SETTINGS["share.coordinator.state.topic.num.partitions"]
        (held_offset,) = share_group_offsets(admin, held)
        behind = state_partition_for(held, held_offset.topic_id, 0, state_partitions)
        sharing = sum(1 for o in share_group_offsets(admin, many)
                      if state_partition_for(many, o.topic_id, o.partition, state_partitions) == behind)
        for _ in range(KEY_SCAN_CHUNK // sharing + 1):  # more than a chunk of records after the held group's
            alter_share_group_offsets(admin, many, {(many, index): 0 for index in range(120)})
        status, body = http_get(console.url + f"share-groups/{held}")
        assert status == 200 and "<td>0–2</td>" in body and '<td class="deliveries">1</td>' in body, body
    finally:
        share.close()
    started = time.monotonic()
    status, first = http_get(console.url + f"share-groups/{many}")
    took = time.monotonic() - started
    assert status == 200 and first.count('<tr data-partition="') == 100 and "page 1 of 2 (120)" in first
    status, second = http_get(console.url + f"share-groups/{many}?page=2")
    assert status == 200 and second.count('<tr data-partition="') == 20 and f"{many}:119" in second
    assert took < 10, f"a page of 100 share-partitions took {took:.1f} s"


def test_an_unknown_share_group_answers_404(console):
    status, body = http_get(console.url + "share-groups/no-such-share-group")
    assert status == 404 and "GROUP_ID_NOT_FOUND" in body


def test_in_flight_records_need_read_on_the_state_topic(sasl_broker, alice_console, topic_name):  # noqa: F811
    """With ACLs on, a principal that may describe the group and its topic sees its members and offsets; the
    in-flight window is read from __share_group_state, which takes READ on that topic (and DESCRIBE on the console's
    read group): without it the page says the broker's refusal in the window's place."""
    group = f"secured-{topic_name}"
    config = sasl_broker.client_config("admin")
    admin = Admin(config.pop("bootstrap.servers"), config=config)
    admin.create_topic(topic_name, 1)
    producer = Producer(sasl_broker.client_config("admin"))
    for index in range(3):
        producer.produce(topic_name, f"job-{index}".encode())
    assert producer.flush(30) == 0
    alter_share_group_offsets(admin, group, {(topic_name, 0): 0})  # makes the group, starting at the log start
    share = ShareConsumer({**sasl_broker.client_config("admin"), "group.id": group,
                           "share.acknowledgement.mode": "explicit"})
    try:
        share.subscribe([topic_name])
        got = poll(share, lambda got: len(got) == 3)
        share.acknowledge(got[0])  # offset 0 accepted; 1 and 2 held
        share.commit_sync(10)
        admin.create_acls([acl("User:alice", ResourceType.GROUP, group, AclOperation.DESCRIBE),
                           acl("User:alice", ResourceType.TOPIC, topic_name, AclOperation.DESCRIBE)])
        status, body = http_get(alice_console.url + f"share-groups/{group}")
        assert status == 200, body
        assert '<td class="start">1</td>' in body and '<td class="lag">2</td>' in body
        assert 'id="in-flight-refused"' in body and "AUTHORIZATION_FAILED" in body
        assert "--metrics-url" in body  # a console without metrics: no records by state
        admin.create_acls([acl("User:alice", ResourceType.TOPIC, "__share_group_state", AclOperation.READ),
                           acl("User:alice", ResourceType.GROUP, READ_GROUP, AclOperation.DESCRIBE)])
        status, body = http_get(alice_console.url + f"share-groups/{group}")
        assert status == 200 and 'id="in-flight-refused"' not in body, body
        assert '<td>1–2</td>' in body and '<td class="deliveries">1</td>' in body
    finally:
        share.close()


def test_a_window_is_its_snapshot_with_the_later_updates_applied():
    """Kafka's share coordinator writes ShareUpdate records between snapshots (Odradek only snapshots): an update
    replaces the state and delivery count of the records it covers and may move the start offset on."""
    key = ("g", None, 0)
    snapshot = ShareStateRecord(key, SNAPSHOT_TYPE, 10, [(10, 14, 0, 1), (15, 15, 2, 1)], 3, False)
    update = ShareStateRecord(key, UPDATE_TYPE, 12, [(12, 12, 4, 5), (16, 17, 0, 1)], 4, False)
    assert in_flight_window(snapshot, []) == [InFlightRange(10, 14, "available", 1),
                                              InFlightRange(15, 15, "acknowledged", 1)]
    assert in_flight_window(snapshot, [update]) == [
        InFlightRange(12, 12, "archived", 5), InFlightRange(13, 14, "available", 1),
        InFlightRange(15, 15, "acknowledged", 1), InFlightRange(16, 17, "available", 1)]


def test_in_flight_records_by_state_from_a_scrape():
    text = """# TYPE odradek_share_partition_records gauge
odradek_share_partition_records{group="g",partition="0",state="acquired",topic="jobs"} 6.0
odradek_share_partition_records{group="g",partition="0",state="available",topic="jobs"} 2.0
odradek_share_partition_records{group="h",partition="3",state="archived",topic="jobs"} 1.0
# TYPE odradek_share_partition_lag gauge
odradek_share_partition_lag{group="g",partition="0",topic="jobs"} 8.0
"""
    assert parse_share_records(text) == {("g", "jobs", 0): {"acquired": 6, "available": 2},
                                         ("h", "jobs", 3): {"archived": 1}}
