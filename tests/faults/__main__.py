"""``python -m tests.faults --duration 30m [--seed N] [--dir PATH]``: a long
nemesis run (as root); prints progress and the report, exits 1 on a violation."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from .nemesis import KINDS
from .netns import netns_unavailable_reason
from .run import parse_duration, run_nemesis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__)
    parser.add_argument("--duration", default="5m", help="e.g. 300, 90s, 5m, 30m (default 5m)")
    parser.add_argument(
        "--seed", type=int, help="fault schedule and workload seed (default random)"
    )
    parser.add_argument(
        "--faults",
        default=",".join(KINDS),
        help=f"comma-separated fault kinds to draw from (default all: {','.join(KINDS)})",
    )
    parser.add_argument("--dir", help="where data dirs, voter logs and the history go")
    args = parser.parse_args(argv)
    try:
        duration = parse_duration(args.duration)
    except ValueError as e:
        parser.error(str(e))
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        parser.error(f"--faults {args.faults!r}: choose among {', '.join(KINDS)}")
    why = netns_unavailable_reason()
    if why:
        print(f"cannot run the nemesis: {why}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    root = Path(args.dir or tempfile.mkdtemp(prefix="metaquorum-nemesis-"))
    print(f"seed {seed} (rerun with --seed {seed}); data in {root}", flush=True)
    report = run_nemesis(root, duration, seed, progress=lambda m: print(m, flush=True), kinds=kinds)
    print(report.format(), flush=True)
    return 0 if report.result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
