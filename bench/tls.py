"""What TLS costs the HTTP API (figures, not asserts).

The same load on two fresh 3-voter loopback clusters, one serving plain HTTP
and one HTTPS (server certificate only: bench clients send no certificate;
TLS 1.3, ECDSA P-256, as ``metaquorum dev --tls`` makes them), with
keep-alive connections and with a new connection per request (a TCP and TLS
handshake each time): AlterPartition of 1 and of 100 partitions, and
heartbeats. Each row prints both figures and the change.

The load comes from httpx (``bench/api.py``'s generators) on the same two
cores as the voters: its own TLS work (encrypting, and on a new connection
the client's half of the handshake) is counted against HTTPS too, so the
change shown is an upper bound of what the servers pay.

    python bench/tls.py [--seconds S] [--clients C] [--clients-100 C] [--fsync always|never] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import alter_load, fresh_topic, heartbeat_load, progress, setup  # noqa: E402
from tests.cluster import Cluster  # noqa: E402
from tests.tls_files import TlsFiles  # noqa: E402

CONNECTIONS = {
    "keep-alive": {},
    "new connection per request": {"limits": httpx.Limits(max_keepalive_connections=0)},
}


async def measure(scheme: str, seconds: float, clients: int, clients_100: int, fsync: str) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"mq-tls-bench-{scheme}-"))
    tls = TlsFiles(root / "tls") if scheme == "https" else None
    cluster = Cluster(
        root, fsync=fsync, tls=tls, tls_client_auth=None,
        extra=["--session-timeout-ms", "3600000"],  # no heartbeats while writes are measured
    )  # fmt: skip
    try:
        cluster.start()
        cluster.wait_ready()
        url = cluster.url(cluster.leader())
        verify = {"verify": tls.context()} if tls is not None else {}
        progress(f"{scheme}: setup")
        epochs, _, _ = await setup(url, cluster.cluster_id, 1, verify)
        rows: dict[str, dict] = {}
        for per_request, n in ((1, clients), (100, clients_100)):
            for how, extra in CONNECTIONS.items():
                name = f"AlterPartition {per_request}/request, {n} clients, {how}"
                progress(f"{scheme}: {name}, {seconds:.0f} s")
                # A fresh topic per row, led by broker 1, every ISR whole: each
                # row starts from the same state on both clusters.
                topic = f"row-{len(rows)}"
                partitions = max(400, n * per_request * 4)
                topic_id = await fresh_topic(url, topic, partitions, verify)
                async with httpx.AsyncClient(base_url=url, timeout=60, **verify) as c:
                    r = await c.get(f"/v1/topics/{topic}", params={"consistency": "linearizable"})
                parts = r.json()["partitions"]
                rows[name] = await alter_load(
                    url, epochs, topic_id, parts, n, per_request, seconds, {**verify, **extra}
                )
        for how, extra in CONNECTIONS.items():
            name = f"heartbeats, {clients} clients, {how}"
            progress(f"{scheme}: {name}, {seconds:.0f} s")
            rows[name] = await heartbeat_load(url, epochs, clients, seconds, {**verify, **extra})
        return rows
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)


def rate(figure: dict) -> tuple[str, float]:
    if "heartbeats_per_s" in figure:
        return "heartbeats/s", figure["heartbeats_per_s"]
    if figure["partitions_per_request"] > 1:
        return "changes/s", figure["changes_per_s"]
    return "requests/s", figure["requests_per_s"]


def report(plain: dict, tls: dict) -> None:
    print(f"\n{'load':<80} {'http':>9} {'https':>9} {'change':>7}   p50 ms http/https   p99 ms")
    for name, a in plain.items():
        b = tls[name]
        unit, x = rate(a)
        _, y = rate(b)
        change = (y - x) / x * 100 if x else float("nan")
        print(
            f"{name + ' (' + unit + ')':<80} {x:9.0f} {y:9.0f} {change:+6.0f}%   "
            f"{a['p50_ms']:6.1f} / {b['p50_ms']:6.1f}   {a['p99_ms']:6.1f} / {b['p99_ms']:6.1f}"
        )
    errors = sum(f.get("errors", 0) for f in [*plain.values(), *tls.values()])
    print(f"(httpx load generator on the same cores; errors: {errors})")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=16, help="for 1/request and heartbeats")
    parser.add_argument("--clients-100", type=int, default=4, help="for 100/request")
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = {
        scheme: asyncio.run(
            measure(scheme, args.seconds, args.clients, args.clients_100, args.fsync)
        )
        for scheme in ("http", "https")
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures["http"], figures["https"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
