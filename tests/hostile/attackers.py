"""Hostile clients and a voter to aim them at, for tests/hostile/.

Each attacker is a raw HTTP/1.1 client on asyncio streams (httpx would not
send a body a byte a second, or headers a byte at a time), bound to a
loopback source address of its own (127.0.0.2, ...) where a test wants the
attack to come from other hosts than the real clients (127.0.0.1). Every
attacker counts how its connections ended (the status the server answered,
"closed" for an end without an answer), so a test can assert what the server
did, not only that it survived.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path

from tests.cluster import Cluster
from tests.conftest import running
from tests.tls_files import TlsFiles

TOKENS = """\
admin-token admin
broker-1-token broker 1
broker-2-token broker 2
read-token read
"""
STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3})")


class HostileCluster(Cluster):
    """One voter with tokens, optionally under an open-file limit of
    ``nofile`` (soft), and ``hard_nofile`` (hard; default the same, as a
    service manager sets both)."""

    def __init__(
        self,
        root: Path,
        nofile: int | None = None,
        extra: list[str] | None = None,
        hard_nofile: int | None = None,
        tls: TlsFiles | None = None,
    ):
        tokens = Path(root) / "tokens"
        tokens.write_text(TOKENS)
        super().__init__(
            root, voters=1, extra=["--tokens-file", str(tokens), *(extra or [])], tls=tls
        )
        self.nofile = nofile
        self.hard_nofile = hard_nofile or nofile
        self.client.headers["Authorization"] = "Bearer admin-token"  # status, leader()

    def args(self, i: int) -> list[str]:
        args = super().args(i)
        if self.nofile is None:
            return args
        # exec keeps the pid: Cluster stops the process it started.
        limits = f"ulimit -S -n {self.nofile} && ulimit -H -n {self.hard_nofile}"
        return ["/bin/sh", "-c", f'{limits} && exec "$@"', "sh", *args]


def hostile_cluster(root: Path, **kw):
    return running(HostileCluster(root, **kw))


BOOTSTRAP = {"LEADER_CHANGE", "FEATURE_LEVEL_RECORD", "NO_OP_RECORD", "KRAFT_VOTERS"}


def client_records(c: Cluster) -> list[dict]:
    """The records in the log that a client's request wrote (not the leader's
    own bootstrap records, which may land at any moment after start)."""
    r = c.get(0, "/v1/log?fromOffset=0&maxRecords=10000")
    assert r.status_code == 200, r.text
    return [rec for rec in r.json()["records"] if rec["type"] not in BOOTSTRAP]


def status_of(data: bytes) -> str:
    match = STATUS.match(data)
    return match.group(1).decode() if match else "closed"


async def connect(port: int, source: str = "127.0.0.1"):
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0), limit=1 << 16)


async def answer_within(reader: asyncio.StreamReader, seconds: float) -> str | None:
    """The status the server answered within ``seconds``, "closed" if it
    closed without one, None if it is still silent."""
    try:
        data = await asyncio.wait_for(reader.read(4096), seconds)
    except TimeoutError:
        return None
    except ConnectionError:
        return "reset"
    return status_of(data)


async def slow_upload(
    port: int,
    path: str,
    token: str | None,
    stop: asyncio.Event,
    ended: Counter,
    source: str = "127.0.0.1",
    declared: int = 1000,
    reconnect_s: float = 1.0,
) -> None:
    """Until ``stop``: a POST whose body comes one byte a second, again on a
    new connection ``reconnect_s`` after the server ends one (an attacker does
    not give up)."""
    auth = b"" if token is None else b"Authorization: Bearer %s\r\n" % token.encode()
    head = (
        b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s"
        b"Content-Length: %d\r\n\r\n" % (path.encode(), auth, declared)
    )
    while not stop.is_set():
        try:
            reader, writer = await connect(port, source)
        except OSError:
            ended["connect failed"] += 1
            await asyncio.sleep(0.2)
            continue
        outcome = None
        try:
            writer.write(head)
            while not stop.is_set() and outcome is None:
                writer.write(b" ")
                await writer.drain()
                outcome = await answer_within(reader, 1.0)
        except ConnectionError:
            outcome = "reset"
        finally:
            writer.close()
        if outcome is not None:
            ended[outcome] += 1
            await asyncio.sleep(reconnect_s)


async def slowloris(port: int, stop: asyncio.Event, ended: Counter, source: str) -> None:
    """Until ``stop`` or the server ends it: one request head, a byte a second."""
    head = b"GET /v1/brokers HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 10_000
    reader, writer = await connect(port, source)
    outcome = None
    try:
        for byte in head:
            if stop.is_set():
                break
            writer.write(bytes([byte]))
            await writer.drain()
            outcome = await answer_within(reader, 1.0)
            if outcome is not None:
                break
    except ConnectionError:
        outcome = "reset"
    finally:
        writer.close()
    ended[outcome or "still open"] += 1
