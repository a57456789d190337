"""Kafka's change notifications in ZooKeeper: sequential znodes a writer leaves after changing shared state, which
every broker follows to re-read what changed (Kafka's ZkNodeChangeNotificationListener).

Used for the ACLs (/kafka-acl-changes, /kafka-acl-extended-changes: odradek.cluster.zk_acls) and the entity configs
(/config/changes: odradek.cluster.zk_configs). `follow_changes` sets a kazoo children watch on the path: every
notification numbered above the last one processed is read and handed to `process` (its data), in order, and those
older than 15 minutes are deleted, as Kafka purges them. The watch's first call is synchronous, so what was
notified before is processed at once; a notification whose data cannot be read is logged and skipped. A read that
fails with the connection (ZooKeeper restarting, a network blip) leaves that notification and the later ones to be
read again once kazoo is connected: kazoo calls the watch again then only if the children changed meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

log = logging.getLogger("odradek.zookeeper")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs
CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)


def change_path(path: str, prefix: str) -> str:
    """Where a writer creates its notification (sequential: ZooKeeper appends the number)."""
    return f"{path}/{prefix}"


def follow_changes(client, path: str, prefix: str, process: Callable[[bytes], None],
                   done: Callable[[], None], lock: threading.RLock) -> None:
    """Process every new notification under `path` (under `lock`), then call `done` once if any was processed."""
    client.ensure_path(path)
    last = [-1]  # the number of the last notification processed (or skipped as unreadable)
    behind = threading.Event()  # a read failed with the connection: caught up once connected again

    def on_children(children: list[str]) -> None:
        numbered = sorted((int(child[len(prefix):]), child) for child in children
                          if child.startswith(prefix) and child[len(prefix):].isdigit())
        with lock:
            processed = False
            try:
                for number, child in numbered:
                    if number <= last[0]:
                        continue
                    try:
                        data, _ = client.get(f"{path}/{child}")
                        process(data)
                        processed = True
                    except NoNodeError:
                        pass
                    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                        log.warning("ignoring unreadable change notification %s/%s: %s", path, child, exc)
                    last[0] = number
            except CONNECTION_ERRORS as exc:
                # the connection was lost mid-way (or the session expired): kazoo's children watch
                # is called again on reconnection only if the children changed meanwhile, so catch up then
                log.info("following %s: %r; reading the notifications again once connected", path, exc)
                behind.set()
                if client.state == KazooState.CONNECTED:
                    on_state(KazooState.CONNECTED)
                return
            finally:
                if processed:
                    done()
        purge(numbered)

    def purge(numbered: list[tuple[int, str]]) -> None:
        now_ms = time.time() * 1000
        try:
            for _, child in numbered:
                try:
                    _, stat = client.get(f"{path}/{child}")
                    if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                        client.delete(f"{path}/{child}")
                except NoNodeError:
                    pass  # another broker purged it
        except CONNECTION_ERRORS:
            pass  # purged at a later notification

    def catch_up() -> None:
        try:
            children = client.get_children(path)
        except CONNECTION_ERRORS:  # lost again: the next reconnection tries again
            behind.set()
            return
        on_children(children)

    def on_state(state: str) -> None:  # on kazoo's connection thread, which must not block
        if state == KazooState.CONNECTED and behind.is_set():
            behind.clear()
            client.handler.spawn(catch_up)

    client.add_listener(on_state)
    ChildrenWatch(client, path, on_children)
