"""Server-side partition assignors for KIP-848 consumer groups: "uniform" (the default) and "range".

Pure functions from (each member's subscribed topics, the topics' ids and partition counts, the current target) to
a new target assignment, so the group state machine can call them synchronously and tests can check the shape of
their answers directly. An assignment maps member id -> {topic id: set of partition indexes}.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import NamedTuple

Assignment = dict[uuid.UUID, set[int]]


class TopicInfo(NamedTuple):
    topic_id: uuid.UUID
    partitions: int


def uniform(subscriptions: Mapping[str, set[str]], topics: Mapping[str, TopicInfo],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Spread partitions so member counts differ by at most one where subscriptions allow, moving as few as
    possible: partitions stay with their previous owner while it is still subscribed and not over its share."""
    owners: dict[tuple[uuid.UUID, int], str] = {}
    candidates: dict[tuple[uuid.UUID, int], list[str]] = {}
    for name, info in sorted(topics.items()):
        subscribers = sorted(m for m, wanted in subscriptions.items() if name in wanted)
        for index in range(info.partitions):
            if subscribers:
                candidates[(info.topic_id, index)] = subscribers
    load = {member: 0 for member in subscriptions}
    for member, assignment in sorted(previous.items()):
        if member not in load:
            continue
        for topic_id, indexes in assignment.items():
            for index in sorted(indexes):
                if member in candidates.get((topic_id, index), ()) and (topic_id, index) not in owners:
                    owners[(topic_id, index)] = member
                    load[member] += 1
    for partition, members in candidates.items():
        if partition not in owners:
            owner = min(members, key=lambda m: (load[m], m))
            owners[partition] = owner
            load[owner] += 1
    moved = True
    while moved:
        moved = False
        for partition, owner in sorted(owners.items(), key=lambda item: -load[item[1]]):
            target = min(candidates[partition], key=lambda m: (load[m], m))
            if load[owner] - load[target] > 1:
                owners[partition] = target
                load[owner] -= 1
                load[target] += 1
                moved = True
    return _by_member(owners, subscriptions)


def range_(subscriptions: Mapping[str, set[str]], topics: Mapping[str, TopicInfo],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, its subscribers in member-id order each take a contiguous run of partitions; the first
    (partitions % subscribers) take one extra."""
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for name, info in topics.items():
        subscribers = sorted(m for m, wanted in subscriptions.items() if name in wanted)
        if not subscribers:
            continue
        share, extra = divmod(info.partitions, len(subscribers))
        start = 0
        for position, member in enumerate(subscribers):
            count = share + (1 if position < extra else 0)
            for index in range(start, start + count):
                owners[(info.topic_id, index)] = member
            start += count
    return _by_member(owners, subscriptions)


ASSIGNORS = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"


def _by_member(owners: Mapping[tuple[uuid.UUID, int], str], members) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {member: {} for member in members}
    for (topic_id, index), member in owners.items():
        result[member].setdefault(topic_id, set()).add(index)
    return result
