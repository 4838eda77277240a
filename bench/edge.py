"""What the HTTP edge's connection layer (api/connections.py) costs per request
(figures, not asserts).

Two uvicorn servers on loopback serve the same trivial ASGI app (read the body,
answer ``{}``), one with uvicorn's httptools protocol, one with
``GuardedHttpToolsProtocol`` (deadlines, head limits, caps). A closed loop of
keep-alive POSTs of a heartbeat-sized body runs against each in turn, rounds
interleaved; the figure is the server process's CPU per request (from
/proc/<pid>/stat), which is what the layer adds to every request of a voter
(a heartbeat costs the voter a few hundred microseconds in all).

    python bench/edge.py [--seconds 3] [--rounds 5] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.nodes import free_port  # noqa: E402 - after the path is set
from tests.overload import RawClient  # noqa: E402

BODY = (
    b'{"brokerId": 5, "brokerEpoch": 123456, "currentMetadataOffset": 987654, '
    b'"wantFence": false, "wantShutDown": false}'
)


async def trivial_app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")],
        }
    )
    await send({"type": "http.response.body", "body": b"{}"})


def serve(port: int, guarded: bool) -> None:
    import uvicorn
    import uvloop

    from api.connections import ConnectionLimits, ConnectionStats, guarded_protocol

    http = guarded_protocol(ConnectionLimits(), ConnectionStats()) if guarded else "httptools"
    config = uvicorn.Config(
        trivial_app, host="127.0.0.1", port=port, log_level="warning", http=http, lifespan="off"
    )
    uvloop.run(uvicorn.Server(config).serve())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(port: int, seconds: float, concurrency: int) -> int:
    client = RawClient("127.0.0.1", port, max_connections=concurrency)
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker():
        nonlocal done
        while time.perf_counter() < deadline:
            answer = await client.post("/v1/brokers/heartbeat", BODY)
            assert answer.status == 200, answer
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    client.close()
    return done


def wait_listening(port: int, proc: subprocess.Popen) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server on {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the server on {port} did not listen within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve", choices=["plain", "guarded"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.serve == "guarded")
        return
    servers = {}
    try:
        for kind in ("plain", "guarded"):
            port = free_port()
            cmd = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
            servers[kind] = (port, subprocess.Popen(cmd))
            wait_listening(port, servers[kind][1])
        per_request: dict[str, list[float]] = {"plain": [], "guarded": []}
        rates: dict[str, list[float]] = {"plain": [], "guarded": []}
        for round_ in range(args.rounds):
            order = ("plain", "guarded") if round_ % 2 == 0 else ("guarded", "plain")
            for kind in order:
                port, proc = servers[kind]
                before = cpu_seconds(proc.pid)
                done = asyncio.run(load(port, args.seconds, args.concurrency))
                used = cpu_seconds(proc.pid) - before
                per_request[kind].append(used / done * 1e6)
                rates[kind].append(done / args.seconds)
        print(f"{args.rounds} rounds of {args.seconds:g} s, {args.concurrency} keep-alive clients")
        print(f"{'protocol':10} {'server CPU us/request (median, range)':40} requests/s")
        for kind in ("plain", "guarded"):
            cpu = per_request[kind]
            print(
                f"{kind:10} {statistics.median(cpu):6.1f} ({min(cpu):.1f}-{max(cpu):.1f})"
                f"{'':22} {statistics.median(rates[kind]):8.0f}"
            )
        extra = statistics.median(per_request["guarded"]) - statistics.median(per_request["plain"])
        print(f"the guarded protocol adds {extra:.1f} us of server CPU per request")
    finally:
        for _, proc in servers.values():
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
