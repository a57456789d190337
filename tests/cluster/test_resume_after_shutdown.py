"""How long an acks=all producer stands still when its partition's leader is stopped cleanly (SIGTERM, controlled
shutdown), measured as bench/failover_bench.py measures it, on a cluster where followers long-poll their leaders
for 10 s (replica.fetch.wait.max.ms) and every broker already follows every other one: a follower whose poll went
out before leadership moved to that leader must not wait it out while the new leader's producers wait for it."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench.failover_bench import pause_after
from odradek.embedded import wait_until

from .conftest import new_cluster

LONG_POLL_MS = 10_000


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "resume",
                     settings={"replica.fetch.wait.max.ms": LONG_POLL_MS}) as c:
        yield c


def test_producing_resumes_within_a_second_or_so_after_sigterm_of_the_leader(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    ids = [broker.node_id for broker in cluster.brokers]
    assert wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == len(ids), timeout=30)
    idle = {f"idle-led-by-{leader}": [leader] + [i for i in ids if i != leader] for leader in ids}
    for future in admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas])
                                       for name, replicas in idle.items()]).values():
        future.result(30)
    pause_s = pause_after(cluster, "SIGTERM", run=0)
    print(f"leader SIGTERMed: producing stood still {pause_s * 1000:.0f} ms")
    assert pause_s < 3.0
