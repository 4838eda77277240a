"""What this machine's disk does to a journal, without metaquorum (figures,
not asserts).

Three processes (three voters' worth) each append to a file of their own in
the data directory's filesystem and ``fdatasync`` it, as a voter's journal
does: a small write into preallocated zeros, then a sync, a few hundred times
a second. Printed: each writer's sync latency p50/p99, and the stalls (syncs
of 100 ms or more), with the moments they ended, so that stalls every writer
saw at once (the disk or its host) stand apart from one writer's.

Read it next to ``bench/quorum.py`` and ``bench/api.py``: every commit waits
for a journal sync on a majority, so when this probe shows stalls every few
seconds on all writers at once, no majority can commit during them, whatever
metaquorum does.

    python bench/disk.py [--seconds S] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

WRITERS = 3
FILE_BYTES = 64 << 20
WRITE_BYTES = 5_000  # one batch of 100 small records
PAUSE_S = 0.002  # a voter between two appends
STALL_S = 0.1  # what the voters log as a slow journal sync


def writer(path: str, seconds: float, ready, start, results) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.pwrite(fd, bytes(FILE_BYTES), 0)  # allocated, as the journal's room
        os.fdatasync(fd)
        ready.put(True)
        start.wait()
        began = time.time()
        latencies, stalls, offset = [], [], 0
        data = os.urandom(WRITE_BYTES)
        while time.time() - began < seconds:
            os.pwrite(fd, data, offset)
            offset = (offset + WRITE_BYTES) % (FILE_BYTES - WRITE_BYTES)
            t = time.perf_counter()
            os.fdatasync(fd)
            took = time.perf_counter() - t
            latencies.append(took)
            if took >= STALL_S:
                stalls.append((round(time.time() - began, 2), round(took * 1000)))
            time.sleep(PAUSE_S)
        latencies.sort()
        results.put(
            {
                "syncs": len(latencies),
                "p50_ms": latencies[len(latencies) // 2] * 1000,
                "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
                "stalls": stalls,
            }
        )
    finally:
        os.close(fd)
        os.unlink(path)


def probe(directory: str, seconds: float) -> list[dict]:
    ready, results, start = mp.Queue(), mp.Queue(), mp.Event()
    procs = [
        mp.Process(
            target=writer,
            args=(os.path.join(directory, f"disk-probe-{i}"), seconds, ready, start, results),
        )
        for i in range(WRITERS)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        start.set()
        out = [results.get(timeout=seconds + 120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return out


def shared(figures: list[dict], within_s: float = 0.05) -> int:
    """Stalls of writer 0 that ended within ``within_s`` of one on every other
    writer (a stall ends for all when the disk answers again)."""
    first, *others = [f["stalls"] for f in figures]
    return sum(
        all(any(abs(at - o_at) <= within_s for o_at, _ in other) for other in others)
        for at, _ in first
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--dir", default=tempfile.gettempdir(), help="a directory on the disk to probe"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        print(f"bench/disk.py: --dir {args.dir!r} is not a directory", file=sys.stderr)
        return 2
    print(
        f"[bench] {WRITERS} writers, {WRITE_BYTES:,} B then fdatasync every ~{PAUSE_S * 1000:g} ms, "
        f"in {args.dir}, for {args.seconds:g} s",
        file=sys.stderr,
        flush=True,
    )
    figures = probe(args.dir, args.seconds)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"-- disk probe: {WRITERS} journal-like writers in {args.dir}, {args.seconds:g} s")
    for i, f in enumerate(figures):
        worst = max((ms for _, ms in f["stalls"]), default=0)
        print(
            f"  writer {i}: {f['syncs']:,} syncs  p50 {f['p50_ms']:.2f} ms  p99 {f['p99_ms']:.2f} ms  "
            f"stalls >= {STALL_S * 1000:g} ms: {len(f['stalls'])}"
            + (f" (worst {worst} ms)" if worst else "")
        )
    stalls = figures[0]["stalls"]
    if stalls:
        print(
            "  stalls of writer 0 (s from start, ms): "
            + ", ".join(f"{a}s {ms}" for a, ms in stalls)
        )
        print(
            f"  {shared(figures)} of them ended on every writer within 50 ms: the disk (or its "
            "host) stalled, not one process"
        )
    else:
        print("  no stall: syncs that slow are this disk's exceptions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
