"""Where a new topic's partitions and replicas go: Kafka's replica assignment (AdminUtils.assignReplicasToBrokers).

Plain functions over broker ids and racks, so the spread is tested without a cluster. Rack-unaware (no broker has
broker.rack): the first replica of partition p is broker (start + p) mod n over the brokers sorted by id, the
others follow at a shift that grows every n partitions, from a random start and shift, so leaders spread evenly
and two topics do not pile their leaders on the same broker. Rack-aware (every broker has broker.rack): the same
walk over the brokers arranged rack by rack in turn (Kafka's getRackAlternatedBrokerList), each further replica
taken from a rack (and a broker) that has none of the partition's replicas yet while there is one. Brokers where
only some have a rack are placed rack-unaware (Kafka would refuse; placing them is the less surprising answer).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from odradek.errors import ErrorCode, KafkaError


def _replica_index(first: int, shift: int, replica: int, brokers: int) -> int:
    return (first + 1 + (shift + replica) % (brokers - 1)) % brokers


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Broker ids ordered one per rack in turn (racks and their brokers sorted): a1, b1, c1, a2, b2, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(racks):
        by_rack.setdefault(racks[broker_id], []).append(broker_id)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[row] for row in range(max(map(len, columns))) for column in columns if row < len(column)]


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, replication_factor: int, *,
                    start_partition: int = 0, start_index: int | None = None,
                    shift: int | None = None) -> list[list[int]]:
    """One replica list per new partition (partition ids start_partition...), leader first. `brokers`: live broker
    id -> rack (None when unset). start_index and shift default to random, as Kafka's."""
    rack_aware = bool(brokers) and all(rack is not None for rack in brokers.values())
    arranged = rack_alternated(brokers) if rack_aware else sorted(brokers)
    count = len(arranged)
    start_index = random.randrange(count) if start_index is None else start_index
    shift = random.randrange(count) if shift is None else shift
    rack_count = len(set(brokers.values())) if rack_aware else 1
    assignment = []
    for partition in range(start_partition, start_partition + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start_index) % count
        replicas = [arranged[first]]
        if not rack_aware:
            replicas += [arranged[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)]
        else:
            racks_used, step = {brokers[arranged[first]]}, 0
            while len(replicas) < replication_factor:
                candidate = arranged[_replica_index(first, shift * rack_count, step, count)]
                step += 1
                if ((brokers[candidate] not in racks_used or len(racks_used) == rack_count)
                        and (candidate not in replicas or len(replicas) == count)):
                    replicas.append(candidate)
                    racks_used.add(brokers[candidate])
        assignment.append(replicas)
    return assignment


def check_replication_factor(replication_factor: int, live_brokers: Sequence[int]) -> None:
    """Kafka's refusal of a factor above the live brokers (InvalidReplicationFactorException)."""
    if replication_factor > len(live_brokers):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: "
                         f"{len(live_brokers)}.")
