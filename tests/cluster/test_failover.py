"""Brokers coming and going on a real ZooKeeper (session timeout 6 s): a killed controller is replaced within the
session timeout, a killed broker comes back into the registry, a broker whose session expired (a pause longer than
the timeout) registers again on a new session (a paused controller comes back as a follower), and after a ZooKeeper
restart the brokers reconnect."""

from __future__ import annotations

import json
import os
import signal
import time

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, ZooKeeperServer, wait_until

from .conftest import metadata_of

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000


def controller_of(zk) -> int | None:
    try:
        return json.loads(zk.get("/controller")[0])["brokerid"]
    except Exception:  # absent between two controllers
        return None


def registered(zk) -> list[int]:
    return sorted(int(child) for child in zk.get_children("/brokers/ids"))


def test_a_killed_controller_is_replaced_within_the_session_timeout(cluster, zk):
    old = controller_of(zk)
    old_epoch = int(zk.get("/controller_epoch")[0])
    killed_at = time.monotonic()
    cluster.broker(old).kill()
    new = wait_until(lambda: (c := controller_of(zk)) not in (None, old) and c, timeout=SESSION_TIMEOUT_S + 10)
    took = time.monotonic() - killed_at
    print(f"controller {old} killed -9: broker {new} elected after {took:.1f}s")
    assert new, f"no new controller {took:.1f}s after the controller was killed"
    assert took < SESSION_TIMEOUT_S + 5
    assert int(zk.get("/controller_epoch")[0]) == old_epoch + 1
    survivors = [b for b in cluster.brokers if b.node_id != old]
    for broker in survivors:
        metadata = wait_until(lambda: (m := metadata_of(broker)).controller_id == new and len(m.brokers) == 2 and m,
                              timeout=5)
        assert metadata and sorted(metadata.brokers) == sorted(b.node_id for b in survivors)


def test_a_killed_broker_restarted_registers_again(cluster, zk):
    victim = next(b for b in cluster.brokers if b.process is not None and b.node_id != controller_of(zk))
    victim.kill()
    # a restart at once: its old registration is still there until the old session times out
    victim.start(timeout=SESSION_TIMEOUT_S + 20)
    for broker in cluster.brokers:
        if broker.process is None:
            broker.start(timeout=SESSION_TIMEOUT_S + 20)  # the controller the previous test killed
    assert registered(zk) == [1, 2, 3]
    for broker in cluster.brokers:
        assert wait_until(lambda: len(metadata_of(broker).brokers) == 3, timeout=10)


def test_a_broker_whose_session_expired_registers_again(cluster, zk):
    paused = next(b for b in cluster.brokers if b.node_id != controller_of(zk))
    session = zk.get(f"/brokers/ids/{paused.node_id}")[1].ephemeralOwner
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        assert wait_until(lambda: paused.node_id not in registered(zk), timeout=SESSION_TIMEOUT_S + 10)
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    assert wait_until(lambda: paused.node_id in registered(zk), timeout=SESSION_TIMEOUT_S + 10)
    assert zk.get(f"/brokers/ids/{paused.node_id}")[1].ephemeralOwner != session
    assert wait_until(lambda: len(metadata_of(paused).brokers) == 3, timeout=10)
    # the session's end took its catalogue watches: a topic made since must still reach it, led
    other = next(b for b in cluster.brokers if b is not paused)
    admin = AdminClient({"bootstrap.servers": other.bootstrap_servers})
    admin.create_topics([NewTopic("made-after-expiry", 4, 3)])["made-after-expiry"].result(30)
    assert wait_until(lambda: (t := metadata_of(paused).topics.get("made-after-expiry")) is not None
                      and len(t.partitions) == 4 and all(p.leader >= 0 for p in t.partitions.values()), timeout=15)


def test_a_paused_controller_comes_back_as_a_follower_of_the_new_one(cluster, zk):
    paused = cluster.broker(controller_of(zk))
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        new = wait_until(lambda: (c := controller_of(zk)) not in (None, paused.node_id) and c,
                         timeout=SESSION_TIMEOUT_S + 10)
        assert new
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    assert wait_until(lambda: paused.node_id in registered(zk), timeout=SESSION_TIMEOUT_S + 10)
    assert controller_of(zk) == new
    assert wait_until(lambda: (m := metadata_of(paused)).controller_id == new and len(m.brokers) == 3, timeout=10)


def test_brokers_reconnect_after_a_zookeeper_restart(tmp_path):
    """ZooKeeper keeps its sessions across a restart, so the brokers reconnect to theirs (registrations kept) even
    after an outage longer than the session timeout, and their watches work again. The sessions here last 10 s:
    a restarted ZooKeeper gives each restored session its timeout again, and on a loaded machine its JVM start and
    the brokers' reconnection took longer than 6 s."""
    from kazoo.client import KazooClient

    session_timeout_s = 10

    def sessions(zk) -> dict[int, int]:
        return {node: zk.get(f"/brokers/ids/{node}")[1].ephemeralOwner for node in registered(zk)}

    with ZooKeeperServer(tmp_path / "zookeeper") as server, \
            Cluster(2, zookeeper=server.connect, data_dir=tmp_path / "cluster",
                    settings={"zookeeper.session.timeout.ms": session_timeout_s * 1000}) as cluster:
        zk = KazooClient(hosts=server.connect)
        zk.start(timeout=15)
        before = sessions(zk)
        zk.stop()
        server.kill()
        time.sleep(session_timeout_s + 1)
        server.start()
        zk.start(timeout=15)
        try:
            assert wait_until(lambda: sessions(zk) == before and controller_of(zk) in (1, 2), timeout=10), \
                (before, sessions(zk), controller_of(zk))
            cluster.broker(2).stop()  # a change the other broker must see through its re-established watch
            assert wait_until(lambda: registered(zk) == [1] and controller_of(zk) == 1, timeout=10), \
                (registered(zk), controller_of(zk))
            assert wait_until(lambda: list(metadata_of(cluster.broker(1)).brokers) == [1], timeout=10), \
                list(metadata_of(cluster.broker(1)).brokers)
        finally:
            zk.stop()
            zk.close()
