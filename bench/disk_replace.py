"""Disk replacement: how long a voter whose data dir was deleted (a replaced
PVC) takes to be whole again, and what a writer sees meanwhile (figures, not
asserts; quorum/voter_guard.py, docs/decisions.md 37 and 52).

Three voters as real ``metaquorum serve`` processes on loopback (``--fsync
always``), loaded with N partitions (``--partitions``, default 1,000,000, in
CreatePartitions requests of 10,000; then writes until the log is compacted,
at ``--compaction-entries``, so the wiped voter gets a snapshot). A writer
registers a broker every ``--write-interval-ms`` through the leader all along.
Each round SIGKILLs a follower, deletes its data dir and starts it again with
the same command line, and polls it to print the time from its restart to:

* ``answering``: its HTTP API answers (the process is up, its log empty);
* ``snapshot``: its image holds the loaded partitions (the leader's snapshot
  is installed and loaded);
* ``caught up``: it has applied the leader's commit index as read just
  before (the writer keeps that moving);
* ``voter``: it says ``role: voter`` (the leader named its new directory in
  the voter set).

and the longest gap between two acknowledged writes from the kill to the
re-admission. Then, with N partitions still loaded, bench/quorum_loss.py's
rounds: the time from losing the majority to the first 503 (a follower
survivor, then a leader survivor).

    python bench/disk_replace.py [--partitions N] [--rounds R] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import quorum_loss  # noqa: E402 - bench/quorum_loss.py, after the path is set

from tests.cluster import Cluster  # noqa: E402

PER_REQUEST = 10_000  # controller/topic_control.py MAX_PARTITIONS_PER_REQUEST
FIRST = PER_REQUEST - 1  # the new topic's TopicRecord counts too (controller/record_cap.py)
MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]
LIMIT_S = 180.0  # a wiped voter not re-admitted within this is reported as such


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def register_body(cluster_id: str, broker: int) -> dict:
    return {
        "brokerId": broker,
        "clusterId": cluster_id,
        "incarnationId": str(uuid.uuid4()),
        "listeners": [],
        "features": MV,
    }


def load(cluster: Cluster, partitions: int, per_topic: int | None = None, brokers: int = 3) -> int:
    """``brokers`` brokers, unfenced, and ``partitions`` partitions, RF 3: one
    topic ``big`` (``per_topic`` None), else topics ``t0000``, ... of
    ``per_topic`` partitions each (the last the rest). Survives a leader
    change (three voters snapshotting a large image at once on two cores can
    hold a leader up past the election timeout): on an answer other than
    NONE it waits for a leader and goes on from the partition count its topic
    reports. Returns the leader changes seen."""
    changes = 0
    with httpx.Client(timeout=300, follow_redirects=True, trust_env=False) as c:

        def post(path: str, body: dict) -> dict:
            url = cluster.url(cluster.leader(timeout_s=120)) + path
            return c.post(url, json=body).json()

        epochs = {}
        for b in range(1, brokers + 1):
            epochs[b] = post("/v1/brokers/register", register_body(cluster.cluster_id, b))[
                "brokerEpoch"
            ]
        for b, e in epochs.items():
            post(
                "/v1/brokers/heartbeat",
                {"brokerId": b, "brokerEpoch": e, "currentMetadataOffset": 10**12},
            )
        done, t0, shown, n = 0, time.monotonic(), 0.0, 0
        while done < partitions:
            size = partitions - done if per_topic is None else min(per_topic, partitions - done)
            name = "big" if per_topic is None else f"t{n:04d}"
            have = _create(cluster, post, name, min(size, FIRST))
            while have < size:
                count = min(size, have + PER_REQUEST)
                try:
                    r = post(f"/v1/topics/{name}/partitions", {"count": count})
                except httpx.HTTPError as e:
                    r = {"errorName": repr(e)}
                if r["errorName"] == "NONE":
                    have = count
                else:
                    changes += 1
                    have = _after_refusal(cluster, r, name, have)
            done += size
            n += 1
            if time.monotonic() - shown > 10 or done == partitions:
                shown = time.monotonic()
                rate = done / (shown - t0)
                progress(f"loaded {done:,} of {partitions:,} partitions ({rate:,.0f}/s)")
    return changes


def _create(cluster: Cluster, post, name: str, count: int) -> int:
    """Creates topic ``name`` of ``count`` partitions (again after a leader
    change, until it exists); returns its partitions."""
    while True:
        try:
            r = post(
                "/v1/topics",
                {"topics": [{"name": name, "numPartitions": count, "replicationFactor": 3}]},
            )["topics"][0]
        except httpx.HTTPError as e:
            r = {"errorName": repr(e)}
        if r["errorName"] in ("NONE", "TOPIC_ALREADY_EXISTS"):
            return topic_partitions(cluster, name) or count
        _after_refusal(cluster, r, name, 0)


def _after_refusal(cluster: Cluster, answer: dict, name: str, have: int) -> int:
    leader = cluster.leader(timeout_s=120)
    cluster.wait(lambda leader=leader: cluster.ready(leader), 120, "leader ready")
    have = topic_partitions(cluster, name) or have
    progress(f"{answer['errorName']} during the load; going on from {have:,} of {name}")
    return have


def topic_partitions(cluster: Cluster, name: str) -> int | None:
    """How many partitions topic ``name`` has, as the leader says."""
    try:
        r = cluster.get(cluster.leader(timeout_s=120), f"/v1/topics/{name}", timeout=60)
    except httpx.HTTPError:
        return None
    return len(r.json()["partitions"]) if r.status_code == 200 else None


def compact(cluster: Cluster, partitions: int) -> int:
    """Writes until every voter has written a snapshot holding the loaded
    partitions (its log says so), so the leader sends a wiped voter a snapshot,
    not its log, and a restarted one loads its own; returns the writes."""
    writes = 0
    marks = [cluster.logs[i].stat().st_size for i in range(cluster.n)]
    # A snapshot of them started, then one written (a voter writes one at a
    # time): a voter killed mid-write has none, and replays its journal.
    pattern = re.compile(
        r"snapshot at offset \d+ \((\d+) partitions\)(?:.|\n)*?snapshot written in"
    )

    def snapshotted(i: int) -> bool:
        with open(cluster.logs[i], errors="replace") as f:
            f.seek(marks[i])
            return any(int(n) >= partitions for n in pattern.findall(f.read()))

    with httpx.Client(timeout=30, follow_redirects=True, trust_env=False) as c:
        while not all(snapshotted(i) for i in range(cluster.n)):
            url = cluster.url(cluster.leader(timeout_s=120)) + "/v1/brokers/register"
            for _ in range(20):
                try:
                    c.post(url, json=register_body(cluster.cluster_id, 50_000 + writes))
                except httpx.HTTPError:
                    break
                writes += 1
    return writes


class Writer:
    """Registers a broker every ``interval_s``, as a client would: through the voter
    that answered last (the leader, redirects followed), moving on to the next
    voter when one fails; keeps the time of each acknowledgement. (Not round
    robin: one thread waiting on a voter that is loading a snapshot would
    measure that voter, not the cluster.)"""

    def __init__(self, cluster: Cluster, leader: int, interval_s: float) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.target = leader
        self.acks: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        broker = 100_000
        with httpx.Client(timeout=5.0, trust_env=False) as http:
            while not self._stop.wait(self.interval_s):
                broker += 1
                url = self.cluster.url(self.target) + "/v1/brokers/register"
                try:
                    r = http.post(
                        url,
                        json=register_body(self.cluster.cluster_id, broker),
                        follow_redirects=True,
                    )
                    ok = r.status_code == 200 and r.json().get("errorName") == "NONE"
                except httpx.HTTPError:
                    ok = False
                if ok:
                    self.acks.append(time.monotonic())
                else:
                    self.failed += 1
                    self.target = (self.target + 1) % self.cluster.n

    def longest_gap(self, start: float, end: float) -> float:
        times = [start, *(t for t in self.acks if start < t < end), end]
        return max(b - a for a, b in zip(times, times[1:], strict=False))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def status(cluster: Cluster, i: int, timeout: float = 5.0) -> dict | None:
    try:
        r = cluster.get(i, "/v1/quorum/status", timeout=timeout)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def partition_count(cluster: Cluster, i: int) -> int | None:
    try:
        r = cluster.get(i, "/metrics", timeout=5.0)
    except httpx.HTTPError:
        return None
    for line in r.text.splitlines():
        if line.startswith("metaquorum_partition_count") or line.startswith(
            "metaquorum_global_partition_count"
        ):
            return int(float(line.split()[-1]))
    return None


class PodCluster(Cluster):
    """A kill takes the voter's orphans with it, as a pod's deletion would."""

    orphans = 0

    def kill(self, i: int) -> None:
        super().kill(i)
        self.orphans += kill_orphans(self, i)


def kill_orphans(cluster: Cluster, i: int) -> int:
    """SIGKILLs what is left of voter ``i`` after its process was killed: a
    snapshot writer it forked (same command line) outlives it and holds its
    HTTP and Raft ports for seconds (with 1,000,000 partitions a restart then
    failed to bind, 'address already in use'). A pod deleted with its PVC
    loses every process; so does the voter here. Returns how many."""
    want = "\0".join(cluster.args(i)[1:]).encode()
    killed = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if want in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, ProcessLookupError):
            continue
    return killed


def replace_round(cluster: PodCluster, writer: Writer, partitions: int) -> dict:
    cluster.wait_ready(timeout_s=300)
    leader = cluster.leader()
    victim = next(i for i in range(cluster.n) if i != leader)
    old_dir = status(cluster, victim)["directoryId"]
    killed = time.monotonic()
    orphans = cluster.orphans
    cluster.kill(victim)
    orphans = cluster.orphans - orphans
    shutil.rmtree(cluster.data_dir(victim))
    cluster.start(victim)
    started = time.monotonic()
    seen: dict[str, float | None] = {
        "answering": None,
        "snapshot": None,
        "caughtUp": None,
        "voter": None,
    }
    while time.monotonic() - started < LIMIT_S and None in (seen["voter"], seen["caughtUp"]):
        lead = status(cluster, leader)  # first: the victim is compared with it after
        s = status(cluster, victim)
        now = time.monotonic() - started
        if not cluster.alive(victim):
            raise SystemExit(
                f"voter {victim} exited with {cluster.procs[victim].returncode} after its "
                f"restart:\n{cluster.tail(victim)}"
            )
        if s is None:
            time.sleep(0.05)
            continue
        if seen["answering"] is None:
            seen["answering"] = now
        if seen["snapshot"] is None and (partition_count(cluster, victim) or 0) >= partitions:
            seen["snapshot"] = now
        if (
            seen["caughtUp"] is None
            and seen["snapshot"] is not None
            and lead is not None
            and s["raftLastApplied"] >= lead["raftCommitIndex"]
        ):
            seen["caughtUp"] = now
        if s["role"] == "voter" and s["directoryId"] != old_dir:
            seen["voter"] = now
        time.sleep(0.05)
    readmitted = time.monotonic()
    if seen["voter"] is None:
        s, lead = status(cluster, victim) or {}, status(cluster, leader) or {}
        progress(
            f"voter {victim} NOT re-admitted within {LIMIT_S:.0f} s of its restart: role "
            f"{s.get('role')}, Raft term {s.get('raftTerm')}, leader {s.get('leaderId')}, "
            f"applied Raft entry {s.get('raftLastApplied')}; the leader {leader} is at term "
            f"{lead.get('raftTerm')}, entry {lead.get('raftCommitIndex')}"
        )
    return {
        "victim": victim,
        "leader": leader,
        **seen,
        "longestWriteGap": writer.longest_gap(killed, readmitted),
        "writesDuring": sum(1 for t in writer.acks if killed < t < readmitted),
        "orphansKilled": orphans,
    }


def fmt(v: float | None) -> str:
    return "never" if v is None else f"{v:.2f} s"


def summary(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "never"
    return f"{statistics.median(got):.2f} s ({min(got):.2f}-{max(got):.2f})"


@contextlib.contextmanager
def loaded_cluster(
    directory: str | None,
    partitions: int,
    compaction_entries: int,
    prefix: str,
    per_topic: int | None = None,
    brokers: int = 3,
    extra: tuple[str, ...] = (),
):
    """Three voters as pods (``PodCluster``), loaded with ``partitions`` and
    written to until every voter has a snapshot of them, all ready; closed when
    the block ends. ``directory`` keeps the data dirs and logs (else a
    temporary one). The shared set-up of this bench and bench/add_voter.py."""
    with contextlib.ExitStack() as stack:
        if directory:
            root = directory
            Path(root).mkdir(parents=True, exist_ok=True)
        else:
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix))
        # A long session: the loaded brokers are never fenced (a fence
        # rewrites every partition's ISR, N records, and would be measured).
        cluster = PodCluster(
            Path(root),
            fsync="always",
            extra=[
                "--compaction-entries",
                str(compaction_entries),
                "--session-timeout-ms",
                "3600000",
                *extra,
            ],
        )
        stack.callback(cluster.close)
        cluster.start()
        cluster.wait_ready(timeout_s=120)
        progress(f"loading {partitions:,} partitions")
        t0 = time.monotonic()
        changes = load(cluster, partitions, per_topic, brokers)
        progress(
            f"loaded in {time.monotonic() - t0:.1f} s ({changes} leader changes); "
            "writing until the log is compacted"
        )
        progress(
            f"every voter took a snapshot after {compact(cluster, partitions)} writes; "
            "waiting for every voter to be ready"
        )
        cluster.wait_ready(timeout_s=600)
        yield cluster


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="disk replacements")
    parser.add_argument("--loss-rounds", type=int, default=2, help="quorum-loss rounds of each")
    parser.add_argument(
        "--compaction-entries",
        type=int,
        default=500,
        help="the voters' --compaction-entries (default 500; the bench writes until the "
        "leader has compacted, so the wiped voter gets a snapshot; each snapshot of N "
        "partitions costs every voter a fork that writes them all)",
    )
    parser.add_argument(
        "--write-interval-ms", type=float, default=50, help="the writer's pause between writes"
    )
    parser.add_argument("--dir", help="keep the data dirs and voter logs here (default: removed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict] = []
    loss: list[dict] = []
    writer = None
    with loaded_cluster(
        args.dir, args.partitions, args.compaction_entries, "disk-replace-"
    ) as cluster:
        try:
            writer = Writer(cluster, cluster.leader(), args.write_interval_ms / 1000)
            for n in range(args.rounds):
                progress(f"round {n + 1}/{args.rounds}: a follower's disk replaced")
                row = replace_round(cluster, writer, args.partitions)
                progress(json.dumps(row))
                rows.append(row)
                if row["voter"] is None:
                    args.loss_rounds = 0  # the cluster is one voter short: stop here
                    break
            writer.stop()
            writer = None
            for n in range(args.loss_rounds):
                for scenario in ("follower", "leader"):
                    progress(f"quorum loss {n + 1}/{args.loss_rounds}: {scenario}")
                    loss.append(quorum_loss.one_round(cluster, scenario))
        finally:
            if writer is not None:
                writer.stop()
    if args.json:
        print(json.dumps({"partitions": args.partitions, "replace": rows, "loss": loss}, indent=2))
        return 0
    print(
        f"disk replacement with {args.partitions:,} partitions (3 voters, fsync always, "
        f"compaction every {args.compaction_entries} entries, a write every "
        f"{args.write_interval_ms:.0f} ms)"
    )
    print(
        f"{'victim':>6} {'answering':>10} {'snapshot':>10} {'caught up':>10} {'voter':>10} "
        f"{'write gap':>10} {'writes':>7}"
    )
    for r in rows:
        print(
            f"{r['victim']:>6} {fmt(r['answering']):>10} {fmt(r['snapshot']):>10} "
            f"{fmt(r['caughtUp']):>10} {fmt(r['voter']):>10} {fmt(r['longestWriteGap']):>10} "
            f"{r['writesDuring']:>7}"
        )
    for key, what in (
        ("snapshot", "snapshot installed"),
        ("caughtUp", "caught up"),
        ("voter", "re-admitted as a voter"),
        ("longestWriteGap", "longest write gap"),
    ):
        print(f"  {what}: {summary([r[key] for r in rows])}")
    for scenario, what in (("follower", "leader + follower"), ("leader", "both followers")):
        mine = [r for r in loss if r["scenario"] == scenario]
        if mine:
            print(
                f"  majority lost ({what} killed): first 503 "
                f"{summary([r['first503'] for r in mine])}, /readyz fails "
                f"{summary([r['readyzFails'] for r in mine])}, a write commits "
                f"{summary([r['writeAfterRestart'] for r in mine])} after a restart"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
