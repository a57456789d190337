"""Two brokers' ACL stores (odradek.cluster.zk_acls over two ZooKeeper sessions) granting on one topic at the same
time: every grant lands in the one /kafka-acl/Topic/<name> znode (each write is conditional on the version read and
retried), and each store ends up seeing all of them through the notifications."""

from __future__ import annotations

import threading
import uuid

from odradek.cluster.zk_acls import ZooKeeperAcls, decode_acls
from odradek.embedded import wait_until
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.security.acl import AclBinding, PatternType, Permission
from tests.security.conftest import kazoo_client

GRANTS_EACH = 15


def grant(user: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, f"User:{user}", "*", AclOperation.READ,
                      Permission.ALLOW)


def test_concurrent_grants_on_one_topic_all_land(odradek_zookeeper):
    connect = f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}"
    with kazoo_client(odradek_zookeeper.connect) as root:
        root.ensure_path("/" + connect.split("/", 1)[1])
    with kazoo_client(connect) as first_client, kazoo_client(connect) as second_client:
        views: dict[int, list] = {}  # store -> the bindings it last published
        stores = [ZooKeeperAcls(client, lambda acls, i=i: views.__setitem__(i, acls))
                  for i, client in enumerate((first_client, second_client))]
        for store in stores:
            store.follow()
        users = [[f"{name}-{n}" for n in range(GRANTS_EACH)] for name in ("a", "b")]
        threads = [threading.Thread(target=lambda s=store, u=mine: [s.add([grant(user)]) for user in u])
                   for store, mine in zip(stores, users)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        expected = {grant(user) for mine in users for user in mine}
        stored = decode_acls((ResourceType.TOPIC, "orders", PatternType.LITERAL),
                             first_client.get("/kafka-acl/Topic/orders")[0])
        assert stored == expected
        assert wait_until(lambda: set(views[0]) == expected and set(views[1]) == expected, 10)
