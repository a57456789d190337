"""Share groups with librdkafka's ShareConsumer (confluent-kafka 2.16) against a real broker process: implicit and
explicit acknowledgement, release and reject, delivery counts and the delivery limit, three consumers sharing one
partition, a consumer killed with SIGKILL (its records come back when their locks expire) and the broker killed
with SIGKILL mid-run (no accepted record is delivered again, none is lost), and `odradek share-groups`."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess
from odradek.client.connection import Connection
from odradek.records.batch import whole_batches
from tests.cli.run import odradek
from tests.metrics.test_metrics import free_port, scrape
from tests.share.raw_member import RawShareMember

LOCK_MS = 2000
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.share.record.lock.duration.ms": LOCK_MS,
            "group.share.delivery.count.limit": 3, "group.share.heartbeat.interval.ms": 500,
            "group.share.session.timeout.ms": 6000}


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("share") / "data",
                            settings={**SETTINGS, "metrics.port": METRICS_PORT})
    process.start()
    yield process
    process.stop()


def make_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def consumer(bootstrap: str, group: str, topic: str, **config) -> ShareConsumer:
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    share.subscribe([topic])
    return share


def start_reading(bootstrap: str, topic: str, consumers: list[ShareConsumer], explicit: bool = False) -> None:
    """A new share-partition starts at the log end (share.auto.offset.reset latest): write probes until the first
    consumer gets one, so the records the test writes next are all in its window. Probes are accepted."""
    producer = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        producer.produce(topic, b"probe")
        producer.flush(10)
        for share in consumers:
            messages = [m for m in share.poll(0.3) if m.error() is None]
            if explicit:
                for m in messages:
                    share.acknowledge(m)
            if messages:
                if explicit:
                    share.commit_sync(10)
                return
    raise AssertionError("no share consumer got a record")


def explicit(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    return consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def poll_until(share: ShareConsumer, done, timeout: float = 30.0, explicit: bool = False) -> list:
    """The records polled until `done(records)` or `timeout`; probes left from start_reading are not among them
    (`explicit`: they are acknowledged, with the next poll)."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(got):
        for m in share.poll(0.3):
            if m.error() is not None:
                continue
            if m.value() != b"probe":
                got.append(m)
            elif explicit:
                share.acknowledge(m)
    return got


def test_implicit_acknowledgement_delivers_each_record_once(share_broker, topic_name):
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name)
    share = consumer(bootstrap, "implicit-" + topic_name, topic_name)
    try:
        start_reading(bootstrap, topic_name, [share])
        values = [b"r%d" % i for i in range(200)]
        produce(bootstrap, topic_name, values)
        got = poll_until(share, lambda got: len(got) >= 200)
        assert sorted(m.value() for m in got) == sorted(values)
        assert {m.delivery_count() for m in got} == {1}
        assert poll_until(share, lambda got: False, timeout=LOCK_MS / 1000 + 1.5) == []  # none comes back
    finally:
        share.close()


def test_a_share_fetch_carries_only_the_batches_holding_its_acquired_records(share_broker, topic_name):
    """Kafka slices a share fetch's records to the acquired ones: 5 records acquired of a log of three 10-record
    batches come in the first batch alone (not every batch the read reached), 12 more in the first two."""
    make_topic(share_broker.bootstrap_servers, topic_name)
    member = RawShareMember(share_broker.port, f"{topic_name}-group", topic_name)
    try:
        member.join()
        member.fetch(0)  # the share-partition starts at the log end
        producer = Producer({"bootstrap.servers": share_broker.bootstrap_servers})
        for batch in range(3):
            for i in range(10):
                producer.produce(topic_name, f"{batch}-{i}".encode())
            assert producer.flush(10) == 0

        def answered(max_records: int):
            part = member.fetch(5000, max_records)
            return ([(r.first_offset, r.last_offset) for r in part.acquired_records],
                    [(h.base_offset, h.last_offset) for h, _ in whole_batches(part.records)])
        assert answered(5) == ([(0, 4)], [(0, 9)])
        assert answered(12) == ([(5, 16)], [(0, 9), (10, 19)])
        assert answered(100) == ([(17, 29)], [(10, 19), (20, 29)])
    finally:
        member.close()


def test_release_redelivers_reject_does_not_and_the_limit_archives(share_broker, topic_name):
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name)
    share = explicit(bootstrap, "explicit-" + topic_name, topic_name)
    try:
        start_reading(bootstrap, topic_name, [share], explicit=True)
        produce(bootstrap, topic_name, [b"accept", b"reject", b"release-once", b"poison"])
        deliveries: dict[bytes, list[int]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(deliveries.get(b"poison", [])) < 3:
            for m in share.poll(0.3):
                if m.error() is not None or m.value() == b"probe":
                    if m.error() is None:
                        share.acknowledge(m)
                    continue
                deliveries.setdefault(m.value(), []).append(m.delivery_count())
                if m.value() == b"poison" or (m.value() == b"release-once" and m.delivery_count() == 1):
                    share.acknowledge(m, AcknowledgeType.RELEASE)
                elif m.value() == b"reject":
                    share.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    share.acknowledge(m)
            share.commit_sync(10)
        assert deliveries == {b"accept": [1], b"reject": [1], b"release-once": [1, 2], b"poison": [1, 2, 3]}
        assert poll_until(share, lambda got: False, timeout=1.5, explicit=True) == []  # archived after 3 deliveries
    finally:
        share.close()


def test_three_consumers_on_one_partition_accept_disjoint_parts(share_broker, topic_name):
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name)
    group = "three-" + topic_name
    shares = [consumer(bootstrap, group, topic_name, **{"max.poll.records": 50}) for _ in range(3)]
    try:
        start_reading(bootstrap, topic_name, shares)
        values = [b"r%d" % i for i in range(900)]
        produce(bootstrap, topic_name, values)
        got: list[list[bytes]] = [[], [], []]
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and sum(map(len, got)) < 900:
            for i, share in enumerate(shares):
                got[i] += [m.value() for m in share.poll(0.2) if m.error() is None and m.value() != b"probe"]
        assert sorted(v for part in got for v in part) == sorted(values)  # each exactly once
        assert all(got), [len(part) for part in got]  # all three had a share
    finally:
        for share in shares:
            share.close()


KILLED_CONSUMER = """
import sys, time
from confluent_kafka import ShareConsumer
share = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
share.subscribe([sys.argv[3]])
while True:
    messages = [m for m in share.poll(0.5) if m.error() is None]
    if messages:
        print(len(messages), flush=True)  # holds them, never acknowledges: killed next
        time.sleep(60)
"""


def test_records_of_a_consumer_killed_with_sigkill_come_back_after_their_lock(share_broker, topic_name):
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name)
    group = "killed-" + topic_name
    share = consumer(bootstrap, group, topic_name)
    try:
        start_reading(bootstrap, topic_name, [share])
        share.close()
        victim = subprocess.Popen([sys.executable, "-c", KILLED_CONSUMER, bootstrap, group, topic_name],
                                  stdout=subprocess.PIPE, text=True)
        try:
            values = [b"r%d" % i for i in range(50)]
            produce(bootstrap, topic_name, values)
            assert int(victim.stdout.readline()) > 0
        finally:
            victim.kill()
            victim.wait()
        share = consumer(bootstrap, group, topic_name)
        got = poll_until(share, lambda got: len(got) >= 50)
        assert sorted(m.value() for m in got) == sorted(values)
        assert max(m.delivery_count() for m in got) == 2  # the killed consumer's delivery counted
    finally:
        share.close()


def test_share_group_is_listed_and_described_with_its_members(share_broker, topic_name):
    """librdkafka's list_consumer_groups shows only consumer protocol groups; ListGroups v5 and
    ShareGroupDescribe as Kafka's admin client sends them."""
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name, partitions=2)
    group = "listed-" + topic_name
    shares = [consumer(bootstrap, group, topic_name) for _ in range(3)]
    try:
        start_reading(bootstrap, topic_name, shares)
        host, port = bootstrap.rsplit(":", 1)
        connection = Connection((host, int(port)), 10, "test", {"ListGroups": (5, 5), "ShareGroupDescribe": (1, 1),
                                                                 "DescribeGroups": (6, 6)})
        try:
            classic = connection.call("DescribeGroups", groups=[group], include_authorized_operations=False)
            assert (classic.groups[0].error_code, classic.groups[0].error_message) == (
                69, f"Group {group} is not a classic group.")  # KIP-1043, as Kafka answers
            listed = connection.call("ListGroups", types_filter=["share"])
            assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups
                    if g.group_id == group] == [(group, "share", "share")]
            deadline = time.monotonic() + 20
            while True:  # the members' epochs reach the group's at their next heartbeat
                described = connection.call("ShareGroupDescribe", group_ids=[group]).groups[0]
                if described.group_state == "Stable" or time.monotonic() > deadline:
                    break
                for share in shares:
                    share.poll(0.1)
        finally:
            connection.close()
        assert described.error_code == 0 and described.group_state == "Stable"
        assert len(described.members) == 3
        assigned = [p for m in described.members for tp in m.assignment.topic_partitions for p in tp.partitions]
        assert sorted(assigned) == [0, 0, 1]  # three members over two partitions: one is shared
    finally:
        for share in shares:
            share.close()


def test_broker_killed_mid_run_loses_no_record_and_redelivers_no_accepted_one(tmp_path, topic_name):
    broker = BrokerProcess(tmp_path / "data", settings=SETTINGS)
    broker.start()
    share = None
    try:
        bootstrap = broker.bootstrap_servers
        make_topic(bootstrap, topic_name)
        share = consumer(bootstrap, "crash-" + topic_name, topic_name,
                         **{"share.acknowledgement.mode": "explicit", "max.poll.records": 20})
        start_reading(bootstrap, topic_name, [share], explicit=True)
        values = [b"r%d" % i for i in range(400)]
        produce(bootstrap, topic_name, values)
        accepted: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(accepted) < 150:
            messages = [m for m in share.poll(0.3) if m.error() is None]
            for m in messages:
                share.acknowledge(m)
            if messages and all(error is None for error in share.commit_sync(10).values()):
                accepted += [m.value() for m in messages if m.value() != b"probe"]
        before_kill = list(accepted)
        broker.kill()
        broker.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(set(accepted)) < 400:
            messages = [m for m in share.poll(0.3) if m.error() is None]
            for m in messages:
                share.acknowledge(m)
            if messages:
                results = share.commit_sync(10)
                if all(error is None for error in results.values()):
                    accepted += [m.value() for m in messages if m.value() != b"probe"]
        assert 150 <= len(before_kill) < 400
        assert poll_until(share, lambda got: False, timeout=LOCK_MS / 1000 + 1, explicit=True) == []
        assert sorted(accepted) == sorted(values)  # every record accepted, none twice
    finally:
        if share is not None:
            share.close()
        broker.stop()


def test_share_groups_command_resets_describes_and_deletes(share_broker, topic_name):
    """`odradek share-groups` as kafka-share-groups.sh: a reset to the earliest offsets before any member joined
    makes the group, a consumer then reads what was written before it, the lag goes to 0, a reset is refused while
    a member is in the group, and delete forgets it."""
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [b"old%d" % i for i in range(10)])
    group = "cli-" + topic_name
    reset = odradek(share_broker, "share-groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest",
                    "--execute")
    assert reset.returncode == 0, reset.stderr
    listed = odradek(share_broker, "share-groups", "list").stdout
    assert [group, "Empty"] in [row.split() for row in listed.splitlines()]
    before = odradek(share_broker, "share-groups", "describe", group).stdout
    lags = {int(row.split()[2]): (int(row.split()[3]), int(row.split()[4])) for row in before.splitlines()[2:]}
    assert sum(lag for _, lag in lags.values()) == 10 and {start for start, _ in lags.values()} == {0}
    share = consumer(bootstrap, group, topic_name)
    try:
        got = poll_until(share, lambda got: len(got) >= 10)
        assert sorted(m.value() for m in got) == sorted(b"old%d" % i for i in range(10))
        share.poll(0.5)  # the implicit acknowledgement of the last batch goes with this poll
        refused = odradek(share_broker, "share-groups", "reset-offsets", group, "--all-topics", "--to-earliest",
                          "--execute")
        assert refused.returncode != 0 and "NON_EMPTY_GROUP" in refused.stderr
        members = odradek(share_broker, "share-groups", "describe", group, "--members").stdout
        assert "Stable with 1 member(s)" in members and f"{topic_name}:0,{topic_name}:1" in members
    finally:
        share.close()
    after = odradek(share_broker, "share-groups", "describe", group).stdout
    assert [row.split()[4] for row in after.splitlines()[2:]] == ["0", "0"]
    deleted = odradek(share_broker, "share-groups", "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    gone = odradek(share_broker, "share-groups", "describe", group)
    assert gone.returncode != 0 and "GROUP_ID_NOT_FOUND" in gone.stderr


def test_metrics_show_members_records_in_flight_and_lag(share_broker, topic_name):
    bootstrap = share_broker.bootstrap_servers
    make_topic(bootstrap, topic_name)
    group = "metered-" + topic_name
    share = explicit(bootstrap, group, topic_name)
    try:
        start_reading(bootstrap, topic_name, [share], explicit=True)
        produce(bootstrap, topic_name, [b"r%d" % i for i in range(30)])
        held = poll_until(share, lambda got: len(got) >= 30, explicit=True)  # acquired, not acknowledged
        labels = frozenset({("group", group), ("topic", topic_name), ("partition", "0")})
        metrics = scrape(METRICS_PORT)
        assert metrics[("odradek_share_group_members", frozenset({("group", group)}))] == 1
        assert len(held) == 30  # (and maybe a probe whose acknowledgement goes with the next poll)
        assert metrics[("odradek_share_partition_records", labels | {("state", "acquired")})] in (30, 31)
        assert metrics[("odradek_share_partition_lag", labels)] in (30, 31)
        for message in held[:10]:
            share.acknowledge(message)
        for message in held[10:]:
            share.acknowledge(message, AcknowledgeType.REJECT)
        share.commit_sync(10)
        metrics = scrape(METRICS_PORT)
        assert metrics[("odradek_share_partition_lag", labels)] == 0
        assert metrics[("odradek_share_partition_records", labels | {("state", "acquired")})] == 0
    finally:
        share.close()
