"""A lost majority recovered with ``metaquorum recover``: how long it takes and
how much memory it needs at N partitions (figures, not asserts;
metaquorum/recover.py, docs/durability.md "Recovering from a lost majority").

Three voters as real ``metaquorum serve`` processes on loopback (``--fsync
always``), loaded with N partitions (``--partitions``, default 100,000;
bench/disk_replace.py's load). Then the two followers are SIGKILLed and
their data dirs deleted, the leader is stopped, and it prints:

* ``recover``: the wall time of ``metaquorum recover --yes`` on the survivor's
  data dir (read and replay to the commit index, the image digest, the
  seeded data dir written and synced, the old files moved aside), and the
  peak RSS of that process;
* ``snapshot``: the size of the seeded snapshot;
* ``first write``: from starting the recovered voter with its usual flags to
  the first acknowledged write (it loads the image and leads alone);
* ``add-voter``: one new voter with an empty data dir added (it catches up
  through a snapshot install).

    python bench/recover.py [--partitions N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import disk_replace  # noqa: E402 - bench/disk_replace.py, after the path is set

from tests.cluster import Cluster  # noqa: E402


def run(partitions: int, directory: str) -> dict:
    c = Cluster(
        Path(directory), voters=3, fsync="always", extra=["--session-timeout-ms", "3600000"]
    )
    figures: dict = {"partitions": partitions}
    try:
        c.start()
        s = c.leader(timeout_s=120)
        disk_replace.progress(f"loading {partitions:,} partitions")
        disk_replace.load(c, partitions)
        s = c.leader(timeout_s=120)
        for i in range(3):
            if i != s:
                c.kill(i)
                shutil.rmtree(c.data_dir(i))
        c.stop(s, timeout_s=120)
        disk_replace.progress("recover --yes on the survivor")
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "metaquorum.cli", "recover", "--yes",
             "--data-dir", str(c.data_dir(s))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        # Its own rusage (the voters are children too); its output fits a pipe.
        _, status, usage = os.wait4(proc.pid, 0)
        figures["recover_s"] = round(time.perf_counter() - started, 2)
        code, err = os.waitstatus_to_exitcode(status), proc.stderr.read().decode()
        proc.returncode = code
        if code != 0:
            raise RuntimeError(f"recover exited {code}: {err}")
        disk_replace.progress(proc.stdout.read().decode().splitlines()[1].strip())
        figures["recover_peak_rss_mib"] = round(usage.ru_maxrss / 1024, 1)
        figures["snapshot_mib"] = round(
            os.path.getsize(c.data_dir(s) / "raft.snapshot") / (1 << 20), 1
        )
        disk_replace.progress("starting the recovered voter")
        started = time.perf_counter()
        c.start(s)
        c.leader(among=[s], timeout_s=300)
        with httpx.Client(timeout=60, trust_env=False) as client:
            r = client.post(
                c.url(s) + "/v1/brokers/register",
                json=disk_replace.register_body(c.cluster_id, 100),
            )
            assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text
        figures["first_write_s"] = round(time.perf_counter() - started, 2)
        disk_replace.progress("adding a voter with an empty data dir")
        j = c.add_node()
        c.start(j)
        started = time.perf_counter()
        with httpx.Client(timeout=660, trust_env=False) as client:
            body = {"nodeId": j, "address": c.raft_address(j), "timeoutMs": 600_000}
            r = client.post(c.url(s) + "/v1/quorum/add-voter", json=body)
            assert r.status_code == 200, r.text
        figures["add_voter_s"] = round(time.perf_counter() - started, 2)
    finally:
        c.close()
    return figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-recover-") as directory:
        figures = run(args.partitions, directory)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:>22}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
