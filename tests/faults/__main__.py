"""A long nemesis run, as root: ``python -m tests.faults --duration 30m [--seed N]
[--faults K,...] [--first K,...] [--interval 10-20] [--hold 3-8] [--flap 10-30]
[--dir PATH]``. Prints progress
and the report; exits 1 on a violation."""

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
    parser.add_argument(
        "--first", default="", help="comma-separated kinds of the first faults, in order"
    )
    parser.add_argument(
        "--flap", default="10-30", help="seconds a flapping-link fault lasts (10-30)"
    )
    parser.add_argument("--interval", default="10-20", help="seconds between faults (10-20)")
    parser.add_argument("--hold", default="3-8", help="seconds each fault lasts (3-8)")
    parser.add_argument("--dir", help="where data dirs, voter logs and the history go")
    args = parser.parse_args(argv)
    try:
        duration = parse_duration(args.duration)
    except ValueError as e:
        parser.error(str(e))
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    first = tuple(k.strip() for k in args.first.split(",") if k.strip())
    unknown = [k for k in (*kinds, *first) if k not in KINDS]
    if unknown or not kinds:
        parser.error(f"fault kinds {unknown or kinds}: choose among {', '.join(KINDS)}")
    interval, hold, flap = (
        _range(parser, "--interval", args.interval),
        _range(parser, "--hold", args.hold),
        _range(parser, "--flap", args.flap),
    )
    why = netns_unavailable_reason()
    if why:
        print(f"cannot run the nemesis: {why}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    root = Path(args.dir or tempfile.mkdtemp(prefix="metaquorum-nemesis-"))
    print(f"seed {seed} (rerun with --seed {seed}); data in {root}", flush=True)
    report = run_nemesis(
        root, duration, seed, lambda m: print(m, flush=True), kinds, interval, hold, first, flap
    )
    print(report.format(), flush=True)
    return 0 if report.result.ok else 1


def _range(parser: argparse.ArgumentParser, flag: str, text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    try:
        bounds = (float(low), float(high or low))
    except ValueError:
        parser.error(f"{flag} {text!r}: expected seconds as LOW-HIGH, e.g. 10-20")
    if not 0 < bounds[0] <= bounds[1]:
        parser.error(f"{flag} {text!r}: expected 0 < LOW <= HIGH")
    return bounds


if __name__ == "__main__":
    sys.exit(main())
