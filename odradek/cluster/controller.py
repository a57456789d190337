"""The controller's work in a ZooKeeper cluster: partition leadership, reassignments and topic deletion.

Every broker runs one `Controller`; it acts only while its broker holds /controller (ZooKeeperMembership elects).
It owns the state znodes (/brokers/topics/[topic]/partitions/[n]/state): a new partition gets its first live
replica as leader (leader epoch 0); a leader that left the live brokers is replaced by the next live in-sync
replica, else the partition goes offline (leader -1, ISR kept, as Kafka's controller leaves the last ISR member);
an offline partition whose in-sync replica comes back is led by it again. Every such change bumps the leader epoch.
It also carries out deletions asked at /admin/delete_topics/[topic]: the topic's znodes and config go, then the
request; brokers drop their logs when the topic leaves their view.

Elections asked for (ElectLeaders through /admin/elect_leaders/*, Kafka 2.x's /admin/preferred_replica_election)
and the auto leader rebalance (auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, brokers
whose preferred partitions are led elsewhere beyond leader.imbalance.per.broker.percentage get them back) are decided
by odradek.cluster.elections and written here, leader epoch bumped; a request znode goes once all its partitions are
decided. Reassignments (KIP-455) are written into the topic znodes by whichever broker took the request (or taken
from Kafka 2.x's /admin/reassign_partitions here); the controller ends each once its target replicas are all in the
ISR: state znode (leader moved into the target if needed) and topic znode (replicas = target) in one transaction.
A leader or ISR member that is no replica any more (a cancelled reassignment's) is replaced or dropped.

Decisions are a plain function (`next_state`) of the partition's replicas, its current state and the live brokers.
The writes are conditional, as Kafka's: each one is a ZooKeeper transaction that checks /controller_epoch's version
(a controller that lost its election meanwhile writes nothing) and the state znode's version; a pass's changes (a
new topic's partitions, a lost broker's) go in transactions of a few hundred writes (Kafka's controller batches its
ZooKeeper requests too), so a 500-partition topic is led after a few round trips. The work runs on one
thread of its own, woken by the catalogue's and the membership's watches and one on /admin/delete_topics; each pass
re-reads the whole view, so events that come together are handled once and a failed write is retried by the next.

Controlled shutdown (controlled.shutdown.enable), in our ZooKeeper mode without Kafka's ControlledShutdown request: a
broker stopping cleanly creates the ephemeral /admin/controlled_shutdown/[id] (`request_controlled_shutdown`) and
waits until it leads nothing another live in-sync replica could lead. The controller watches those children and
takes their brokers for gone where it decides leaders and ISRs (Kafka's shuttingDownBrokerIds): their partitions
move to another ISR member (epoch bumped) and they leave the ISRs, for good: leaders follow the same children
(ZooKeeperMembership.shutting_down) and never take them back, as Kafka's controller refuses them (KIP-841); a
partition with no other in-sync replica keeps its leader until it really stops. The znode is ephemeral, so it
goes with the broker's session and a restarted broker is a normal one again.

A bounced broker (killed and started again within its old ZooKeeper session, so the live brokers seem unchanged) is
known by its broker epoch (the czxid of its registration, odradek.cluster.zookeeper): a state znode last written
before the registration of a broker it names as leader or ISR member is out of date, and the controller does what
Kafka's does for bounced brokers (onBrokerFailure, then onBrokerStartup): the broker leaves that ISR and its
leadership moves to another in-sync replica (leader epoch bumped); it rejoins the ISR once it has caught up (its
log may have lost its tail). With no other in-sync replica, it leads again under a new leader epoch. Comparing
against the state znodes rather than remembered epochs, a newly elected controller sees a bounce too, its own
predecessor's included. Until then the restarted broker does not lead on the stale state (odradek.cluster.
zk_catalogue).

The ISR otherwise belongs to each partition's leader, which writes the same znode (conditionally on its version)
when followers fall behind or catch up (odradek/broker/replica_fetcher.py); the controller only takes brokers that
left out of it.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from odradek.cluster.elections import PREFERRED_ELECTION, completed_reassignment, elected, imbalanced_partitions
from odradek.cluster.zk_catalogue import (DELETE_TOPICS, ELECT_LEADERS, NO_LEADER, PREFERRED_REPLICA_ELECTION,
                                          REASSIGN_PARTITIONS, TOPIC_CONFIGS, PartitionState, decode_assignment,
                                          decode_election, decode_reassignments, encode_assignment, state_path,
                                          topic_path)
from odradek.errors import KafkaError
from odradek.cluster.zookeeper import CONTROLLED_SHUTDOWN, CONTROLLER_EPOCH

log = logging.getLogger("odradek.controller")

RETRY_AFTER_FAILURE_S = 0.5
LOST_RACE_PAUSE_S = 0.05  # a conditional write lost: the watches bring the newer view meanwhile
MULTI_OPS_PER_TRANSACTION = 200  # state writes per ZooKeeper multi (~150 bytes each: far below jute.maxbuffer)


def next_state(replicas: list[int], current: PartitionState | None, live: set[int],
               controller_epoch: int, unclean: bool = False) -> PartitionState | None:
    """The state the partition should have, or None when it needs no write. Replicas of brokers that left go out
    of the ISR (Kafka's onReplicasBecomeOffline), except the last member of an offline partition's ISR, and so do
    brokers that are no replica any more (a cancelled reassignment); a leader that left, or that is no replica any
    more, is replaced by a live ISR member, or with `unclean` (unclean.leader.election.enable) by any live
    replica, which may lose records."""
    if current is None:
        alive = [r for r in replicas if r in live]
        return PartitionState(alive[0], 0, alive, controller_epoch) if alive else None
    isr = [r for r in current.isr if r in live and r in replicas]
    if current.leader in live and current.leader in replicas:
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


def bounced_members(current: PartitionState | None, state_zxid: int | None, epochs: dict[int, int]) -> set[int]:
    """The leader and ISR members that registered after the state was written (their epoch is above its zxid)."""
    if current is None or state_zxid is None:
        return set()
    return {r for r in {current.leader, *current.isr} if epochs.get(r, -1) > state_zxid}


def after_bounce(replicas: list[int], current: PartitionState, live: set[int], bounced: set[int],
                 controller_epoch: int) -> PartitionState:
    """The state once the bounced brokers failed and started again: they leave the ISR and the leadership (the
    leader epoch bumped when the leader was one of them), except a sole in-sync replica, which leads again under a
    new leader epoch."""
    wanted = next_state(replicas, current, live - bounced, controller_epoch)
    if wanted is None or wanted.leader == NO_LEADER:
        offline = PartitionState(NO_LEADER, current.leader_epoch, current.isr, controller_epoch)
        wanted = next_state(replicas, offline, live, controller_epoch) or offline
    return wanted


def request_controlled_shutdown(client, node_id: int) -> None:
    """As a broker stopping cleanly: tell the controller to move leadership away (see the module's docstring)."""
    try:
        client.create(f"{CONTROLLED_SHUTDOWN}/{node_id}", b"", ephemeral=True, makepath=True)
    except NodeExistsError:
        pass


class Controller:
    def __init__(self, membership, catalogue, unclean_default: bool = False, auto_rebalance: bool = True,
                 imbalance_check_interval_s: float = 300, imbalance_percentage: int = 10):
        self.membership = membership
        self.unclean_default = unclean_default  # unclean.leader.election.enable of the broker
        self.auto_rebalance = auto_rebalance  # auto.leader.rebalance.enable
        self.imbalance_check_interval_s = imbalance_check_interval_s  # leader.imbalance.check.interval.seconds
        self.imbalance_percentage = imbalance_percentage  # leader.imbalance.per.broker.percentage
        self.catalogue = catalogue
        self._wake = threading.Event()
        self._closed = False
        self._next_rebalance_check = time.monotonic() + imbalance_check_interval_s
        self._thread = threading.Thread(target=self._run, name="odradek-controller", daemon=True)

    def start(self) -> None:
        client = self.membership.client
        self.membership.listeners.append(self.poke)
        self.catalogue.listeners.append(self.poke)
        ChildrenWatch(client, DELETE_TOPICS, lambda children: self.poke())
        for path in (CONTROLLED_SHUTDOWN, ELECT_LEADERS):
            client.ensure_path(path)
            ChildrenWatch(client, path, lambda children: self.poke())
        for path in (PREFERRED_REPLICA_ELECTION, REASSIGN_PARTITIONS):
            DataWatch(client, path, lambda data, stat: self.poke())
        self._thread.start()
        self.poke()

    def poke(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(max(self._next_rebalance_check - time.monotonic(), 0) if self.auto_rebalance else None)
            self._wake.clear()
            if self._closed:
                return
            if not self.membership.is_controller:
                self._next_rebalance_check = time.monotonic() + self.imbalance_check_interval_s
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
        self._take_legacy_reassignments(client)
        live = {broker.node_id for broker in self.membership.live_brokers()}
        available = live - {int(name) for name in client.get_children(CONTROLLED_SHUTDOWN)}
        epochs = self.membership.broker_epochs()
        changing = set()  # partitions given a new state this pass: asked elections wait for the next
        states = []
        for topic in list(self.catalogue.topics.values()):
            for index, assignment in enumerate(topic.partitions):
                known = self.catalogue.state_version(topic.name, index)
                current, version = known if known else (None, None)
                unclean = topic.configs.get("unclean.leader.election.enable", str(self.unclean_default))
                unclean = unclean.lower() == "true"
                bounced = bounced_members(current, self.catalogue.state_zxid(topic.name, index), epochs)
                if bounced:
                    wanted = after_bounce(assignment.replicas, current, available, bounced, epoch)
                    log.info("%s-%d: broker %s restarted since the state was written", topic.name, index,
                             sorted(bounced))
                elif current is not None and current.leader in live:  # alive, perhaps shutting down: never unclean
                    wanted = next_state(assignment.replicas, current, available, epoch)
                    if wanted is not None and wanted.leader == NO_LEADER:  # no one else in sync: leads until it stops
                        wanted = next_state(assignment.replicas, current, live, epoch)
                else:
                    wanted = next_state(assignment.replicas, current, available, epoch, unclean)
                if wanted is not None:
                    changing.add((topic.name, index))
                    states.append((topic.name, index, wanted, version))
        retry = not self._write_states(client, epoch_stat.version, states)
        retry |= self._complete_reassignments(client, epoch, epoch_stat.version, available, changing)
        retry |= self._hold_elections(client, epoch, epoch_stat.version, available, changing)
        if retry:
            threading.Event().wait(LOST_RACE_PAUSE_S)
            self._wake.set()

    def _elect(self, client, epoch: int, epoch_version: int, election_type: int, key: tuple[str, int],
               available: set[int]) -> bool:
        """One asked-for election decided on the controller's view (odradek.cluster.elections.elected); False when
        its write lost a race. A partition that is no more, or needs or allows no election, is decided too."""
        topic = self.catalogue.topics.get(key[0])
        known = self.catalogue.state_version(*key)
        if topic is None or known is None or key[1] >= len(topic.partitions):
            return True
        current, version = known
        try:
            leader, isr = elected(election_type, topic.partitions[key[1]].replicas, current.leader, current.isr,
                                  available)
        except KafkaError as exc:
            log.info("%s-%d: no election (%s)", *key, exc.message)
            return True
        return self._write(client, epoch_version, [(*key, PartitionState(leader, current.leader_epoch + 1, isr,
                                                                         epoch), version)])

    def _hold_elections(self, client, epoch: int, epoch_version: int, available: set[int],
                        changing: set[tuple[str, int]]) -> bool:
        """ElectLeaders' requests (/admin/elect_leaders/*, and Kafka 2.x's /admin/preferred_replica_election), each
        removed once all its partitions are decided, then the auto leader rebalance when it is due. True when some
        write lost a race (the next pass tries again)."""
        requests = [(f"{ELECT_LEADERS}/{name}", client.get(f"{ELECT_LEADERS}/{name}")[0])
                    for name in sorted(client.get_children(ELECT_LEADERS))]
        if client.exists(PREFERRED_REPLICA_ELECTION):
            requests.append((PREFERRED_REPLICA_ELECTION, client.get(PREFERRED_REPLICA_ELECTION)[0]))
        retry = False
        for path, data in requests:
            try:
                election_type, partitions = decode_election(data)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("dropping unreadable %s: %s", path, exc)
                partitions = []
            decided = True
            for key in partitions:
                if key in changing:
                    decided = False
                else:
                    changing.add(key)
                    decided &= self._elect(client, epoch, epoch_version, election_type, key, available)
            if decided:
                self._delete_node(client, path)
            retry |= not decided
        if self.auto_rebalance and time.monotonic() >= self._next_rebalance_check:
            self._next_rebalance_check = time.monotonic() + self.imbalance_check_interval_s
            led = [((topic.name, index), assignment.replicas, assignment.leader, assignment.isr)
                   for topic in list(self.catalogue.topics.values())
                   for index, assignment in enumerate(topic.partitions)
                   if assignment.leader != NO_LEADER and not assignment.reassigning]
            for key in imbalanced_partitions(led, available, self.imbalance_percentage):
                if key not in changing:
                    log.info("%s-%d: leader imbalance; preferred replica election", *key)
                    retry |= not self._elect(client, epoch, epoch_version, PREFERRED_ELECTION, key, available)
        return retry

    def _complete_reassignments(self, client, epoch: int, epoch_version: int, available: set[int],
                                changing: set[tuple[str, int]]) -> bool:
        """Ends the reassignments whose target replicas are all in the ISR (odradek.cluster.elections): the leader
        moves into the target if needed (leader epoch bumped either way, as Kafka's), the removed replicas leave the
        ISR and the replica list, all in one transaction with the topic znode; their brokers then drop their copy.
        True when a write lost a race."""
        retry = False
        for topic in list(self.catalogue.topics.values()):
            states, ended = [], []
            for index, assignment in enumerate(topic.partitions):
                known = self.catalogue.state_version(topic.name, index)
                if not assignment.reassigning or known is None or (topic.name, index) in changing:
                    continue
                current, version = known
                outcome = completed_reassignment(assignment.replicas, assignment.removing_replicas, current.leader,
                                                 current.isr, available)
                if outcome is not None:
                    changing.add((topic.name, index))
                    states.append((topic.name, index, PartitionState(outcome[0], current.leader_epoch + 1,
                                                                     outcome[1], epoch), version))
                    ended.append(index)
            if ended:
                retry |= not self._write(client, epoch_version, states, self._ended_assignment(client, topic.name,
                                                                                                ended))
        return retry

    @staticmethod
    def _ended_assignment(client, name: str, ended: list[int]) -> tuple[str, bytes, int]:
        """(path, data, version) of /brokers/topics/[topic] with the `ended` reassignments done."""
        data, stat = client.get(topic_path(name))
        topic_id, replicas = decode_assignment(data)
        adding, removing = decode_reassignments(data)
        for index in ended:
            replicas[index] = [r for r in replicas[index] if r not in removing.get(index, [])]
            adding.pop(index, None)
            removing.pop(index, None)
        return topic_path(name), encode_assignment(topic_id, replicas, adding, removing), stat.version

    def _take_legacy_reassignments(self, client) -> None:
        """Kafka 2.x's /admin/reassign_partitions ({"version":1,"partitions":[{"topic","partition","replicas"}]}),
        as Kafka 2.4+'s controller takes it: each partition reassigned as AlterPartitionReassignments would, then
        the znode goes."""
        try:
            data, _ = client.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        targets: dict[str, dict[int, list[int]]] = {}
        try:
            for entry in json.loads(data)["partitions"]:
                targets.setdefault(str(entry["topic"]), {})[int(entry["partition"])] = list(entry["replicas"])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("dropping unreadable %s: %s", REASSIGN_PARTITIONS, exc)
        for name, wanted in targets.items():
            for index, outcome in self.catalogue.reassign_partitions(name, wanted).items():
                if outcome is not None:
                    log.warning("%s-%d: reassignment refused: %s", name, index, outcome.message)
        self._delete_node(client, REASSIGN_PARTITIONS)

    def _write_states(self, client, epoch_version: int,
                      states: list[tuple[str, int, PartitionState, int | None]]) -> bool:
        """A pass's independent state changes (a new topic's partitions, a lost broker's): the parent znodes of new
        states created together (pipelined, as Kafka's createTopicPartitions), then transactions of up to
        MULTI_OPS_PER_TRANSACTION writes each, so that a 500-partition topic costs a few round trips rather than
        one transaction per partition. A transaction fails whole when one of its writes lost a race: it is tried
        again without those (RolledBackError marks the others), so one stale partition holds no other back. False
        when some write lost (the next pass, on a newer view, tries it again)."""
        self._create_partition_znodes(client, [(name, index) for name, index, _, version in states if version is None])
        complete = True
        for start in range(0, len(states), MULTI_OPS_PER_TRANSACTION):
            batch = states[start:start + MULTI_OPS_PER_TRANSACTION]
            while batch:
                results = self._commit(client, epoch_version, batch)
                if not any(isinstance(result, Exception) for result in results):
                    break
                if not isinstance(results[0], RolledBackError):
                    return False  # the controller epoch moved: this controller may write nothing more
                complete = False
                batch = [entry for entry, result in zip(batch, results[1:]) if isinstance(result, RolledBackError)]
        return complete

    @staticmethod
    def _create_partition_znodes(client, partitions: list[tuple[str, int]]) -> None:
        """/brokers/topics/[topic]/partitions/[n] of partitions about to get their first state, all requests in
        flight together; those that exist already are fine. Never the topic znode itself: a topic deleted since the
        view was read stays deleted (its state writes then fail, and the next pass no longer sees it)."""
        paths = [f"{topic_path(name)}/partitions" for name in dict.fromkeys(name for name, _ in partitions)]
        paths += [state_path(name, index).rsplit("/", 1)[0] for name, index in partitions]
        pending = [client.create_async(path) for path in paths]  # parents first: one session's requests keep order
        for request in pending:
            try:
                request.get()
            except (NodeExistsError, NoNodeError):
                pass

    def _write(self, client, epoch_version: int, states: list[tuple[str, int, PartitionState, int | None]],
               assignment: tuple[str, bytes, int] | None = None) -> bool:
        """One conditional transaction of state znodes (and perhaps a topic znode); False when it lost a race (the
        view is behind: the next pass sees more)."""
        self._create_partition_znodes(client, [(name, index) for name, index, _, version in states if version is None])
        return not any(isinstance(result, Exception) for result in self._commit(client, epoch_version, states,
                                                                                 assignment))

    @staticmethod
    def _commit(client, epoch_version: int, states: list[tuple[str, int, PartitionState, int | None]],
                assignment: tuple[str, bytes, int] | None = None) -> list:
        """The transaction's results (an exception for each failed operation, the controller epoch's check first),
        logged when it succeeded."""
        transaction = client.transaction()
        transaction.check(CONTROLLER_EPOCH, epoch_version)
        for name, index, state, version in states:
            if version is None:
                transaction.create(state_path(name, index), state.encode())
            else:
                transaction.set_data(state_path(name, index), state.encode(), version=version)
        if assignment is not None:
            transaction.set_data(*assignment)
        results = transaction.commit()
        if not any(isinstance(result, Exception) for result in results):
            for name, index, state, version in states:
                log.info("%s-%d: leader %d, leader epoch %d, isr %s", name, index, state.leader, state.leader_epoch,
                         state.isr)
            if assignment is not None:
                log.info("%s: reassignment done", assignment[0])
        return results

    @staticmethod
    def _delete_node(client, path: str) -> None:
        try:
            client.delete(path)
        except NoNodeError:
            pass

    def _delete(self, client, name: str) -> None:
        for path in (topic_path(name), f"{TOPIC_CONFIGS}/{name}"):
            try:
                client.delete(path, recursive=True)
            except NoNodeError:
                pass
        self._delete_node(client, f"{DELETE_TOPICS}/{name}")
        log.info("deleted topic %s", name)
