"""Replica placement for new partitions: Kafka's striped, rack-alternating
assignment (``AdminUtils.assignReplicasToBrokers``), made deterministic.

The start position comes from the caller (the partition count of the image),
so the same image and request always give the same assignment, and successive
topics start their leaders on different brokers.
"""

from __future__ import annotations

from collections.abc import Sequence


class PlacementError(Exception):
    pass


def rack_alternated(brokers: Sequence[tuple[int, str | None]]) -> list[int]:
    """Broker ids ordered so that neighbours sit on different racks where possible."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id, rack in sorted(brokers, key=lambda b: b[0]):
        by_rack.setdefault(rack, []).append(broker_id)
    racks = sorted(by_rack, key=lambda r: (r is None, r or ""))
    out: list[int] = []
    for i in range(max((len(v) for v in by_rack.values()), default=0)):
        for rack in racks:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
    return out


def place(
    usable: Sequence[tuple[int, str | None]],
    registered_count: int,
    num_partitions: int,
    replication_factor: int,
    start: int,
    first_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``first_partition .. first_partition+num_partitions-1``.

    ``usable`` are the unfenced brokers (id, rack). Raises PlacementError with
    Kafka's wording when the replication factor cannot be met.
    """
    n = len(usable)
    if n == 0:
        raise PlacementError(
            f"Unable to replicate the partition {replication_factor} time(s): "
            "All brokers are currently fenced."
        )
    if replication_factor > n:
        raise PlacementError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{n} broker(s) are unfenced ({registered_count} registered)."
        )
    brokers = rack_alternated(usable)
    start %= n
    out = []
    for p in range(first_partition, first_partition + num_partitions):
        first = (start + p) % n
        shift = (start + p) // n  # moves followers each time the leaders wrap around
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(tuple(replicas))
    return out
