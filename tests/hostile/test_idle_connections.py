"""Finding 2: connections that send nothing, or their head a byte a second,
are closed, and never crowd out real clients. Before: 2,000 silent
connections stayed open for good and, against a voter whose open-file limit
was 1,024, 10 of 10 normal requests failed with nothing logged."""

from __future__ import annotations

import asyncio
import resource
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.tls_files import TlsFiles

from .attackers import answer_within, connect, hostile_cluster, slowloris

SILENT = 2000
SOURCES = [f"127.0.0.{i}" for i in range(2, 10)]  # 250 silent connections from each
HEAD_TIMEOUT_S = 10.0


@pytest.fixture
def many_sockets():
    """This process opens 2,000+ sockets: raise its own soft open-file limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = SILENT + 500
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.fail(f"this test needs {need} open files; the hard limit is {hard}: raise it")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
def test_2000_silent_connections_neither_stay_nor_crowd_out_requests(tmp_path, many_sockets):
    with hostile_cluster(tmp_path, nofile=1024) as c:
        report = asyncio.run(_flood(c))
        metrics = c.get(0, "/metrics").text
        log = c.logs[0].read_text(errors="replace")
        alive = c.alive(0)

    statuses, silent_ended, loris, open_after = report
    assert alive
    assert "http: up to 896 connections" in log  # 1,024 less the process's own reserve
    # Every normal request was answered, while the silent ones were held.
    assert set(statuses) == {200} and statuses[200] >= 20, statuses
    # The silent ones were all closed: at the caps (the longest-waiting first)
    # or at the head deadline; the half-sent heads were told 408.
    assert silent_ended["still open"] == 0, silent_ended
    assert sum(silent_ended.values()) == SILENT
    assert loris["408"] == len(SOURCES), loris
    assert open_after <= 5, open_after
    assert "connection limits bite" in log
    assert "Too many open files" not in log and "out of system resource" not in log
    assert 'metaquorum_http_connections_evicted_total{cap="total"}' in metrics
    evicted = _metric(metrics, 'metaquorum_http_connections_evicted_total{cap="total"}')
    timed_out = _metric(metrics, 'metaquorum_http_connections_timed_out_total{phase="head"}')
    assert evicted > 0 and timed_out > 0, (evicted, timed_out)


@pytest.mark.slow
def test_2000_silent_connections_to_a_tls_port_are_counted_and_closed(tmp_path, many_sockets):
    """Over TLS the handshake was asyncio's, before the connection was
    counted, with 60 s to finish: 2,000 TCP connections that never send a
    ClientHello held 2,000 descriptors of a voter that has 1,024, uncounted.
    Now each is counted before its handshake, evicted as an idle one at the
    caps, or closed at the head deadline; HTTPS clients are answered all along."""
    tls = TlsFiles(tmp_path / "tls")
    with hostile_cluster(tmp_path, nofile=1024, tls=tls) as c:
        statuses, ended, open_after, metrics = asyncio.run(_silent_flood_over_tls(c, tls))
        log = c.logs[0].read_text(errors="replace")
        alive = c.alive(0)
    assert alive
    assert set(statuses) == {200} and statuses[200] >= 20, statuses
    assert ended["still open"] == 0 and sum(ended.values()) == SILENT, ended
    assert open_after <= 5, open_after
    assert "refused before its TLS handshake" not in log  # idle ones were evicted instead
    assert "Too many open files" not in log and "out of system resource" not in log
    evicted = _metric(metrics, 'metaquorum_http_connections_evicted_total{cap="total"}')
    timed_out = _metric(metrics, 'metaquorum_http_connections_timed_out_total{phase="head"}')
    assert evicted > 0 and timed_out > 0 and evicted + timed_out >= SILENT - 5, (
        evicted,
        timed_out,
    )


async def _silent_flood_over_tls(c, tls):
    port = c.http[0]
    silent = [await connect(port, SOURCES[i % len(SOURCES)]) for i in range(SILENT)]
    statuses = await _requests_while_held(c, verify=tls.context())
    ended = await _how_they_ended(silent)
    metrics = await asyncio.to_thread(lambda: c.get(0, "/metrics").text)
    return statuses, ended, _metric(metrics, "metaquorum_http_open_connections"), metrics


async def _requests_while_held(c, **client_kw) -> Counter:
    """Normal requests, a new connection (and handshake) each, every 0.2 s
    while the silent ones are held, until the deadline has closed them."""
    statuses: Counter = Counter()
    started = time.monotonic()
    async with httpx.AsyncClient(
        headers={"Authorization": "Bearer read-token"},
        timeout=5.0,
        limits=httpx.Limits(max_keepalive_connections=0),
        **client_kw,
    ) as client:
        while time.monotonic() - started < HEAD_TIMEOUT_S + 3:
            try:
                r = await client.get(c.url(0) + "/v1/brokers")
                statuses[r.status_code] += 1
            except httpx.HTTPError as e:
                statuses[type(e).__name__] += 1
            await asyncio.sleep(0.2)
    return statuses


async def _how_they_ended(silent) -> Counter:
    """How each silent connection ended (closed by the server, answered) or
    "still open"; then they are closed here."""
    ended: Counter = Counter()
    outcomes = await asyncio.gather(*(answer_within(r, 5.0) for r, _ in silent))
    for outcome in outcomes:
        ended[outcome or "still open"] += 1
    for _, writer in silent:
        writer.close()
    return ended


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


async def _flood(c):
    port = c.http[0]
    stop = asyncio.Event()
    loris: Counter = Counter()
    silent = []
    for i in range(SILENT):
        silent.append(await connect(port, SOURCES[i % len(SOURCES)]))
    # Started last, so not the longest-waiting: they meet the head deadline.
    slow_heads = [asyncio.ensure_future(slowloris(port, stop, loris, s)) for s in SOURCES]
    statuses = await _requests_while_held(c)
    ended = await _how_they_ended(silent)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*slow_heads), 10)
    status = await asyncio.to_thread(lambda: c.get(0, "/metrics").text)
    open_after = _metric(status, "metaquorum_http_open_connections")
    return statuses, ended, loris, open_after


def test_serve_raises_its_soft_open_file_limit_to_the_hard_one(tmp_path):
    with hostile_cluster(tmp_path, nofile=1024, hard_nofile=4096) as c:
        log = c.logs[0].read_text(errors="replace")
        pid = c.procs[0].pid
        limits = Path(f"/proc/{pid}/limits").read_text()
    assert "open-file limit 4096" in log and "up to 3968 connections" in log, log
    line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
    assert line.split()[3:5] == ["4096", "4096"], line
