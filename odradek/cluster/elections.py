"""Leader elections that are asked for (ElectLeaders, the auto leader rebalance) and partition reassignments
(KIP-455): the controller's decisions as plain functions of a partition's replicas, leader, ISR and the live brokers.

The same functions serve the broker that takes the request (it answers ELECTION_NOT_NEEDED or
PREFERRED_LEADER_NOT_AVAILABLE from its view at once, as Kafka's controller does, and knows when an election is in
force) and the controller that makes the write (it decides again on its own, newer view). Nothing here does I/O.

Reassignments are kept as Kafka 2.4+ keeps them in /brokers/topics/[topic]: the full replica set RS = TRS + ORS (the
target, then the original replicas not in it), adding_replicas AR = RS - ORS and removing_replicas RR = RS - TRS; the
target is RS - RR and the original replicas RS - AR, so nothing else needs storing.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.errors import ErrorCode, KafkaError

PREFERRED_ELECTION = 0  # ElectLeaders' election types (Kafka's ElectionType)
UNCLEAN_ELECTION = 1


def elected(election_type: int, replicas: list[int], leader: int, isr: list[int],
            live: set[int]) -> tuple[int, list[int]]:
    """(the new leader, the new ISR) of an asked-for election, as Kafka's controller decides it (KIP-460): a
    preferred election makes the first replica leader if it is live and in the ISR; an unclean one is only for a
    partition whose leader is gone and picks a live ISR member, else any live replica (which may lose records).
    KafkaError: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    if election_type == PREFERRED_ELECTION:
        preferred = replicas[0]
        if leader == preferred:
            raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        if preferred in live and preferred in isr:
            return preferred, list(isr)
        raise KafkaError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                         f"Failed to elect leader under strategy PreferredReplicaPartitionLeaderElectionStrategy: "
                         f"preferred replica {preferred} is {'not in the ISR' if preferred in live else 'not live'}.")
    if election_type == UNCLEAN_ELECTION:
        if leader in live:
            raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        in_sync = [r for r in replicas if r in live and r in isr]
        if in_sync:
            return in_sync[0], [r for r in isr if r in live]
        alive = [r for r in replicas if r in live]
        if alive:
            return alive[0], [alive[0]]
        raise KafkaError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                         "Failed to elect leader under strategy OfflinePartitionLeaderElectionStrategy: "
                         "no replica is live.")
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")


def election_in_force(election_type: int, replicas: list[int], leader: int, live: set[int]) -> bool:
    """Whether the view already shows what an asked-for election wanted (the answer can go)."""
    return leader == replicas[0] if election_type == PREFERRED_ELECTION else leader in live


def imbalanced_partitions(partitions: Iterable[tuple[object, list[int], int, list[int]]], live: set[int],
                          percentage: int) -> list:
    """The keys of the partitions an auto leader rebalance moves back to their preferred replica (Kafka's
    checkAndTriggerAutoLeaderRebalance): for each broker, the share of the partitions it is the preferred replica
    of that another broker leads; above `percentage` per cent, those whose preferred replica is live and in the
    ISR. `partitions`: (key, replicas, leader, isr) of every partition that has a leader and is not being moved."""
    by_preferred: dict[int, list[tuple[object, list[int], int, list[int]]]] = {}
    for entry in partitions:
        by_preferred.setdefault(entry[1][0], []).append(entry)
    chosen = []
    for preferred, entries in by_preferred.items():
        elsewhere = [entry for entry in entries if entry[2] != preferred]
        if preferred in live and len(elsewhere) / len(entries) > percentage / 100:
            chosen += [key for key, replicas, leader, isr in elsewhere if preferred in isr]
    return chosen


def reassigned(replicas: list[int], adding: list[int], removing: list[int],
               target: list[int] | None) -> tuple[list[int], list[int], list[int]]:
    """(RS, AR, RR) after AlterPartitionReassignments asks `target` (Kafka's ReplicaAssignment.reassignTo): a new
    target replaces one in progress, always counted from the original replicas; None cancels, back to the original
    replicas (NO_REASSIGNMENT_IN_PROGRESS when none is under way)."""
    original = [r for r in replicas if r not in adding]
    if target is None:
        if not adding and not removing:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
        return original, [], []
    full = list(dict.fromkeys([*target, *original]))
    return full, [r for r in full if r not in original], [r for r in full if r not in target]


def reassignment_in_force(replicas: list[int], adding: list[int], removing: list[int],
                          target: list[int] | None) -> bool:
    """Whether the view shows what AlterPartitionReassignments asked: `target` as the replicas to be (under way or
    done), or for a cancellation (None) no reassignment."""
    if target is None:
        return not adding and not removing
    return [r for r in replicas if r not in removing] == target


def completed_reassignment(replicas: list[int], removing: list[int], leader: int, isr: list[int],
                           live: set[int]) -> tuple[int, list[int]] | None:
    """(leader, ISR) once every target replica is in the ISR (the reassignment can end: the removed replicas go),
    else None. The leader stays if it is a live target replica, else the first live target replica in the ISR
    leads (Kafka's ReassignPartitionLeaderElectionStrategy)."""
    target = [r for r in replicas if r not in removing]
    if not all(r in isr for r in target):
        return None
    if leader not in target or leader not in live:
        candidates = [r for r in target if r in live]
        if not candidates:
            return None
        leader = candidates[0]
    return leader, [r for r in isr if r in target]
