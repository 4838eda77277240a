"""Wall-clock steps against broker sessions: three voters on loopback, the
leader's wall clock stepped as NTP steps it (tests/hostile/wall_clock.py,
an LD_PRELOAD library that leaves the monotonic clock alone) while brokers
heartbeat every 2 s against a 9 s session. For each step, one broker stops
heartbeating: how long after its last heartbeat it was fenced, and how many
fence records the heartbeating brokers got (figures, not asserts;
tests/hostile/test_wall_clock_steps.py asserts the bounds).

    python bench/clock_steps.py [--steps=0,3600,-3600,60,-60] [--give-up-after 60] [--json]

Each step sets the leader's offset from the true time (not a step from the
last one); write ``--steps=`` with ``=`` when the first one is negative.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile.heartbeating import (  # noqa: E402
    SESSION_S,
    Heartbeats,
    fence_records,
    fenced,
    register_unfenced,
)
from tests.hostile.wall_clock import step_library, stepped_cluster  # noqa: E402

LIVE = (1, 2, 3)


def run(steps: list[int], give_up_s: float) -> list[dict]:
    dead_ids = list(range(10, 10 + len(steps)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="metaquorum-clock-") as tmp:
        root = Path(tmp)
        cluster, clocks = stepped_cluster(root, SESSION_S)
        heartbeats = None
        try:
            cluster.start()
            cluster.wait_ready()
            leader = cluster.leader()
            epochs = {b: register_unfenced(cluster, leader, b) for b in (*LIVE, *dead_ids)}
            heartbeats = Heartbeats(cluster, epochs)
            heartbeats.thread.start()
            cluster.wait(lambda: heartbeats.rounds >= 1, 30, "a first heartbeat round")
            for step_s, dead in zip(steps, dead_ids, strict=True):
                clocks[leader].step(step_s)
                last = heartbeats.stop_one(dead)
                while not fenced(cluster, leader, dead) and time.monotonic() - last < give_up_s:
                    time.sleep(0.05)
                took = time.monotonic() - last if fenced(cluster, leader, dead) else None
                counts = fence_records(cluster, leader, (*LIVE, dead))
                rows.append(
                    {
                        "stepS": step_s,
                        "deadFencedAfterS": None if took is None else round(took, 2),
                        "liveFenceRecords": sum(counts[b] for b in LIVE),
                    }
                )
            rows.append(
                {"problems": heartbeats.problems, "leaderMoved": cluster.leader() != leader}
            )
        finally:
            if heartbeats is not None:
                heartbeats.close()
            cluster.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="0,3600,-3600,60,-60", help="seconds, in order")
    parser.add_argument(
        "--give-up-after", type=float, default=60.0, help="seconds to wait for a fencing"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("cc") is None:
        print("needs a C compiler for tests/hostile/wall_clock_step.c: apt-get install gcc")
        return 2
    step_library()
    steps = [int(s) for s in args.steps.split(",")]
    rows = run(steps, args.give_up_after)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"session {SESSION_S:.0f} s, heartbeats every 2 s, {len(LIVE)} live brokers")
    print(f"{'leader clock step':>18} {'dead broker fenced after':>25} {'live fence records':>19}")
    for row in rows[:-1]:
        took = row["deadFencedAfterS"]
        after = f"{took:.2f} s" if took is not None else f"not in {args.give_up_after:.0f} s"
        print(f"{row['stepS']:>+16d} s {after:>25} {row['liveFenceRecords']:>19d}")
    tail = rows[-1]
    print(f"heartbeat problems: {len(tail['problems'])}; leader moved: {tail['leaderMoved']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
