"""The run's figures: faults by kind, operations by outcome, lost writes, the
longest unavailability, and every check's verdict."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .checker import CheckResult
from .nemesis import MEMBERSHIP, WATCHED, Fault
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
    log_sources: dict[int, int]  # slot -> records of the reference log read from it
    voters: list[int] = field(default_factory=lambda: [0, 1, 2])  # node ids at the end

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
            f"nemesis report: seed {self.seed}, {self.duration_s:.0f} s of faults, voters at "
            f"the end {self.voters} (--fsync always), data and logs in {self.root}",
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
        lines.extend(self.membership_lines())
        lines.extend(self.watched_lines())
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
            + ", ".join(f"slot {i} ({n} records)" for i, n in sorted(self.log_sources.items()))
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

    def membership_lines(self) -> list[str]:
        """Membership changes: how many, done, and how long each took."""
        changes = [f for f in self.faults if f.kind in MEMBERSHIP]
        if not changes:
            return []
        took = sorted(f.took for f in changes if f.took is not None)
        lines = [
            f"membership changes: {len(changes)}, done {len(took)}"
            + (
                f", {took[0]:.1f}-{took[-1]:.1f} s from the first request to done "
                f"(median {took[len(took) // 2]:.1f} s)"
                if took
                else ""
            )
        ]
        for kind in MEMBERSHIP:
            mine = [f for f in changes if f.kind == kind]
            if mine:
                lines.append(
                    f"  {kind:16} "
                    + ", ".join(
                        f"{f.took:.1f} s"
                        if f.took is not None
                        else "cut short"
                        if f.cut_short
                        else "NOT done"
                        for f in mine
                    )
                )
        return lines

    def watched_lines(self) -> list[str]:
        """Leader changes during (and just after) each single-follower cut and
        flapping link: pre-vote should keep them at 0."""
        lines = []
        for kind in WATCHED:
            mine = [f for f in self.faults if f.kind == kind and f.leaders is not None]
            if not mine:
                continue
            changes = [f.leader_changes for f in mine]
            lines.append(
                f"leader changes during {kind}: {sum(changes)} in {len(mine)} fault(s) "
                f"({', '.join(str(n) for n in changes)})"
            )
            for f in mine:
                if f.leader_changes:
                    lines.append(
                        f"  {f.start:.1f}-{f.end:.1f}s on {f.target}: (s, leader, term) {f.leaders}"
                    )
        return lines
