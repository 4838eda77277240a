"""Overload: 3x the measured ceiling for 60 s against a 3-voter loopback
cluster, then recovery (figures, not asserts; tests/test_overload.py asserts the
functional part).

1. ceiling: closed-loop heartbeats (each writes a record: tests/overload.py)
   with C clients for a few seconds: requests/s, p50, p99;
2. overload: open-loop at 3x that rate for 60 s: what was answered how (200,
   429 with Retry-After, 503 REQUEST_TIMED_OUT), latency of the 200s, whether
   the leader changed;
3. recovery: closed-loop windows of 0.5 s from the moment the load stops,
   until throughput >= 80% and p99 <= 2x (+10 ms) of the ceiling run's.

    python bench/overload.py [--seconds 60] [--factor 3] [--concurrency 32]
        [--fsync always|never] [--max-queued-requests N] [--json]

``--slow-clients`` runs the slow-client attacks instead of the flood, each
for ``--attack-seconds`` (default 15: past the 10 s head and body deadlines)
beside the same closed-loop heartbeats, and prints what each did to their
throughput and p99 and how the server ended the attackers' connections:

* slow uploads: 256 connections POSTing a body a byte a second (reconnecting
  when ended), from two addresses;
* silent: 2,000 connections that send nothing, from eight addresses;
* slowloris: 256 connections sending a request head a byte a second.

    python bench/overload.py --slow-clients [--attack-seconds 15] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster  # noqa: E402 - after the path is set
from tests.hostile.attackers import answer_within, connect, slow_upload, slowloris  # noqa: E402
from tests.overload import (  # noqa: E402
    Heartbeats,
    RawClient,
    closed_loop,
    open_loop,
    recovery,
    setup_brokers,
)


def progress(text: str) -> None:
    print(f"[overload] {text}", file=sys.stderr, flush=True)


async def run(
    cluster: Cluster,
    seconds: float,
    factor: float,
    concurrency: int,
    brokers: int = 50,
    ceiling_s: float = 5.0,
    report=progress,
) -> dict:
    """The whole experiment against a started cluster; returns the figures."""
    leader = cluster.leader()
    before = cluster.status(leader)
    client = RawClient("127.0.0.1", cluster.http[leader], max_connections=2000)
    try:
        epochs = await setup_brokers(client, cluster.cluster_id, brokers)
        load = Heartbeats(epochs)
        await closed_loop(client, load, concurrency, 1.0)  # warm-up
        report(f"measuring the ceiling: {concurrency} clients, {ceiling_s:.0f} s")
        base = await closed_loop(client, load, concurrency, ceiling_s)
        rate = factor * base.ok_per_s
        report(
            f"ceiling {base.ok_per_s:.0f} req/s (p50 {base.pct(0.5) * 1000:.1f} ms, "
            f"p99 {base.pct(0.99) * 1000:.1f} ms); offering {rate:.0f} req/s for {seconds:.0f} s"
        )
        over = await open_loop(client, load, rate, seconds, report)
        report(f"load stopped: {dict(over.statuses)}; measuring recovery")
        recovered_s, windows = await recovery(client, load, base, concurrency)
    finally:
        client.close()
    after = cluster.status(leader)
    first_normal = windows[-1] if recovered_s is not None else None
    return {
        "ceiling": {
            "clients": concurrency,
            "requests_per_s": round(base.ok_per_s),
            "p50_ms": round(base.pct(0.5) * 1000, 1),
            "p99_ms": round(base.pct(0.99) * 1000, 1),
        },
        "overload": {
            "seconds": round(over.seconds, 1),
            "offered_per_s": round(over.offered / over.seconds),
            "sent": over.offered - over.not_sent,
            "not_sent_client_saturated": over.not_sent,
            "connection_failures": dict(over.failed),
            "statuses": dict(over.statuses),
            "errors": dict(over.errors),
            "ok_per_s": round(over.ok_per_s),
            "ok_p50_ms": round(over.pct(0.5) * 1000, 1),
            "ok_p99_ms": round(over.pct(0.99) * 1000, 1),
            "throttled_without_retry_after": over.throttled_without_retry_after,
            "unexpected": over.unexpected[:5],
        },
        "leader": {
            "before": [before["leaderId"], before["controllerEpoch"]],
            "after": [after["leaderId"], after["controllerEpoch"]] if after else None,
            "same": bool(
                after
                and (before["leaderId"], before["controllerEpoch"])
                == (after["leaderId"], after["controllerEpoch"])
            ),
        },
        "recovery": {
            "seconds_to_normal": None if recovered_s is None else round(recovered_s, 2),
            "windows": [[round(w.ok_per_s), round(w.pct(0.99) * 1000, 1)] for w in windows[:20]],
            "first_normal_window": None
            if first_normal is None
            else {
                "requests_per_s": round(first_normal.ok_per_s),
                "p99_ms": round(first_normal.pct(0.99) * 1000, 1),
            },
        },
    }


async def slow_clients(
    cluster: Cluster, attack_s: float, concurrency: int, brokers: int = 50, report=progress
) -> dict:
    """Heartbeats in a closed loop, alone and beside each slow-client attack."""
    port = cluster.http[cluster.leader()]
    client = RawClient("127.0.0.1", port, max_connections=concurrency)
    figures: dict = {}
    try:
        load = Heartbeats(await setup_brokers(client, cluster.cluster_id, brokers))
        await closed_loop(client, load, concurrency, 1.0)  # warm-up
        base = await closed_loop(client, load, concurrency, 5.0)
        figures["none"] = _window(base, {})
        report(f"baseline: {figures['none']}")
        for name, attack in (
            ("slow uploads", _slow_uploads),
            ("silent", _silent),
            ("slowloris", _slowloris),
        ):
            stop = asyncio.Event()
            ended: collections.Counter = collections.Counter()
            attacking = asyncio.ensure_future(attack(port, stop, ended))
            await asyncio.sleep(1.0)  # the attack in place
            stats = await closed_loop(client, load, concurrency, attack_s)
            stop.set()
            await asyncio.wait_for(attacking, 30)
            figures[name] = _window(stats, dict(ended))
            report(f"{name}: {figures[name]}")
    finally:
        client.close()
    return figures


def _window(stats, ended: dict) -> dict:
    return {
        "requests_per_s": round(stats.ok_per_s),
        "p99_ms": round(stats.pct(0.99) * 1000, 1),
        "statuses": dict(stats.statuses),
        "attackers_ended": ended,
    }


async def _slow_uploads(port: int, stop: asyncio.Event, ended) -> None:
    sources = ("127.0.0.2", "127.0.0.3")
    await asyncio.gather(
        *(
            slow_upload(port, "/v1/brokers/heartbeat", None, stop, ended, sources[i % 2])
            for i in range(256)
        )
    )


async def _silent(port: int, stop: asyncio.Event, ended) -> None:
    held = [await connect(port, f"127.0.0.{2 + i % 8}") for i in range(2000)]
    await stop.wait()
    for outcome in await asyncio.gather(*(answer_within(r, 0.5) for r, _ in held)):
        ended[outcome or "still open"] += 1
    for _, writer in held:
        writer.close()


async def _slowloris(port: int, stop: asyncio.Event, ended) -> None:
    await asyncio.gather(
        *(slowloris(port, stop, ended, f"127.0.0.{2 + i % 2}") for i in range(256))
    )


def print_slow_clients(f: dict) -> None:
    print(
        f"{'attack':14} {'heartbeats/s':>12} {'p99 ms':>8}  answers; how the attackers were ended"
    )
    for name, w in f.items():
        print(f"{name:14} {w['requests_per_s']:12} {w['p99_ms']:8}  {w['statuses']}; "
              f"{w['attackers_ended']}")  # fmt: skip


def print_figures(f: dict) -> None:
    c, o, lead, r = f["ceiling"], f["overload"], f["leader"], f["recovery"]
    print(f"ceiling ({c['clients']} closed-loop clients): {c['requests_per_s']} req/s, "
          f"p50 {c['p50_ms']} ms, p99 {c['p99_ms']} ms")  # fmt: skip
    print(f"overload ({o['seconds']} s open loop): offered {o['offered_per_s']} req/s "
          f"({o['not_sent_client_saturated']} not sent: client saturated; connection "
          f"failures {o['connection_failures']}); answered "
          f"{o['statuses']}; errors {o['errors']}")  # fmt: skip
    print(f"  200s: {o['ok_per_s']} req/s, p50 {o['ok_p50_ms']} ms, p99 {o['ok_p99_ms']} ms; "
          f"429 without Retry-After: {o['throttled_without_retry_after']}; "
          f"undocumented statuses: {len(o['unexpected'])}")  # fmt: skip
    print(f"leader (id, epoch) before {lead['before']}, after {lead['after']}: "
          f"{'same' if lead['same'] else 'CHANGED'}")  # fmt: skip
    normal = r["first_normal_window"]
    if r["seconds_to_normal"] is None:
        print("recovery: NOT back to normal within 60 s; windows [req/s, p99 ms]:", r["windows"])
    else:
        print(f"recovery: back to normal {r['seconds_to_normal']} s after the load stopped "
              f"({normal['requests_per_s']} req/s, p99 {normal['p99_ms']} ms); "
              f"windows [req/s, p99 ms]: {r['windows']}")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--factor", type=float, default=3.0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--fsync", choices=["always", "never"], default="always")
    p.add_argument("--max-queued-requests", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--slow-clients", action="store_true", help="the slow-client attacks")
    p.add_argument("--attack-seconds", type=float, default=15.0)
    args = p.parse_args()
    # The flood comes from one load generator standing for many brokers.
    extra = [] if args.slow_clients else ["--max-connections-per-address", "4096"]
    if args.max_queued_requests is not None:
        extra += ["--max-queued-requests", str(args.max_queued_requests)]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    with tempfile.TemporaryDirectory(prefix="metaquorum-overload-") as root:
        cluster = Cluster(Path(root), fsync=args.fsync, extra=extra)
        try:
            cluster.start()
            cluster.wait_ready()
            if args.slow_clients:
                figures = asyncio.run(slow_clients(cluster, args.attack_seconds, args.concurrency))
            else:
                figures = asyncio.run(run(cluster, args.seconds, args.factor, args.concurrency))
        finally:
            cluster.close()
    if args.json:
        print(json.dumps(figures, indent=2))
    elif args.slow_clients:
        print_slow_clients(figures)
    else:
        print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
