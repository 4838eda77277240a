"""Helpers for tests that run real voters: free ports, in-process nodes."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from contextlib import closing
from pathlib import Path

from quorum.node import QuorumNode
from quorum.node_config import NodeConfig, claim_data_dir

# Ports are taken from below the kernel's ephemeral range. A port the OS hands
# out for bind(0) comes from that range, and while its voter is down any
# outgoing connection may borrow it as a source port; the voter's restart then
# fails with "address already in use". Ports below the range are never borrowed.
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 10000
_handed_out: set[int] = set()


def _my_share(low: int, high: int) -> tuple[int, int]:
    """This pytest-xdist worker's slice of ``low..high``: each worker process
    remembers only its own ports, and two workers that drew the same free port
    for voters not started yet both failed to bind it later."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        index = int(worker.removeprefix("gw"))
        count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    except (KeyError, ValueError):
        return low, high
    size = (high - low) // max(count, 1)
    return low + index * size, low + (index + 1) * size


def bindable(port: int, ip: str = "127.0.0.1") -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        try:
            s.bind((ip, port))
        except OSError:
            return False
        return True


def free_port(span: int = 1) -> int:
    """The first of ``span`` consecutive ports that are free now and that no
    other call of this process has handed out, outside the ephemeral range."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    if ephemeral_low - span <= _LOWEST_PORT:
        raise RuntimeError(
            f"no room for test ports below the ephemeral range ({ephemeral_low}): "
            f"lower {_EPHEMERAL_RANGE} or raise it"
        )
    low, high = _my_share(_LOWEST_PORT, ephemeral_low)
    rng = random.Random()
    for _ in range(2000):
        first = rng.randrange(low, high - span)
        ports = range(first, first + span)
        if any(p in _handed_out for p in ports):
            continue
        if all(bindable(p) for p in ports):
            _handed_out.update(ports)
            return first
    raise RuntimeError(f"no {span} free consecutive ports found in {_LOWEST_PORT}..{ephemeral_low}")


def single_voter_config(data_dir: str, raft_port: int | None = None, **kw) -> NodeConfig:
    raft_port = raft_port or free_port()
    # No periodic NoOpRecord unless a test asks: these tests compare offsets and
    # image digests before and after a write, a restart or a replay.
    kw.setdefault("metadata_max_idle_interval_ms", 0)
    return NodeConfig(
        node_id=0,
        voters={0: f"127.0.0.1:{raft_port}"},
        data_dir=str(data_dir),
        advertised_url=kw.pop("advertised_url", "http://127.0.0.1:1"),
        fsync=kw.pop("fsync", False),
        raft_min_timeout=kw.pop("raft_min_timeout", 0.4),
        raft_max_timeout=kw.pop("raft_max_timeout", 0.8),
        **kw,
    )


def build_node(config: NodeConfig) -> QuorumNode:
    """Builds a voter in the calling (main) thread, as pysyncobj requires."""
    return QuorumNode(config, claim_data_dir(config))


async def wait_until(predicate, timeout_s: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout_s} s")
        await asyncio.sleep(0.02)


def run_with(node: QuorumNode, body, timeout_s: float = 60.0):
    """Starts ``node`` on a fresh loop, runs ``body(node)``, always stops it."""

    async def main():
        await node.start()
        try:
            return await asyncio.wait_for(body(node), timeout_s)
        finally:
            await node.stop(transfer=False)

    return asyncio.run(main())


def kill_processes_mentioning(text: str) -> int:
    """SIGKILLs every process whose command line contains ``text`` (a test's own
    tmp dir): the cleanup for processes started in sessions of their own."""
    import os
    import signal

    killed = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            try:
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed
