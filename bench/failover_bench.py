"""Time to resume producing after a partition's leader goes, by SIGTERM (controlled shutdown) and by kill -9.

One RF 3 partition (min.insync.replicas=2) led by a broker that is not the controller (so that what is timed is the
partition's failover, not a controller election as well), an idempotent acks=all confluent-kafka producer sending
a record every millisecond, and the leader signalled once acknowledgements have flowed for a second. The figure is
the longest time without an acknowledgement from the signal on: how long producing stood still. Nothing may fail,
be lost or doubled (the records' values are checked in order); a run that breaks this raises. After SIGTERM the
leader moves to another in-sync replica before the broker stops; after kill -9 nothing happens until ZooKeeper
expires the dead broker's session, so that pause is bounded below by zookeeper.session.timeout.ms (the cluster's,
named in the output). The victim is restarted after each run and every run uses a new topic.
Run: `python -m bench.failover_bench [--runs 3]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, wait_until

SIGNALLED_AFTER_S = 1.0
RECORDS_PER_S = 1000
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 1, "message.timeout.ms": 120_000,
            "log_level": 0}


def session_timeout_s(cluster: Cluster) -> float:
    return int(cluster.settings.get("zookeeper.session.timeout.ms", 18000)) / 1000


def _leader_and_isr(admin: AdminClient, topic: str) -> tuple[int, list[int]]:
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
    return (partition.leader, sorted(partition.isrs)) if partition is not None else (-1, [])


def _new_topic_led_by_a_follower_of_the_controller(cluster: Cluster, topic: str, run: int):
    """Create `topic` led by a broker that is not the controller (a different one each run); that broker."""
    for broker in cluster.brokers:  # each one's view: the one that takes CreateTopics must know the restarted broker
        own = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
        if not wait_until(lambda: len(own.list_topics(timeout=10).brokers) == len(cluster.brokers), timeout=30):
            raise RuntimeError(f"broker {broker.node_id} does not see every broker of the cluster")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    controller = admin.list_topics(timeout=10).controller_id
    candidates = [broker for broker in cluster.brokers if broker.node_id != controller]
    victim = candidates[run % len(candidates)]
    replicas = [victim.node_id] + [broker.node_id for broker in cluster.brokers if broker is not victim]
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    everyone = sorted(replicas)
    if not wait_until(lambda: _leader_and_isr(admin, topic) == (victim.node_id, everyone), timeout=30):
        raise RuntimeError(f"{topic}: leader and ISR are {_leader_and_isr(admin, topic)}, not {victim.node_id}, "
                           f"{everyone}")
    return victim


def pause_after(cluster: Cluster, how: str, run: int) -> float:
    """Seconds producing stood still after the leader of a fresh topic got `how` ("SIGTERM" or "kill -9")."""
    topic = f"failover-{how.replace(' ', '').replace('-', '')}-{run}-{time.monotonic_ns() % 100_000}"
    victim = _new_topic_led_by_a_follower_of_the_controller(cluster, topic, run)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, **PRODUCER})
    acknowledged, failures = [], []

    def delivered(err, msg):
        if err is None:
            acknowledged.append((time.monotonic(), msg.value()))
        else:
            failures.append(err)

    stopping = threading.Thread(target=victim.stop, daemon=True)  # SIGTERM, then wait for the clean exit
    window_s = 2.0 if how == "SIGTERM" else session_timeout_s(cluster) + 3.0  # producing on after the signal
    sent, signalled_at = 0, None
    started = time.monotonic()
    while signalled_at is None or time.monotonic() - signalled_at < window_s:
        while sent < (time.monotonic() - started) * RECORDS_PER_S:
            producer.produce(topic, b"%07d" % sent, partition=0, on_delivery=delivered)
            sent += 1
        producer.poll(0.001)
        if signalled_at is None and time.monotonic() - started > 60:
            raise RuntimeError(f"{topic}: no acknowledgement in 60 s ({len(failures)} failed)")
        if signalled_at is None and acknowledged and time.monotonic() - acknowledged[0][0] >= SIGNALLED_AFTER_S:
            signalled_at = time.monotonic()
            if how == "SIGTERM":
                stopping.start()
            else:
                victim.kill()
    unacknowledged = producer.flush(60)
    if stopping.is_alive():
        stopping.join(60)
    victim.start(timeout=session_timeout_s(cluster) + 30)  # back for the next run
    if failures or unacknowledged or [value for _, value in acknowledged] != [b"%07d" % n for n in range(sent)]:
        raise RuntimeError(f"{topic} after {how}: {len(failures)} failed (first: {failures[:1]}), "
                           f"{unacknowledged} unacknowledged, {len(acknowledged)} of {sent} acknowledged")
    times = [at for at, _ in acknowledged]
    return max(later - max(earlier, signalled_at) for earlier, later in zip(times, times[1:])
               if later >= signalled_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-failover-bench-") as scratch:
        with Cluster(3, data_dir=Path(scratch)) as cluster:
            for how in ("SIGTERM", "kill -9"):
                pauses = [pause_after(cluster, how, run) for run in range(args.runs)]
                print(f"{how:8s} of the leader: producing resumed after {statistics.median(pauses) * 1000:,.0f} ms "
                      f"(median; runs {', '.join(f'{p * 1000:.0f}' for p in pauses)} ms; "
                      f"session timeout {session_timeout_s(cluster):.0f} s)")


if __name__ == "__main__":
    main()
