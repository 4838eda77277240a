"""HTTP API benchmark against a 3-voter loopback cluster (figures, not asserts).

AlterPartition v3 with C concurrent clients (1, 16, 64; and 2, 4, 6, 8 for 100-
partition requests) and requests of 1 and of 100 partitions: requests/s, partition changes/s, latency p50/p99; then
heartbeats/s. Every request is a real ISR change (shrink, then expand back),
sent by the partition's leader with its current epochs.

The load comes from ``wrk`` (C, with a Lua script that tracks each partition's
epochs from the answers) when it is installed (``apt-get install wrk``): a
Python load generator on the same two cores measures itself more than the
server. Without wrk, an httpx generator runs instead and says so.

    python bench/api.py [--quick] [--json] [--seconds S] [--rounds N] [--no-wrk] [--fsync never]

``--rounds N`` repeats the whole run on a fresh cluster N times and says in
how many rounds each target was met: on a shared 2-core machine the figures
move with its disk and CPU between runs more than with most changes.

Each AlterPartition row also gives the leader's journal syncs in its window
(from its ``metaquorum_journal_sync_duration_seconds`` histogram): the p99
bucket and how many took 25 ms or more, so a slow disk under the 100 ms that
the voters log is told apart from a saturated CPU.

``--fsync never`` runs the same load without journal syncs: the difference
from the default (always) is what the disk costs, its stalls included (the
voters' slow-sync warnings are printed at the end of every run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.record_cap import MAX_RECORDS_PER_USER_OP  # noqa: E402
from controller.topic_control import MAX_PARTITIONS_PER_REQUEST  # noqa: E402
from tests.cluster import Cluster  # noqa: E402 - after the path is set

BROKERS = 6
# A new topic's records are capped with its TopicRecord (record_cap): 9,999 partitions.
FIRST_PARTITIONS = MAX_RECORDS_PER_USER_OP - 1
MV = [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}]


def progress(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def grow(c: httpx.AsyncClient, name: str, have: int, want: int, replicas=None) -> None:
    """Adds partitions to topic ``name`` until it has ``want``, at most
    MAX_PARTITIONS_PER_REQUEST per request (``replicas``: each new one's brokers)."""
    while have < want:
        count = min(want, have + MAX_PARTITIONS_PER_REQUEST)
        body: dict = {"count": count}
        if replicas is not None:
            body["assignments"] = [{"brokerIds": replicas}] * (count - have)
        r = await c.post(f"/v1/topics/{name}/partitions", json=body)
        assert r.json()["errorName"] == "NONE", r.text
        have = count


async def setup(
    url: str, cluster_id: str, partitions: int, http: dict | None = None
) -> tuple[dict, str, list]:
    """``http``: extra httpx.AsyncClient arguments (bench/tls.py: ``verify``)."""
    async with httpx.AsyncClient(
        base_url=url, timeout=60, follow_redirects=True, **(http or {})
    ) as c:
        epochs = {}
        for b in range(1, BROKERS + 1):
            r = await c.post(
                "/v1/brokers/register",
                json={
                    "brokerId": b,
                    "clusterId": cluster_id,
                    "incarnationId": f"AAAAAAAAAAAAAAAAAAAA{'ABCDEFGH'[b]}Q",
                    "listeners": [],
                    "features": MV,
                },
            )
            epochs[b] = r.json()["brokerEpoch"]
        for b, e in epochs.items():
            await c.post(
                "/v1/brokers/heartbeat",
                json={"brokerId": b, "brokerEpoch": e, "currentMetadataOffset": 10**12},
            )
        first = min(partitions, FIRST_PARTITIONS)
        r = await c.post(
            "/v1/topics",
            json={"topics": [{"name": "bench", "numPartitions": first, "replicationFactor": 3}]},
        )
        assert r.json()["topics"][0]["errorName"] == "NONE", r.text
        await grow(c, "bench", first, partitions)
        topic = (await c.get("/v1/topics/bench", params={"consistency": "linearizable"})).json()
        return epochs, topic["topicId"], topic["partitions"]


async def alter_load(
    url, epochs, topic_id, parts, clients, per_request, seconds, http: dict | None = None
) -> dict:
    """Each client owns disjoint partitions of one leader and flips their ISR.
    ``http``: extra httpx.AsyncClient arguments (``verify``, ``limits``)."""
    by_leader: dict[int, list] = {}
    for p in parts:
        by_leader.setdefault(p["leader"], []).append(
            {
                "pid": p["partitionIndex"],
                "le": p["leaderEpoch"],
                "pe": p["partitionEpoch"],
                "isr": list(p["isr"]),
                "shrunk": False,
            }
        )
    leaders = sorted(by_leader)
    owned = []
    for i in range(clients):
        leader = leaders[i % len(leaders)]
        pool = by_leader[leader]
        share = len(pool) // (
            (clients + len(leaders) - 1 - (i % len(leaders))) // len(leaders) or 1
        )
        take, by_leader[leader] = pool[:share], pool[share:]
        owned.append((leader, take))
    latencies: list[float] = []
    changes = 0
    requests = 0
    errors = 0
    stop = time.monotonic() + seconds

    async def client(leader: int, mine: list) -> None:
        nonlocal changes, requests, errors
        async with httpx.AsyncClient(base_url=url, timeout=30, **(http or {})) as c:
            i = 0
            while time.monotonic() < stop and mine:
                batch = [mine[(i + j) % len(mine)] for j in range(min(per_request, len(mine)))]
                i += per_request
                entries = []
                for p in batch:
                    isr = p["isr"][:-1] if not p["shrunk"] else p["isr"]
                    entries.append(
                        {
                            "partitionIndex": p["pid"],
                            "leaderEpoch": p["le"],
                            "partitionEpoch": p["pe"],
                            "newIsrWithEpochs": [
                                {"brokerId": b, "brokerEpoch": epochs[b]} for b in isr
                            ],
                        }
                    )
                body = {
                    "brokerId": leader,
                    "brokerEpoch": epochs[leader],
                    "topics": [{"topicId": topic_id, "partitions": entries}],
                }
                t = time.perf_counter()
                r = await c.post("/v1/alter-partition", json=body)
                latencies.append(time.perf_counter() - t)
                requests += 1
                if r.status_code != 200:
                    errors += 1
                    continue
                results = {x["partitionIndex"]: x for x in r.json()["topics"][0]["partitions"]}
                for p in batch:
                    res = results[p["pid"]]
                    if res["errorName"] == "NONE":
                        p["pe"] = res["partitionEpoch"]
                        p["le"] = res["leaderEpoch"]
                        p["shrunk"] = not p["shrunk"]
                        changes += 1
                    else:
                        errors += 1

    start = time.monotonic()
    await asyncio.gather(*(client(leader, mine) for leader, mine in owned))
    elapsed = time.monotonic() - start
    return {
        "clients": clients,
        "partitions_per_request": per_request,
        "requests_per_s": requests / elapsed,
        "changes_per_s": changes / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1000,
        "p99_ms": pct(latencies, 0.99) * 1000,
        "errors": errors,
    }


WRK_ALTER = r"""
local n, per, tid = @NPARTS@, @PER@, "@TOPIC_ID@"
local full = '[{"brokerId":1,"brokerEpoch":@E1@},{"brokerId":2,"brokerEpoch":@E2@},{"brokerId":3,"brokerEpoch":@E3@}]'
local shrunk_isr = '[{"brokerId":1,"brokerEpoch":@E1@},{"brokerId":2,"brokerEpoch":@E2@}]'
local pe, shrunk, nextp = {}, {}, 0
changes, errors = 0, 0
for i = 0, n - 1 do pe[i] = 0; shrunk[i] = false end
local headers = {["Content-Type"] = "application/json"}
request = function()
  local parts = {}
  for k = 1, per do
    local p = nextp; nextp = (nextp + 1) % n
    local isr = shrunk[p] and full or shrunk_isr
    parts[k] = string.format('{"partitionIndex":%d,"leaderEpoch":0,"partitionEpoch":%d,"newIsrWithEpochs":%s}', p, pe[p], isr)
  end
  local body = '{"brokerId":1,"brokerEpoch":@E1@,"topics":[{"topicId":"' .. tid .. '","partitions":[' .. table.concat(parts, ",") .. ']}]}'
  return wrk.format("POST", "/v1/alter-partition?version=3", headers, body)
end
response = function(status, hdrs, body)
  if status ~= 200 then errors = errors + per; count_kind("HTTP " .. status, per); return end
  -- the request's own error first (a stale broker epoch, ...): no partition was changed
  local code, name = string.match(body, '^{"errorCode":(%-?%d+),"errorName":"([%u_]+)"')
  if code ~= "0" then errors = errors + per; count_kind(name or "no errorCode", per); return end
  -- partition entries: {"errorCode":..,"errorName":..,"errorMessage":..,"partitionIndex":..,...,"partitionEpoch":..}
  local pattern = '"errorCode":(%-?%d+),"errorName":"([%u_]+)","errorMessage":[^{]-,"partitionIndex":(%d+),[^}]-"partitionEpoch":(%d+)'
  for code, name, idx, epoch in string.gmatch(body, pattern) do
    idx = tonumber(idx)
    if tonumber(code) == 0 then pe[idx] = tonumber(epoch); shrunk[idx] = not shrunk[idx]; changes = changes + 1
    else errors = errors + 1; count_kind(name, 1) end
  end
end
"""

# Every script counts ``changes`` and ``errors``, and may name its errors
# (an HTTP status, or an errorName in an answer) with count_kind.
WRK_REPORT = r"""
kinds = {}
function count_kind(name, n) kinds[name] = (kinds[name] or 0) + n end
local threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency, requests)
  local changes, errors, named = 0, 0, {}
  for _, t in ipairs(threads) do
    changes = changes + (t:get("changes") or 0); errors = errors + (t:get("errors") or 0)
    for name, n in pairs(t:get("kinds") or {}) do named[name] = (named[name] or 0) + n end
  end
  io.write(string.format("RESULT %d %d %d %f %f %d\n", summary.requests, changes, errors,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.duration))
  for name, n in pairs(named) do io.write(string.format("KIND %s %d\n", name, n)) end
end
"""


def run_wrk(url: str, path: str, script: str, clients: int, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script + WRK_REPORT)
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{clients}", f"-d{max(1, int(seconds))}s", "--latency", "-s", f.name, url + path],
            capture_output=True, text=True, timeout=seconds + 60,
        ).stdout  # fmt: skip
    finally:
        Path(f.name).unlink()
    m = re.search(r"RESULT (\d+) (\d+) (\d+) ([\d.]+) ([\d.]+) (\d+)", out)
    if not m:
        raise SystemExit(f"wrk printed no result:\n{out}")
    requests, changes, errors, p50, p99, duration_us = m.groups()
    elapsed = int(duration_us) / 1e6
    kinds = {name: int(n) for name, n in re.findall(r"^KIND (.+) (\d+)$", out, re.MULTILINE)}
    return {
        "requests_per_s": int(requests) / elapsed,
        "changes_per_s": int(changes) / elapsed,
        "p50_ms": float(p50),
        "p99_ms": float(p99),
        "errors": int(errors),
        "error_kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        # The counts too: bench/cores.py divides CPU time by them.
        "requests": int(requests),
        "changes": int(changes),
        "seconds": elapsed,
    }


async def fresh_topic(url: str, name: str, partitions: int, http: dict | None = None) -> str:
    """A topic whose partitions are all led by broker 1, every epoch 0."""
    async with httpx.AsyncClient(
        base_url=url, timeout=120, follow_redirects=True, **(http or {})
    ) as c:
        first = min(partitions, FIRST_PARTITIONS)
        assignments = [{"partitionIndex": p, "brokerIds": [1, 2, 3]} for p in range(first)]
        r = await c.post(
            "/v1/topics", json={"topics": [{"name": name, "assignments": assignments}]}
        )
        topic = r.json()["topics"][0]
        assert topic["errorName"] == "NONE", topic
        await grow(c, name, first, partitions, replicas=[1, 2, 3])
        return topic["topicId"]


def alter_partitions(clients: int, per_request: int) -> int:
    """The partitions of a wrk AlterPartition run's topic: each is changed at
    most every few requests."""
    return max(2000, clients * per_request * 4)


def alter_script(epochs: dict, topic_id: str, partitions: int, per_request: int) -> str:
    """WRK_ALTER for a fresh_topic of ``partitions`` led by broker 1."""
    # Placeholders are @NAME@ and the topic id goes in last: a random id may
    # contain any letters.
    script = WRK_ALTER
    for name, value in (
        ("@NPARTS@", partitions), ("@PER@", per_request),
        ("@E1@", epochs[1]), ("@E2@", epochs[2]), ("@E3@", epochs[3]),
        ("@TOPIC_ID@", topic_id),
    ):  # fmt: skip
        script = script.replace(name, str(value))
    return script


async def wrk_alter(url, epochs, clients, per_request, seconds, run_id) -> dict:
    partitions = alter_partitions(clients, per_request)
    topic_id = await fresh_topic(url, f"wrk-{run_id}", partitions)
    script = alter_script(epochs, topic_id, partitions, per_request)
    figures = run_wrk(url, "/v1/alter-partition?version=3", script, clients, seconds)
    return {"clients": clients, "partitions_per_request": per_request, **figures}


WRK_HEARTBEAT_ANSWER = r"""
changes, errors = 0, 0
response = function(status, headers, body)
  if status ~= 200 then errors = errors + 1; count_kind("HTTP " .. status, 1); return end
  local name = string.match(body, '"errorName":"([%u_]+)"')
  if name ~= "NONE" then errors = errors + 1; count_kind(name or "no errorName", 1) end
end
"""


def heartbeat_script(epochs: dict) -> str:
    """Broker 1's heartbeat, again and again (no record to write); an answer
    that is not a 200 with error NONE counts as an error, by its kind."""
    return (
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.body = \'{{"brokerId":1,"brokerEpoch":{epochs[1]},"currentMetadataOffset":1000000000000}}\'\n'
        + WRK_HEARTBEAT_ANSWER
    )


def wrk_heartbeats(url, epochs, clients, seconds) -> dict:
    figures = run_wrk(url, "/v1/brokers/heartbeat", heartbeat_script(epochs), clients, seconds)
    return {
        "clients": clients,
        "heartbeats_per_s": figures["requests_per_s"],
        "p50_ms": figures["p50_ms"],
    }


async def heartbeat_load(url, epochs, clients, seconds, http: dict | None = None) -> dict:
    stop = time.monotonic() + seconds
    count = 0
    latencies: list[float] = []

    async def client(i: int) -> None:
        nonlocal count
        b = 1 + i % BROKERS
        async with httpx.AsyncClient(base_url=url, timeout=30, **(http or {})) as c:
            while time.monotonic() < stop:
                t = time.perf_counter()
                r = await c.post(
                    "/v1/brokers/heartbeat",
                    json={"brokerId": b, "brokerEpoch": epochs[b], "currentMetadataOffset": 10**12},
                )
                latencies.append(time.perf_counter() - t)
                if r.status_code == 200:
                    count += 1

    start = time.monotonic()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.monotonic() - start
    return {
        "clients": clients,
        "heartbeats_per_s": count / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1000,
        "p99_ms": pct(latencies, 0.99) * 1000,
    }


_DISK_WAIT = re.compile(r"(?:a Raft journal sync|storing the Raft meta file .*) took (\d+) ms")


def disk_stalls(cluster: Cluster) -> list[tuple[float, float]]:
    """(wall-clock time, ms) of each journal sync or meta-file store of 100 ms
    or more on a voter (a meta store runs off the Raft thread, but its stall
    is the disk's, and the journal's syncs around it are slow too); one stall
    of a shared disk shows on several voters within milliseconds and counts
    once."""
    seen: list[tuple[float, float]] = []
    for path in cluster.logs:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            m = _DISK_WAIT.search(line)
            if not m:
                continue
            try:
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            seen.append((at, float(m.group(1))))
    merged: list[tuple[float, float]] = []
    for at, ms in sorted(seen):
        if merged and at - merged[-1][0] < 0.05:
            merged[-1] = (merged[-1][0], max(merged[-1][1], ms))
        else:
            merged.append((at, ms))
    return merged


SYNC_HISTOGRAM = "metaquorum_journal_sync_duration_seconds"
SLOW_SYNC_S = 0.025  # a sync this slow is half the p99 target of a request


async def sync_buckets(url: str) -> dict[float, float]:
    """The voter's journal-sync histogram from /metrics: upper bound (s) ->
    cumulative count."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        text = (await c.get("/metrics")).text
    buckets = {}
    for family in text_string_to_metric_families(text):
        if family.name == SYNC_HISTOGRAM:
            for sample in family.samples:
                if sample.name == SYNC_HISTOGRAM + "_bucket":
                    buckets[float(sample.labels["le"])] = sample.value
    return buckets


def sync_figures(before: dict[float, float], after: dict[float, float]) -> dict:
    """The syncs between two histograms: how many, the bucket bound their
    p99 falls under, and how many took SLOW_SYNC_S or more."""
    bounds = sorted(after)
    delta = [after[b] - before.get(b, 0.0) for b in bounds]  # cumulative
    total = delta[-1] if delta else 0.0
    p99 = next((b for b, n in zip(bounds, delta, strict=True) if n >= 0.99 * total), 0.0)
    fast = max((n for b, n in zip(bounds, delta, strict=True) if b < SLOW_SYNC_S), default=0.0)
    return {"syncs": int(total), "sync_p99_ms": p99 * 1000, "slow_syncs": int(total - fast)}


async def timed(run, url: str) -> dict:
    """The figures of ``run`` (a coroutine), with its wall-clock window and the
    journal syncs of the voter at ``url`` (the leader) meanwhile."""
    before = await sync_buckets(url)
    started = time.time()
    figure = await run
    figure["window"] = (started, time.time())
    figure |= sync_figures(before, await sync_buckets(url))
    return figure


def note_stalls(figures: list[dict], stalls: list[tuple[float, float]]) -> None:
    """Adds to each run the disk stalls that fell in its window."""
    for f in figures:
        start, end = f.pop("window")
        inside = [ms for at, ms in stalls if start <= at <= end]
        f["disk_stalls"] = len(inside)
        f["worst_disk_stall_ms"] = max(inside, default=0.0)


def report_stalls(cluster: Cluster) -> None:
    """What the voters logged that stalls requests (slow journal syncs, long
    collector pauses, snapshot forks, elections): the usual reason for a p99
    far above p50."""
    for i, path in enumerate(cluster.logs):
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if (" WARNING " in line and "auth is" not in line) or "snapshot at offset" in line:
                progress(f"voter {i}: {line}")


async def run(seconds: float, quick: bool, use_wrk: bool, fsync: str = "always") -> dict:
    root = Path(tempfile.mkdtemp(prefix="mq-api-bench-"))
    # The benchmark's brokers send no heartbeats while it measures writes: a
    # long session keeps them unfenced.
    cluster = Cluster(root, fsync=fsync, extra=["--session-timeout-ms", "3600000"])
    try:
        cluster.start()
        cluster.wait_ready()
        leader = cluster.leader()
        url = cluster.url(leader)
        concurrency = (1, 16) if quick else (1, 16, 64)
        # The p99 target of 100-partition requests is met, if anywhere, at a
        # moderate concurrency: at 16 clients a request queues behind 15 others.
        concurrency_100 = (1, 4, 16) if quick else (1, 2, 4, 6, 8, 16, 64)
        partitions = max(concurrency) * 100 * 2
        progress(f"setup: {BROKERS} brokers, topic 'bench' with {partitions} partitions (RF 3)")
        epochs, topic_id, parts = await setup(url, cluster.cluster_id, partitions)
        figures = {"alter_partition": [], "heartbeats": [], "load": "wrk" if use_wrk else "httpx"}
        if use_wrk:
            run_id = 0
            for per_request in (1, 100):
                for clients in concurrency if per_request == 1 else concurrency_100:
                    run_id += 1
                    progress(
                        f"AlterPartition (wrk): {clients} connection(s), {per_request}/request, {seconds:.0f} s"
                    )
                    figures["alter_partition"].append(
                        await timed(
                            wrk_alter(url, epochs, clients, per_request, seconds, run_id), url
                        )
                    )
            for clients in concurrency:
                progress(f"heartbeats (wrk): {clients} connection(s), {seconds:.0f} s")
                figures["heartbeats"].append(wrk_heartbeats(url, epochs, clients, seconds))
            note_stalls(figures["alter_partition"], disk_stalls(cluster))
            report_stalls(cluster)
            return figures
        for per_request in (1, 100):
            for clients in concurrency:
                progress(
                    f"AlterPartition: {clients} client(s), {per_request} partition(s)/request, {seconds:.0f} s"
                )
                # Fresh epochs for every run: re-read the topic.
                async with httpx.AsyncClient(base_url=url, timeout=60) as c:
                    parts = (
                        await c.get("/v1/topics/bench", params={"consistency": "linearizable"})
                    ).json()["partitions"]
                figures["alter_partition"].append(
                    await timed(
                        alter_load(url, epochs, topic_id, parts, clients, per_request, seconds),
                        url,
                    )
                )
        for clients in concurrency:
            progress(f"heartbeats: {clients} client(s), {seconds:.0f} s")
            figures["heartbeats"].append(await heartbeat_load(url, epochs, clients, seconds))
        note_stalls(figures["alter_partition"], disk_stalls(cluster))
        report_stalls(cluster)
        return figures
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)


# Issue 5's targets.
TARGET_SINGLE_PER_S = 3_000
TARGET_CHANGES_PER_S = 20_000
TARGET_P99_MS = 50


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=1, help="whole runs, each on a fresh cluster")
    parser.add_argument("--no-wrk", action="store_true", help="use the Python load generator")
    parser.add_argument(
        "--fsync", choices=("always", "never"), default="always", help="the voters' --fsync"
    )
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    use_wrk = not args.no_wrk and shutil.which("wrk") is not None
    if not use_wrk:
        progress(
            "wrk not found (apt-get install wrk): the httpx load generator runs, and limits the figures"
        )
    rounds = []
    for n in range(max(1, args.rounds)):
        if args.rounds > 1:
            progress(f"round {n + 1}/{args.rounds}")
        rounds.append(asyncio.run(run(seconds, args.quick, use_wrk, args.fsync)))
    if args.json:
        print(json.dumps(rounds[0] if len(rounds) == 1 else rounds, indent=2))
        return 0
    best_single, best_100 = [], []
    for n, figures in enumerate(rounds):
        single, best = print_round(figures, args.fsync, n, len(rounds))
        best_single.append(single)
        best_100.append(best)
    if len(rounds) > 1:
        ok_single = sum(s >= TARGET_SINGLE_PER_S for s in best_single)
        ok_100 = sum(b is not None and b["changes_per_s"] >= TARGET_CHANGES_PER_S for b in best_100)
        print(
            f"  over {len(rounds)} rounds: single-partition target met in {ok_single} "
            f"(best per round {', '.join(f'{s:,.0f}' for s in best_single)}); 100-partition "
            f"target met in {ok_100} (best at p99 <= {TARGET_P99_MS} ms per round "
            + ", ".join(f"{b['changes_per_s']:,.0f}" if b else "none" for b in best_100)
            + ")"
        )
    return 0


def print_round(figures: dict, fsync: str, n: int, rounds: int) -> tuple[float, dict | None]:
    """Prints one round's table; returns its best single-partition requests/s
    and its best 100-partition run within the p99 target (or None)."""
    head = f" (round {n + 1}/{rounds})" if rounds > 1 else ""
    print(
        f"-- metaquorum HTTP API bench{head}: 3 voters on loopback, fsync {fsync}, "
        f"AlterPartition v3, load from {figures['load']}"
    )
    for f in figures["alter_partition"]:
        print(
            f"  {f['clients']:>3} client(s) x {f['partitions_per_request']:>3} partition(s)/request: "
            f"{f['requests_per_s']:>8,.0f} requests/s {f['changes_per_s']:>9,.0f} changes/s  "
            f"p50 {f['p50_ms']:6.1f} ms  p99 {f['p99_ms']:6.1f} ms  errors {f['errors']}"
            + (
                f"  leader syncs p99 <= {f['sync_p99_ms']:g} ms "
                f"({f['slow_syncs']} >= {SLOW_SYNC_S * 1000:g} ms)"
                if f["syncs"]
                else ""
            )
            + (
                f"  disk stalls {f['disk_stalls']} (worst {f['worst_disk_stall_ms']:.0f} ms)"
                if f["disk_stalls"]
                else ""
            )
        )
    for f in figures["heartbeats"]:
        print(
            f"  heartbeats, {f['clients']:>3} client(s): {f['heartbeats_per_s']:>8,.0f}/s  p50 {f['p50_ms']:.1f} ms"
        )
    print(
        f"  targets: >= {TARGET_SINGLE_PER_S:,} single-partition requests/s; >= "
        f"{TARGET_CHANGES_PER_S:,} changes/s with 100-partition requests at p99 <= "
        f"{TARGET_P99_MS} ms"
    )
    single = max(
        (
            f["requests_per_s"]
            for f in figures["alter_partition"]
            if f["partitions_per_request"] == 1
        ),
        default=0,
    )
    within = [
        f
        for f in figures["alter_partition"]
        if f["partitions_per_request"] == 100 and f["p99_ms"] <= TARGET_P99_MS
    ]
    best = max(within, key=lambda f: f["changes_per_s"], default=None)
    print(f"  best single-partition: {single:,.0f} requests/s")
    print(f"  best 100-partition at p99 <= {TARGET_P99_MS} ms: " + (
        f"{best['changes_per_s']:,.0f} changes/s ({best['clients']} clients, p99 {best['p99_ms']:.1f} ms)"
        if best else "none"))  # fmt: skip
    stalled = [f for f in figures["alter_partition"] if f["disk_stalls"]]
    if stalled:
        print(
            f"  {len(stalled)} of {len(figures['alter_partition'])} AlterPartition runs had a "
            "journal sync or meta-file store of 100 ms or more on the voters (the disk: the "
            "same stall shows on every voter; compare --fsync never)"
        )
    return single, best


if __name__ == "__main__":
    sys.exit(main())
