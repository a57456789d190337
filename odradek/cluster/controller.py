"""The controller's work in a ZooKeeper cluster: partition leadership and topic deletion.

Every broker runs one `Controller`; it acts only while its broker holds /controller (ZooKeeperMembership elects).
It owns the state znodes (/brokers/topics/[topic]/partitions/[n]/state): a new partition gets its first live
replica as leader (leader epoch 0); a leader that left the live brokers is replaced by the next live in-sync
replica, else the partition goes offline (leader -1, ISR kept, as Kafka's controller leaves the last ISR member);
an offline partition whose in-sync replica comes back is led by it again. Every such change bumps the leader epoch.
It also carries out deletions asked at /admin/delete_topics/[topic]: the topic's znodes and config go, then the
request; brokers drop their logs when the topic leaves their view.

Decisions are a plain function (`next_state`) of the partition's replicas, its current state and the live brokers.
The writes are conditional, as Kafka's: each one is a ZooKeeper transaction that checks /controller_epoch's version
(a controller that lost its election meanwhile writes nothing) and the state znode's version. The work runs on one
thread of its own, woken by the catalogue's and the membership's watches and one on /admin/delete_topics; each pass
re-reads the whole view, so events that come together are handled once and a failed write is retried by the next.

The ISR otherwise belongs to each partition's leader, which writes the same znode (conditionally on its version)
when followers fall behind or catch up (odradek/broker/replica_fetcher.py); the controller only takes brokers that
left out of it.
"""

from __future__ import annotations

import logging
import threading

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from odradek.cluster.zk_catalogue import (DELETE_TOPICS, NO_LEADER, TOPIC_CONFIGS, PartitionState, state_path,
                                          topic_path)
from odradek.cluster.zookeeper import CONTROLLER_EPOCH

log = logging.getLogger("odradek.controller")

RETRY_AFTER_FAILURE_S = 0.5
LOST_RACE_PAUSE_S = 0.05  # a conditional write lost: the watches bring the newer view meanwhile


def next_state(replicas: list[int], current: PartitionState | None, live: set[int],
               controller_epoch: int, unclean: bool = False) -> PartitionState | None:
    """The state the partition should have, or None when it needs no write. Replicas of brokers that left go out
    of the ISR (Kafka's onReplicasBecomeOffline), except the last member of an offline partition's ISR; a leader
    that left is replaced by a live ISR member, or with `unclean` (unclean.leader.election.enable) by any live
    replica, which may lose records."""
    if current is None:
        alive = [r for r in replicas if r in live]
        return PartitionState(alive[0], 0, alive, controller_epoch) if alive else None
    isr = [r for r in current.isr if r in live]
    if current.leader in live:
        return None if isr == current.isr else PartitionState(current.leader, current.leader_epoch, isr,
                                                              controller_epoch)
    leader = next((r for r in isr if r in replicas), NO_LEADER)
    if leader == NO_LEADER and unclean:
        leader = next((r for r in replicas if r in live), NO_LEADER)
        if leader != NO_LEADER:
            log.warning("unclean leader election: broker %d leads without being in the ISR %s; records may be lost",
                        leader, current.isr)
            isr = [leader]
    if leader == NO_LEADER:
        return None if current.leader == NO_LEADER else PartitionState(
            NO_LEADER, current.leader_epoch + 1, current.isr, controller_epoch)
    return PartitionState(leader, current.leader_epoch + 1, isr, controller_epoch)


class Controller:
    def __init__(self, membership, catalogue, unclean_default: bool = False):
        self.membership = membership
        self.unclean_default = unclean_default  # unclean.leader.election.enable of the broker
        self.catalogue = catalogue
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="odradek-controller", daemon=True)

    def start(self) -> None:
        self.membership.listeners.append(self.poke)
        self.catalogue.listeners.append(self.poke)
        ChildrenWatch(self.membership.client, DELETE_TOPICS, lambda children: self.poke())
        self._thread.start()
        self.poke()

    def poke(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            if not self.membership.is_controller:
                continue
            try:
                self._pass()
            except KazooException as exc:
                log.warning("controller pass interrupted (%r); retrying", exc)
                self._closed or threading.Event().wait(RETRY_AFTER_FAILURE_S)
                self._wake.set()

    def _pass(self) -> None:
        client = self.membership.client
        epoch_data, epoch_stat = client.get(CONTROLLER_EPOCH)
        epoch = int(epoch_data)
        if epoch != self.membership.controller_epoch or not self.membership.is_controller:
            return  # the election moved on; the watch will tell
        for name in client.get_children(DELETE_TOPICS):
            self._delete(client, name)
        live = {broker.node_id for broker in self.membership.live_brokers()}
        retry = False
        for topic in list(self.catalogue.topics.values()):
            for index, assignment in enumerate(topic.partitions):
                known = self.catalogue.state_version(topic.name, index)
                current, version = known if known else (None, None)
                unclean = topic.configs.get("unclean.leader.election.enable", str(self.unclean_default))
                wanted = next_state(assignment.replicas, current, live, epoch, unclean.lower() == "true")
                if wanted is not None:
                    retry |= not self._write_state(client, topic.name, index, wanted, version, epoch_stat.version)
        if retry:
            threading.Event().wait(LOST_RACE_PAUSE_S)
            self._wake.set()

    def _write_state(self, client, name: str, index: int, state: PartitionState, version: int | None,
                     epoch_version: int) -> bool:
        """One conditional write; False when it lost a race (the view is behind: the next pass sees more)."""
        path = state_path(name, index)
        if version is None:
            client.ensure_path(path.rsplit("/", 1)[0])
        transaction = client.transaction()
        transaction.check(CONTROLLER_EPOCH, epoch_version)
        if version is None:
            transaction.create(path, state.encode())
        else:
            transaction.set_data(path, state.encode(), version=version)
        results = transaction.commit()
        if any(isinstance(result, Exception) for result in results):
            return False
        log.info("%s-%d: leader %d, leader epoch %d, isr %s", name, index, state.leader, state.leader_epoch,
                 state.isr)
        return True

    def _delete(self, client, name: str) -> None:
        for path in (topic_path(name), f"{TOPIC_CONFIGS}/{name}"):
            try:
                client.delete(path, recursive=True)
            except NoNodeError:
                pass
        try:
            client.delete(f"{DELETE_TOPICS}/{name}")
        except NoNodeError:
            pass
        log.info("deleted topic %s", name)
