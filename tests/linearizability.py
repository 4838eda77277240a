"""A linearizability check for histories of versioned registers.

Every key metaquorum is asked about here is a register whose writes install
a version that only grows: a broker's epoch (the offset of its
RegisterBrokerRecord), a partition's epoch (each PartitionChangeRecord adds
one). For such a register, a history is linearizable exactly when, per key:

1. a read returns a version no older than every write acknowledged before
   the read began (no stale read);
2. a read returns a version some write began before the read ended, or the
   initial one (no read from the future); for a version no acknowledgement
   named, some write with an unknown outcome must have begun before then;
3. a read that ended before another began returned no newer version (reads
   do not go back in time);
4. a write acknowledged before another began installed a lower version, and
   a read that ended before a write began saw a lower version than it.

Why these suffice: order the operations by version, each read right after
the write whose version it returned (reads of one version by their start
time). Versions are unique per write and 1-4 say this order never puts an
operation before one that ended before it began, so it is a linearization;
and a register's sequential specification is exactly "a read returns the
last write's version". This is the per-key argument the Wing-Gong search
would make, written as code; ``check`` returns every violation it finds.
"""

from __future__ import annotations

from dataclasses import dataclass

INF = float("inf")


@dataclass(frozen=True)
class Op:
    key: object
    kind: str  # "write" or "read"
    start: float  # when the client sent it (monotonic)
    end: float  # when the client had the answer; INF for a write of unknown outcome
    version: int | None  # what the write installed / the read saw; None: unknown / absent


@dataclass(frozen=True)
class Violation:
    key: object
    rule: str
    ops: tuple[Op, ...]

    def __str__(self) -> str:
        return f"key {self.key}: {self.rule}: " + "; ".join(
            f"{o.kind} [{o.start:.4f}, {o.end:.4f}] -> {o.version}" for o in self.ops
        )


def check(history: list[Op], initial: int | None = None) -> list[Violation]:
    by_key: dict[object, list[Op]] = {}
    for op in history:
        by_key.setdefault(op.key, []).append(op)
    violations: list[Violation] = []
    for key, ops in by_key.items():
        violations.extend(_check_key(key, ops, initial))
    return violations


def _newer(a: int | None, b: int | None) -> bool:
    """a is a later version than b (None: absent, older than any)."""
    return a is not None and (b is None or a > b)


def _check_key(key: object, ops: list[Op], initial: int | None) -> list[Violation]:
    out: list[Violation] = []
    writes = [o for o in ops if o.kind == "write"]
    acked = [w for w in writes if w.end != INF and w.version is not None]
    unknown = [w for w in writes if w.end == INF or w.version is None]
    reads = [o for o in ops if o.kind == "read"]
    written_by = {w.version: w for w in acked}
    for r in reads:
        before = [w for w in acked if w.end < r.start]
        if before:
            last = max(before, key=lambda w: w.version)
            if _newer(last.version, r.version):
                out.append(Violation(key, "stale read", (last, r)))
        if r.version is None or r.version == initial:
            continue
        source = written_by.get(r.version)
        if source is not None:
            if source.start > r.end:
                out.append(Violation(key, "read from the future", (source, r)))
        elif not any(w.start < r.end for w in unknown):
            out.append(Violation(key, "read of a version no write made", (r,)))
    ordered = sorted(reads, key=lambda o: o.end)
    for r1 in ordered:
        for r2 in reads:
            if r1.end < r2.start and _newer(r1.version, r2.version):
                out.append(Violation(key, "a later read saw an older version", (r1, r2)))
    for w1 in acked:
        for w2 in acked:
            if w1.end < w2.start and not w1.version < w2.version:
                out.append(Violation(key, "a later write installed an older version", (w1, w2)))
        for r in reads:
            if r.end < w1.start and not _newer(w1.version, r.version):
                out.append(Violation(key, "a read saw a write that began after it", (r, w1)))
    return out
