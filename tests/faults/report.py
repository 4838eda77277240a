"""The run's figures: faults by kind, operations by outcome, lost writes, the
longest unavailability, and every check's verdict."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .checker import CheckResult
from .nemesis import Fault
from .workload import Op


@dataclass
class Unavailability:
    seconds: float
    start: float
    end: float
    faults: list[str]


def longest_unavailability(ops: list[Op], faults: list[Fault], end: float) -> Unavailability:
    """The longest time no write was acknowledged (from the workload's start to its end)."""
    acks = sorted(op.end for op in ops if op.outcome == "ok")
    best = Unavailability(0.0, 0.0, 0.0, [])
    previous = 0.0
    for t in [*acks, end]:
        if t - previous > best.seconds:
            best = Unavailability(t - previous, previous, t, [])
        previous = t
    best.faults = [
        f"{f.kind} on {f.target} at {f.start:.1f}-{f.end:.1f}s"
        for f in faults
        if f.start < best.end and (f.end or end) > best.start
    ]
    return best


@dataclass
class RunReport:
    seed: int
    duration_s: float
    faults: list[Fault]
    ops: list[Op]
    result: CheckResult
    unavailability: Unavailability
    root: str
    log_sources: dict[int, int]  # voter -> records of the reference log read from it

    @property
    def acknowledged(self) -> int:
        return sum(op.outcome == "ok" for op in self.ops)

    @property
    def unknown(self) -> int:
        return sum(op.outcome == "unknown" for op in self.ops)

    @property
    def lost(self) -> int:
        return len(self.result.lost)

    def format(self) -> str:
        r = self.result
        kinds = Counter(f.kind for f in self.faults)
        by_kind: dict[str, Counter] = {}
        for op in self.ops:
            by_kind.setdefault(op.kind, Counter())[op.outcome] += 1
        u = self.unavailability
        lines = [
            f"nemesis report: seed {self.seed}, {self.duration_s:.0f} s of faults, 3 voters "
            f"(--fsync always), data and logs in {self.root}",
            f"faults injected: {len(self.faults)} "
            + (
                "(" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")" if kinds else ""
            ),
            f"operations: {len(self.ops)}; acknowledged {self.acknowledged}, "
            f"unknown {self.unknown}, lost {self.lost}; divergent images {r.divergent}",
        ]
        readmitted = [
            f.readmitted - f.end for f in self.faults if f.kind == "disk-loss" and f.readmitted
        ]
        if any(f.kind == "disk-loss" for f in self.faults):
            lines.append(
                f"disk losses: {kinds['disk-loss']}, re-admitted as voters {len(readmitted)}"
                + (
                    f", {min(readmitted):.1f}-{max(readmitted):.1f} s after the restart "
                    f"(median {sorted(readmitted)[len(readmitted) // 2]:.1f} s)"
                    if readmitted
                    else ""
                )
            )
        for kind, counts in sorted(by_kind.items()):
            lines.append(
                f"  {kind:16} "
                + ", ".join(f"{o} {counts[o]}" for o in ("ok", "rejected", "unknown") if counts[o])
            )
        for kind, res in sorted(r.unknown_resolution.items()):
            lines.append(
                f"  unknown {kind}: " + ", ".join(f"{k} {n}" for k, n in sorted(res.items()))
            )
        lines.append(
            f"longest unavailability: {u.seconds:.1f} s ({u.start:.1f}-{u.end:.1f}s"
            + (f"; during {'; '.join(u.faults)}" if u.faults else "")
            + ")"
        )
        lines.append(
            f"final log: offsets 0..{r.final_offset}, replay digest {r.replay_digest[:16]}, "
            + ", ".join(f"voter {i} {d[:16] if d else d}" for i, d in r.voter_digests.items())
        )
        lines.append(
            "  reference log read from "
            + ", ".join(f"voter {i} ({n} records)" for i, n in sorted(self.log_sources.items()))
        )
        lines.extend(f"  {note}" for note in r.checks)
        if r.ok:
            lines.append(
                "checks: all passed (log agreement, digests, replay, controller and broker "
                "epochs, KIP-841 at every batch, acknowledged writes, no double apply, every "
                "voter a voter at the end, no voter exited on its own)"
            )
        for check, examples in sorted(r.violations.items()):
            lines.append(f"VIOLATED {check}: {r.counts[check]} time(s)")
            lines.extend(f"  {e}" for e in examples)
        if r.lost:
            lines.append(f"LOST acknowledged writes: {len(r.lost)}")
            lines.extend(f"  {e}" for e in r.lost[:20])
        return "\n".join(lines)
