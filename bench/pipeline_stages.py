"""Where a cold `metaquorum audit` spends its time: runs the command as a user
does (its own process, JVM start included) with Spark's event log on, then
reads the log back and prints each job (named by the audit's job
descriptions), its wall time, its tasks' run time, shuffles and spills.

    .venv/bin/python bench/pipeline_stages.py --input LOG [--master local[2]] [--conf K=V ...]

Figures, not asserts; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict


def _lines(path: str):
    """An event log's lines: one file, or a rolling log's directory (Spark 4's default)."""
    files = sorted(glob.glob(os.path.join(path, "events_*"))) if os.path.isdir(path) else [path]
    for name in files:
        with open(name) as f:
            yield from f


def read_events(path: str) -> dict:
    jobs: dict[int, dict] = {}
    stages: dict[int, dict] = {}
    tasks: dict[int, dict] = defaultdict(lambda: defaultdict(int))
    for line in _lines(path):
        e = json.loads(line)
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            jobs[e["Job ID"]] = {
                "start": e["Submission Time"],
                "desc": props.get("spark.job.description") or "",
                "stages": e["Stage IDs"],
            }
        elif kind == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            stages[info["Stage ID"]] = {
                "name": info["Stage Name"],
                "tasks": info["Number of Tasks"],
                "ms": (info.get("Completion Time") or 0) - (info.get("Submission Time") or 0),
                "skipped": info.get("Submission Time") is None,
            }
        elif kind == "SparkListenerTaskEnd":
            m = e.get("Task Metrics") or {}
            t = tasks[e["Stage ID"]]
            t["run_ms"] += m.get("Executor Run Time", 0)
            t["gc_ms"] += m.get("JVM GC Time", 0)
            t["spill"] += m.get("Disk Bytes Spilled", 0)
            t["shuffle_w"] += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
            read = m.get("Shuffle Read Metrics") or {}
            t["shuffle_r"] += read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0)
            t["in"] += (m.get("Input Metrics") or {}).get("Records Read", 0)
    return {"jobs": jobs, "stages": stages, "tasks": tasks}


def summarize(events: dict) -> None:
    jobs, stages, tasks = events["jobs"], events["stages"], events["tasks"]
    by_desc: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for job in jobs.values():
        d = by_desc[job["desc"] or "(no description)"]
        d["jobs"] += 1
        d["wall_ms"] += job.get("end", job["start"]) - job["start"]
        for s in job["stages"]:
            if s in stages and not stages[s]["skipped"]:
                d["stages"] += 1
                d["tasks"] += stages[s]["tasks"]
                for k in ("run_ms", "gc_ms", "spill", "shuffle_w", "shuffle_r"):
                    d[k] += tasks[s][k]
    print(
        "| step | jobs | stages | tasks | jobs' wall s | tasks' run s | GC s | shuffle written MB | spilled MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    total = defaultdict(float)
    for desc, d in by_desc.items():
        print(
            f"| {desc} | {d['jobs']:.0f} | {d['stages']:.0f} | {d['tasks']:.0f} | "
            f"{d['wall_ms'] / 1000:.1f} | {d['run_ms'] / 1000:.1f} | {d['gc_ms'] / 1000:.1f} | "
            f"{d['shuffle_w'] / 1e6:.1f} | {d['spill'] / 1e6:.1f} |"
        )
        for k, v in d.items():
            total[k] += v
    print(
        f"| total | {total['jobs']:.0f} | {total['stages']:.0f} | {total['tasks']:.0f} | "
        f"{total['wall_ms'] / 1000:.1f} | {total['run_ms'] / 1000:.1f} | "
        f"{total['gc_ms'] / 1000:.1f} | {total['shuffle_w'] / 1e6:.1f} | {total['spill'] / 1e6:.1f} |"
    )


def top_stages(events: dict, n: int = 15) -> None:
    jobs, stages, tasks = events["jobs"], events["stages"], events["tasks"]
    desc = {s: job["desc"] for job in jobs.values() for s in job["stages"]}
    ranked = sorted(stages, key=lambda s: -stages[s]["ms"])[:n]
    print(
        "\n| stage | step | tasks | wall s | tasks' run s | shuffle written MB | spilled MB | call site |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    for s in ranked:
        st, t = stages[s], tasks[s]
        print(
            f"| {s} | {desc.get(s, '')} | {st['tasks']} | {st['ms'] / 1000:.1f} | "
            f"{t['run_ms'] / 1000:.1f} | {t['shuffle_w'] / 1e6:.1f} | {t['spill'] / 1e6:.1f} | "
            f"{st['name'][:60]} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", help="an export directory")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--events", help="only read this event log (no audit run)")
    args = ap.parse_args()
    if args.events:
        events = read_events(args.events)
        summarize(events)
        top_stages(events)
        return
    events = tempfile.mkdtemp(prefix="mq-events-")
    out = tempfile.mkdtemp(prefix="mq-audit-out-")
    cmd = [
        sys.executable, "-c", "import sys; from metaquorum.cli import main; sys.exit(main())",
        "audit", "--input", args.input, "--output", out, "--master", args.master,
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{events}",
        "--conf", "spark.eventLog.compress=false",
    ]  # fmt: skip
    for c in args.conf:
        cmd += ["--conf", c]
    load = os.getloadavg()[0]
    t = time.perf_counter()
    subprocess.run(cmd, check=False)
    wall = time.perf_counter() - t
    print(f"\ncommand wall {wall:.1f} s (load average {load:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end)\n")  # fmt: skip
    for path in glob.glob(os.path.join(events, "*")):
        found = read_events(path)
        summarize(found)
        top_stages(found)


if __name__ == "__main__":
    main()
