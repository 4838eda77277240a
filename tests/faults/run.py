"""One nemesis run: namespaces up, three voters, workload and nemesis for the
duration, heal, settle, check, everything torn down (also on failure)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path

import httpx

from .checker import check
from .nemesis import FOLLOWER_CUT_S, KINDS, Nemesis
from .netns import Network, require_tools
from .report import RunReport, longest_unavailability
from .voters import NetnsCluster
from .workload import Workload

SETTLE_TIMEOUT_S = 240.0
SETTLE_GAP_S = 3.0  # between the two sweeps that must agree
SLOTS = 5  # network namespaces: 3 voters, and room for a joiner and a replacement


def parse_duration(text: str) -> float:
    """``300``, ``300s``, ``5m``, ``30m``, ``1h`` -> seconds."""
    text = str(text).strip().lower()
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text and text[-1] in units:
            value = float(text[:-1]) * units[text[-1]]
        else:
            value = float(text)
    except ValueError:
        raise ValueError(f"duration {text!r}: expected seconds or e.g. 90s, 5m, 30m, 1h") from None
    if value <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return value


def http_workers(seed: int) -> int:
    """The voters' HTTP layout of a run: one process or one HTTP worker each,
    drawn from the seed apart from the fault schedule (so a seed replays its
    layout too), or METAQUORUM_NEMESIS_HTTP_WORKERS. Each CI run checks one
    layout; across runs, both."""
    forced = os.environ.get("METAQUORUM_NEMESIS_HTTP_WORKERS")
    if forced:
        return int(forced)
    return random.Random(f"{seed}-http-layout").choice((0, 1))


def run_nemesis(
    root: Path,
    duration_s: float,
    seed: int,
    progress=print,
    kinds: tuple[str, ...] = KINDS,
    interval_s: tuple[float, float] = (10.0, 20.0),
    hold_s: tuple[float, float] = (3.0, 8.0),
    first: str | tuple[str, ...] | None = None,
    flap_s: tuple[float, float] = (10.0, 30.0),
    follower_cut_s: tuple[float, float] = FOLLOWER_CUT_S,
) -> RunReport:
    """Runs the nemesis and returns its report; faults every ``interval_s``
    seconds (a uniform draw), each held ``hold_s`` seconds (a link flapping
    ``flap_s``, a follower cut off ``follower_cut_s``); ``first``: the first
    faults' kinds. Three voters in a network of five namespaces: two spare
    slots for the membership changes' joiners."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if "loss" in kinds:
        require_tools("iptables")  # before minutes of running, not at the first loss fault
    net = Network(SLOTS, random.Random(seed))
    workers = http_workers(seed)
    cluster: NetnsCluster | None = None
    try:
        net.setup()
        progress(
            f"network: bridge {net.bridge} {net.bridge_ip}, slots {', '.join(net.ips)} "
            f"in namespaces {', '.join(net.namespaces)}; voters with --http-workers {workers}"
        )
        cluster = NetnsCluster(net, root, voters=3, extra=["--http-workers", str(workers)])
        cluster.start()
        cluster.wait_ready()
        progress(f"3 voters ready, leader {cluster.leader()}; {duration_s:.0f} s of faults")
        nemesis = Nemesis(
            cluster, seed, 0.0, interval_s, hold_s, progress, kinds, first, flap_s, follower_cut_s
        )
        report = asyncio.run(_run(cluster, nemesis, root, duration_s, seed, progress))
        return report
    finally:
        if cluster is not None:
            cluster.close()
        net.teardown()


async def _run(
    cluster: NetnsCluster, nemesis: Nemesis, root: Path, duration_s: float, seed: int, progress
):
    workload = Workload(cluster.urls, cluster.cluster_id, seed)
    nemesis.t0 = workload.t0  # one clock for faults and operations
    until = asyncio.Event()
    task = asyncio.create_task(workload.run(until))
    nemesis.start()
    try:
        end = time.monotonic() + duration_s
        while time.monotonic() < end and not task.done() and nemesis.error is None:
            await asyncio.sleep(min(30.0, max(0.0, end - time.monotonic())))
            acked = sum(op.outcome == "ok" for op in workload.ops)
            unknown = sum(op.outcome == "unknown" for op in workload.ops)
            progress(
                f"[{workload.now():6.1f}s] {len(workload.ops)} writes, {acked} acknowledged, "
                f"{unknown} unknown; log at offset {workload.metadata_offset}; "
                f"{len(nemesis.faults)} faults"
            )
    finally:
        await asyncio.to_thread(nemesis.stop)
        until.set()
        await task  # raises what the workload raised (an offset gap, say)
    workload_end = workload.now()
    progress(f"[{workload_end:6.1f}s] faults healed, workload stopped; waiting to settle")
    if not await asyncio.to_thread(nemesis.await_readmission, SETTLE_TIMEOUT_S):
        nemesis.poll_readmission()  # the finding, if it is past its deadline
    statuses, settled = await asyncio.to_thread(settle, cluster)
    if not settled:
        progress("the voters did not settle on one offset, digest and role: checking as they are")
    answered = [s["lastAppliedOffset"] for s in statuses.values() if s is not None]
    final = max(answered) if answered else -1
    await asyncio.wait_for(workload.follow_log(stop_at=final), 120)
    del workload.records[final + 1 :]
    # The voters at the end, by node id: the members the nemesis kept, which
    # must be the voter set the leader holds.
    members = {cluster.node_ids[s]: s for s in cluster.members}
    committed = await asyncio.to_thread(cluster.committed_voters)
    if committed != set(members):
        nemesis.findings.append(
            (
                "membership",
                f"the leader's voter set is {sorted(committed or ())}, the nemesis's "
                f"{sorted(members)}",
            )
        )
    voter_logs = {}
    for nid, slot in sorted(members.items()):
        try:
            voter_logs[nid] = await fetch_log(cluster.url(slot), final)
        except httpx.HTTPError as e:
            progress(f"voter {nid}'s log could not be read: {e!r}")
            voter_logs[nid] = None
    statuses = {cluster.node_ids[s]: st for s, st in statuses.items()}
    await workload.close()
    (root / "history.jsonl").write_text(
        "\n".join(json.dumps(op.to_json()) for op in workload.ops) + "\n"
    )
    (root / "faults.json").write_text(json.dumps([f.to_json() for f in nemesis.faults], indent=1))
    (root / "log.jsonl").write_text("\n".join(json.dumps(r) for r in workload.records) + "\n")
    for i in range(cluster.n):
        cluster.note_exit(i)
    exits = [
        f"slot {e.voter} exited with code {e.code} at {e.seen - workload.t0:.1f}s"
        + (" (it refused to serve: a diverged log or damaged files)" if e.code == 3 else "")
        + f"; its log ended:\n{e.tail}"
        for e in cluster.exits
    ]
    result = await asyncio.to_thread(
        check, workload.records, workload.ops, voter_logs, statuses, exits, nemesis.findings
    )
    return RunReport(
        seed,
        duration_s,
        nemesis.faults,
        workload.ops,
        result,
        longest_unavailability(workload.ops, nemesis.faults, workload_end),
        str(root),
        dict(workload.log_sources),
        sorted(members),
    )


def settle(
    cluster: NetnsCluster, timeout_s: float = SETTLE_TIMEOUT_S
) -> tuple[dict[int, dict | None], bool]:
    """Waits until every voter (member slot) is ready, a voter (role), and all
    report the same offset and image digest in one sweep, in two sweeps
    SETTLE_GAP_S apart. The log never stands still (the active controller
    writes a NoOpRecord every 500 ms, Kafka's default), so the second sweep
    may be at a later offset, and a sweep that straddles a NoOp is simply
    taken again. Returns the last statuses and whether they settled: a voter
    that never does (down, diverged, not re-admitted) is for the checker to
    report, not an exception here."""
    deadline = time.monotonic() + timeout_s
    agreed_at: float | None = None  # the first sweep of the two
    statuses: dict[int, dict | None] = {}
    while time.monotonic() < deadline:
        ready = all(cluster.ready(i) for i in cluster.members)
        statuses = {i: cluster.status(i, digest=True, timeout=10.0) for i in cluster.members}
        if ready and all(s is not None for s in statuses.values()):
            seen = {
                (s["lastAppliedOffset"], s["imageDigest"], s.get("role", "voter"))
                for s in statuses.values()
            }
            if len(seen) == 1 and next(iter(seen))[2] == "voter":
                if agreed_at is not None and time.monotonic() - agreed_at >= SETTLE_GAP_S:
                    return statuses, True
                agreed_at = agreed_at or time.monotonic()
                time.sleep(SETTLE_GAP_S)
            else:
                time.sleep(0.2)  # a NoOp between two voters' answers, or still catching up
        else:
            agreed_at = None
            time.sleep(0.5)
    return statuses, False


async def fetch_log(url: str, final: int) -> tuple[int, list[dict]]:
    """(oldest retained offset, records up to ``final``) of one voter."""
    records: list[dict] = []
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
        offset = 0
        oldest = 0
        while offset <= final:
            r = await http.get(url + "/v1/log", params={"fromOffset": offset, "maxRecords": 5000})
            if r.status_code == 410:
                offset = oldest = r.json()["oldestOffset"]
                continue
            r.raise_for_status()
            page = r.json()["records"]
            if not page:
                break
            records.extend(page)
            offset = page[-1]["offset"] + 1
    return oldest, [rec for rec in records if rec["offset"] <= final]
