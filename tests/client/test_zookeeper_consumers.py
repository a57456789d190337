"""Consumers of one group coordinating through ZooKeeper (seed 004) over a real 3-broker cluster: registration,
the seed's range algorithm in the owner znodes, clean and kill -9 departures, offsets in ZooKeeper with no gap."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.zookeeper import (Registration, encode_registration, offset_path, owners, range_assignment,
                                      read_offset)
from odradek.embedded import wait_until
from tests.cluster.conftest import cluster, zk  # noqa: F401  (the cluster tests' fixtures, shared)

PARTITIONS = 12
SESSION_TIMEOUT_S = 6


def test_range_assignment_gives_each_partition_one_owner_in_the_seed_ranges():
    for count in range(1, 8):
        consumers = [f"host:{uuid.uuid4()}" for _ in range(count)]
        shares = {c: range_assignment(range(PARTITIONS), consumers, c) for c in consumers}
        assert sorted(p for share in shares.values() for p in share) == list(range(PARTITIONS))
        ordered = sorted(consumers)
        per, extra = divmod(PARTITIONS, count)
        for i, consumer in enumerate(ordered):  # i*N .. (i+1)*N-1, the remainder to the first ones
            assert len(shares[consumer]) == per + (1 if i < extra else 0)
            assert shares[consumer] == sorted(shares[consumer])
        assert [shares[c][0] for c in ordered if shares[c]] == sorted(shares[c][0] for c in ordered if shares[c])


def test_registration_is_the_seeds_json():
    body = json.loads(encode_registration({"orders": 2}, "static", 1700000000000))
    assert body == {"version": 1, "subscription": {"orders": 2}, "pattern": "static", "timestamp": "1700000000000"}
    white = Registration({"ord.*": 1}, "white_list")
    assert white.wants("orders") and not white.wants("payments") and not white.wants("__consumer_offsets")
    assert Registration({"ord.*": 1}, "black_list").wants("payments")


@pytest.fixture(scope="module")
def topic(cluster):  # noqa: F811
    name = f"zk-group-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    return name


def produce(cluster, topic: str, count: int) -> None:  # noqa: F811
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def start_member(cluster, group: str, topic: str, output, *options: str) -> subprocess.Popen:  # noqa: F811
    return subprocess.Popen([sys.executable, "-m", "tests.client.zk_member", cluster.zookeeper_connect, group, topic,
                             str(output), *options], env={**os.environ, "PYTHONPATH": os.getcwd()})


def live_consumers(zk, group: str) -> list[str]:  # noqa: F811
    return zk.get_children(f"/consumers/{group}/ids") if zk.exists(f"/consumers/{group}/ids") else []


def settled_as_the_seed_says(zk, group: str, topic: str) -> bool:  # noqa: F811
    """Every partition has exactly one owner, a live consumer, and the owners are the seed's ranges."""
    live = live_consumers(zk, group)
    found = owners(zk, group, [topic])
    if not live or sorted(found) != [(topic, p) for p in range(PARTITIONS)]:
        return False
    expected = {(topic, p): c for c in live for p in range_assignment(range(PARTITIONS), live, c)}
    return found == expected


def seen(outputs) -> Counter:
    counts: Counter = Counter()
    for path in outputs:
        if path.exists():
            for line in path.read_text().splitlines():
                _, partition, offset = line.split()
                counts[(int(partition), int(offset))] += 1
    return counts


def test_consumers_join_leave_and_die_and_the_group_follows_the_seeds_algorithm(cluster, zk, topic, tmp_path):  # noqa: F811
    group = f"g-{uuid.uuid4().hex[:6]}"
    rng = random.Random(16)
    members: list[tuple[subprocess.Popen, object]] = []
    outputs = []
    produced = 0
    join_times: list[float] = []
    leave_times: list[float] = []
    kill_times: list[float] = []
    try:
        for n in range(6):  # 1..6 consumers join
            produce(cluster, topic, 120)
            produced += 120
            output = tmp_path / f"member-{n}.txt"
            outputs.append(output)
            members.append((start_member(cluster, group, topic, output), output))
            assert wait_until(lambda: len(live_consumers(zk, group)) == n + 1, 30, interval=0.01)
            registered = time.monotonic()
            assert wait_until(lambda: settled_as_the_seed_says(zk, group, topic), 30, interval=0.01), \
                owners(zk, group, [topic])
            join_times.append(time.monotonic() - registered)
        rng.shuffle(members)
        while len(members) > 1:  # leave cleanly or die, in random order
            produce(cluster, topic, 120)
            produced += 120
            process, _ = members.pop()
            clean = rng.random() < 0.5
            began = time.monotonic()
            if clean:
                process.send_signal(signal.SIGTERM)
                assert process.wait(30) == 0
            else:
                process.kill()
                process.wait()
            assert wait_until(lambda: len(live_consumers(zk, group)) == len(members), SESSION_TIMEOUT_S + 30, 0.01)
            assert wait_until(lambda: settled_as_the_seed_says(zk, group, topic), 30, interval=0.01)
            (leave_times if clean else kill_times).append(time.monotonic() - began)
        # the last one reads everything and commits it
        assert wait_until(lambda: all(read_offset(zk, group, topic, p) == produced // PARTITIONS
                                      for p in range(PARTITIONS)), 30), \
            {p: read_offset(zk, group, topic, p) for p in range(PARTITIONS)}
        counts = seen(outputs)
        missing = [(p, o) for p in range(PARTITIONS) for o in range(produced // PARTITIONS) if (p, o) not in counts]
        assert not missing, missing[:10]
        assert zk.exists(offset_path(group, topic, 0)).ephemeralOwner == 0  # persistent
        print(f"\nrebalance settled after consumer 1..6 registered: {[round(t, 2) for t in join_times]} s; "
              f"after a clean leave (SIGTERM to settled): {[round(t, 2) for t in leave_times]} s; "
              f"after kill -9: {[round(t, 2) for t in kill_times]} s (session timeout {SESSION_TIMEOUT_S} s)")
    finally:
        for process, _ in members:
            process.send_signal(signal.SIGTERM)
            process.wait(30)


def consume_exactly(connector, stream, count: int, timeout: float = 30) -> list[tuple[int, int]]:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += [(m.partition, m.offset) for m in stream]
    return got


def test_a_partition_leaving_a_member_is_read_again_from_what_its_application_committed(cluster, zk):  # noqa: F811
    """Without auto commit, a rebalance commits nothing of the partitions leaving a member (Kafka's old consumer
    committed there only with auto.commit.enable): what was handed out but not committed is read again by the next
    owner, never skipped; and the messages of a partition that left, still queued in the old member's stream, are
    not handed out."""
    from odradek.client import ConsumerConnector

    name = f"zk-leave-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})

    def produce_five_each():
        for partition in (0, 1):
            for _ in range(5):
                producer.produce(name, b"v", partition=partition)
        assert producer.flush(30) == 0

    group = f"leave-{uuid.uuid4().hex[:6]}"
    first = ConsumerConnector(None, group, zookeeper_connect=cluster.zookeeper_connect, consumer_timeout_ms=300)
    second = None
    try:
        [first_stream] = first.create_message_streams({name: 1})[name]
        produce_five_each()
        assert sorted(consume_exactly(first, first_stream, 10)) == [(p, o) for p in (0, 1) for o in range(5)]
        produce_five_each()  # fetched into the first member's stream, not handed out
        assert wait_until(lambda: first_stream._queue.qsize() == 10, 10)
        second = ConsumerConnector(None, group, zookeeper_connect=cluster.zookeeper_connect, consumer_timeout_ms=300)
        [second_stream] = second.create_message_streams({name: 1})[name]
        assert wait_until(lambda: len(live_consumers(zk, group)) == 2 and len(second._member.owned) == 1, 30)
        [(_, moved)] = second._member.owned
        kept = 1 - moved
        assert read_offset(zk, group, name, moved) is None  # the first member never committed
        assert sorted(consume_exactly(second, second_stream, 10)) == [(moved, o) for o in range(10)]
        assert sorted(consume_exactly(first, first_stream, 5)) == [(kept, o) for o in range(5, 10)]
    finally:
        for connector in (first, second):
            if connector is not None:
                connector.shutdown()


def test_offsets_migration_round_trip_neither_loses_nor_repeats(cluster, zk, tmp_path):  # noqa: F811
    """The seed's migration: zookeeper -> kafka with dual commit -> dual off, and back the same way."""
    name = f"zk-migrate-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    group = f"migrating-{uuid.uuid4().hex[:6]}"
    from odradek.client import ConsumerConnector

    next_offset = 0
    phases = [("zookeeper", False), ("kafka", True), ("kafka", False), ("zookeeper", True), ("zookeeper", False)]
    for storage, dual in phases:
        produce(cluster, name, 2 * PARTITIONS)
        connector = ConsumerConnector(None, group, zookeeper_connect=cluster.zookeeper_connect,
                                      consumer_timeout_ms=300, offsets_storage=storage, dual_commit_enabled=dual)
        try:
            [stream] = connector.create_message_streams({name: 1})[name]
            got = consume_exactly(connector, stream, 2 * PARTITIONS)
            got += [(m.partition, m.offset) for m in stream]  # anything repeated would arrive now
            assert sorted(got) == [(p, o) for p in range(PARTITIONS) for o in (next_offset, next_offset + 1)], \
                (storage, dual)
            connector.commit_offsets()
        finally:
            connector.shutdown()
        next_offset += 2
    assert read_offset(zk, group, name, 0) == next_offset


def test_filter_stream_picks_up_a_topic_created_later(cluster, zk):  # noqa: F811
    from odradek.client import ConsumerConnector, Whitelist

    prefix = f"late-{uuid.uuid4().hex[:6]}"
    group = f"filter-{uuid.uuid4().hex[:6]}"
    connector = ConsumerConnector(None, group, zookeeper_connect=cluster.zookeeper_connect, consumer_timeout_ms=300)
    try:
        [stream] = connector.create_message_streams_by_filter(Whitelist(f"{prefix}.*"))
        registration = json.loads(zk.get(f"/consumers/{group}/ids/{live_consumers(zk, group)[0]}")[0])
        assert registration["pattern"] == "white_list" and registration["subscription"] == {f"{prefix}.*": 1}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        admin.create_topics([NewTopic(f"{prefix}-a", 3, 1)])[f"{prefix}-a"].result(30)
        assert wait_until(lambda: len(owners(zk, group, [f"{prefix}-a"])) == 3, 20)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        for i in range(9):
            producer.produce(f"{prefix}-a", f"v{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        assert len(consume_exactly(connector, stream, 9)) == 9
    finally:
        connector.shutdown()


def test_producer_and_consumers_follow_a_broker_killed_and_returning(cluster, zk):  # noqa: F811
    """Seed 002's zk.connect producer and a ZooKeeper group consumer across a broker's kill -9 and return."""
    from odradek.client import ConsumerConnector, Producer, SimpleConsumer

    name = f"zk-follow-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(name, 6, 1)])[name].result(30)
    producer = Producer(zk_connect=cluster.zookeeper_connect)
    connector = ConsumerConnector(None, f"follow-{uuid.uuid4().hex[:6]}", zookeeper_connect=cluster.zookeeper_connect,
                                  consumer_timeout_ms=300)
    try:
        assert wait_until(lambda: producer.partition_count(name) == 6, 10)
        assert sorted(producer._cluster_view.brokers) == [1, 2, 3]
        [stream] = connector.create_message_streams({name: 1})[name]
        for i in range(60):
            producer.send(name, f"before-{i}", key=f"k{i}")
        producer.flush()
        assert len(set(consume_exactly(connector, stream, 60))) == 60

        victim = cluster.broker(2)
        led = [p for p in range(6) if json.loads(zk.get(f"/brokers/topics/{name}/partitions/{p}/state")[0])["leader"]
               == 2]
        assert led
        victim.kill()
        assert wait_until(lambda: 2 not in producer._cluster_view.brokers, SESSION_TIMEOUT_S + 20)
        sent = [producer.send(name, f"during-{i}", key=f"k{i}") for i in range(60)]  # some wait for broker 2
        victim.start(timeout=SESSION_TIMEOUT_S + 30)
        assert wait_until(lambda: 2 in producer._cluster_view.brokers, 20)
        for future in sent:
            assert future.result(60).partition in range(6)
        assert len(set(consume_exactly(connector, stream, 60, timeout=60))) == 60

        with SimpleConsumer(None, name, led[0], zk_connect=cluster.zookeeper_connect) as simple:
            assert simple.leader.node_id == 2
            fetched = simple.fetch(0, timeout=10)
            assert fetched and fetched[0].offset == 0 and {m.partition for m in fetched} == {led[0]}
    finally:
        connector.shutdown()
        producer.close()


def test_kazoo_is_imported_only_with_zookeeper_connect():
    script = ("import sys; from odradek.client import ConsumerConnector, Producer, SimpleConsumer; "
              "Producer('127.0.0.1:1').close(0); ConsumerConnector('127.0.0.1:1', 'g').shutdown(); "
              "print('kazoo' in sys.modules, flush=True)")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert (run.returncode, run.stdout.strip()) == (0, "False"), run.stderr[-2000:]


def expire_session(cluster, client) -> None:
    """As ZooKeeper does after a long pause: another client on the same session closes it."""
    from kazoo.client import KazooClient

    impostor = KazooClient(hosts=cluster.zookeeper_connect.split("/")[0], client_id=client.client_id)
    impostor.start(timeout=15)
    impostor.stop()
    impostor.close()


def test_a_consumer_whose_session_expired_registers_again_and_the_group_settles(cluster, zk, topic):  # noqa: F811
    from odradek.client import ConsumerConnector

    group = f"expiring-{uuid.uuid4().hex[:6]}"
    connectors = [ConsumerConnector(None, group, zookeeper_connect=cluster.zookeeper_connect, consumer_timeout_ms=300)
                  for _ in range(2)]
    try:
        for connector in connectors:
            connector.create_message_streams({topic: 1})
        assert wait_until(lambda: len(live_consumers(zk, group)) == 2 and settled_as_the_seed_says(zk, group, topic),
                          30)
        victim = connectors[0]
        expire_session(cluster, victim._zookeeper)
        assert wait_until(lambda: victim._member.consumer_id not in live_consumers(zk, group), 10)
        assert wait_until(lambda: len(live_consumers(zk, group)) == 2 and settled_as_the_seed_says(zk, group, topic),
                          30), owners(zk, group, [topic])
        assert victim._member.owned == {tp for tp, owner in owners(zk, group, [topic]).items()
                                        if owner == victim._member.consumer_id}
    finally:
        for connector in connectors:
            connector.shutdown()


def test_a_failed_acquire_or_release_is_not_a_member_left_unregistered_or_not_reading(cluster, zk, topic):  # noqa: F811
    """What a loaded machine did once: the session expired while the member's acquire was reading offsets (it
    failed), and its release then failed too. The acquire is called again; a new session still registers."""
    from kazoo.exceptions import ConnectionLoss

    from odradek.client.zookeeper import Registration, ZooKeeperGroupMember, connect

    reading: set = set()  # what the fake librdkafka fetches: it refuses to assign twice or unassign what it lacks
    failures = {"acquire": 1, "release": 1}

    def acquire(partitions):
        assert not partitions & reading, partitions & reading
        if failures["acquire"]:
            failures["acquire"] -= 1
            raise ConnectionLoss()
        reading.update(partitions)

    def release(partitions):
        assert partitions <= reading, partitions - reading
        reading.difference_update(partitions)
        if failures["release"]:  # after unassigning, as a failed commit of what was consumed
            failures["release"] -= 1
            raise ConnectionLoss()

    group = f"failing-{uuid.uuid4().hex[:6]}"
    client = connect(cluster.zookeeper_connect)
    member = ZooKeeperGroupMember(client, group, Registration({topic: 1}, "static"), release=release,
                                  acquire=acquire)
    try:
        member.start()
        everything = {(topic, p) for p in range(PARTITIONS)}
        assert wait_until(lambda: reading == member.owned == everything, 10), (reading, member.owned)
        expire_session(cluster, client)
        assert wait_until(lambda: member.consumer_id not in live_consumers(zk, group), 10)
        assert wait_until(lambda: live_consumers(zk, group) == [member.consumer_id] and reading == everything
                          and settled_as_the_seed_says(zk, group, topic), 30), (reading, owners(zk, group, [topic]))
        assert failures == {"acquire": 0, "release": 0}
    finally:
        member.stop()
        client.stop()
        client.close()


def test_zk_producer_and_group_follow_added_partitions_and_auto_commit_reaches_zookeeper(cluster, zk):  # noqa: F811
    from odradek.client import Admin, ConsumerConnector, Producer

    name = f"zk-grow-{uuid.uuid4().hex[:6]}"
    admin = Admin(cluster.bootstrap_servers)
    admin.create_topic(name, 3, 1)
    group = f"auto-{uuid.uuid4().hex[:6]}"
    with Producer(zk_connect=cluster.zookeeper_connect, linger_ms=0) as producer:
        assert wait_until(lambda: producer.partition_count(name) == 3, 10)
        admin.add_partitions(name, 5)
        assert wait_until(lambda: producer.partition_count(name) == 5, 10)  # the watch, no metadata cache
        for partition in range(5):
            producer.send_sync(name, "v", partition=partition)
    connector = ConsumerConnector(None, group, zookeeper_connect=cluster.zookeeper_connect, consumer_timeout_ms=300,
                                  auto_commit_interval_ms=200)
    try:
        [stream] = connector.create_message_streams({name: 1})[name]
        assert len(consume_exactly(connector, stream, 5)) == 5
        assert wait_until(lambda: all(read_offset(zk, group, name, p) == 1 for p in range(5)), 10)
        admin.add_partitions(name, 6)  # the group takes up a partition added while it runs
        assert wait_until(lambda: len(owners(zk, group, [name])) == 6, 10)
        with Producer(zk_connect=cluster.zookeeper_connect, linger_ms=0) as producer:
            producer.send_sync(name, "new", partition=5)
        assert consume_exactly(connector, stream, 1) == [(5, 0)]
    finally:
        connector.shutdown()


def test_simple_consumer_found_through_zookeeper_multifetches_from_its_leader(cluster, zk):  # noqa: F811
    """The seeds' low-level calls go to the one broker the SimpleConsumer found through ZooKeeper: the partitions it
    leads answer their records, the others their error alone."""
    from odradek.client import Admin, Producer, SimpleConsumer
    from odradek.client.simple import LATEST_TIME, FetchRequest

    name = f"zk-simple-{uuid.uuid4().hex[:6]}"
    Admin(cluster.bootstrap_servers).create_topic(name, 6, 1)
    with Producer(zk_connect=cluster.zookeeper_connect, linger_ms=0) as producer:
        assert wait_until(lambda: producer.partition_count(name) == 6, 10)
        for partition in range(6):
            for i in range(3):
                producer.send_sync(name, f"{partition}/{i}", partition=partition)
    leaders = {p: json.loads(zk.get(f"/brokers/topics/{name}/partitions/{p}/state")[0])["leader"] for p in range(6)}
    assert len(set(leaders.values())) > 1
    with SimpleConsumer(None, name, 0, zk_connect=cluster.zookeeper_connect) as simple:
        assert simple.leader.node_id == leaders[0]
        answers = simple.multifetch([FetchRequest(name, p, 1) for p in range(6)])
        for partition, answer in enumerate(answers):
            if leaders[partition] == leaders[0]:
                assert (answer.error, [m.value for m in answer.messages]) == (
                    None, [f"{partition}/{i}".encode() for i in (1, 2)])
            else:
                assert (answer.messages, answer.error.name) == ([], "NOT_LEADER_OR_FOLLOWER")
        assert simple.get_offsets_before(name, 0, LATEST_TIME, 5) == [3, 0]
