"""Kafka's change notifications in ZooKeeper: sequential znodes a writer leaves after changing shared state, which
every broker follows to re-read what changed (Kafka's ZkNodeChangeNotificationListener).

Used for the ACLs (/kafka-acl-changes, /kafka-acl-extended-changes: odradek.cluster.zk_acls) and the entity configs
(/config/changes: odradek.cluster.zk_configs). `follow_changes` sets a kazoo children watch on the path: every
notification numbered above the last one processed is read and handed to `process` (its data), in order, and those
older than 15 minutes are deleted, as Kafka purges them. The watch's first call is synchronous, so what was
notified before is processed at once; a notification whose data cannot be read is logged and skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

log = logging.getLogger("odradek.zookeeper")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs


def change_path(path: str, prefix: str) -> str:
    """Where a writer creates its notification (sequential: ZooKeeper appends the number)."""
    return f"{path}/{prefix}"


def follow_changes(client, path: str, prefix: str, process: Callable[[bytes], None],
                   done: Callable[[], None], lock: threading.RLock) -> None:
    """Process every new notification under `path` (under `lock`), then call `done` once if any was processed."""
    client.ensure_path(path)
    last = [-1]

    def on_children(children: list[str]) -> None:
        numbered = sorted((int(child[len(prefix):]), child) for child in children
                          if child.startswith(prefix) and child[len(prefix):].isdigit())
        with lock:
            processed = False
            for number, child in numbered:
                if number <= last[0]:
                    continue
                last[0] = number
                try:
                    data, _ = client.get(f"{path}/{child}")
                    process(data)
                    processed = True
                except NoNodeError:
                    continue
                except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                    log.warning("ignoring unreadable change notification %s/%s: %s", path, child, exc)
            if processed:
                done()
        now_ms = time.time() * 1000
        for _, child in numbered:
            try:
                _, stat = client.get(f"{path}/{child}")
                if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                    client.delete(f"{path}/{child}")
            except NoNodeError:
                pass  # another broker purged it

    ChildrenWatch(client, path, on_children)
