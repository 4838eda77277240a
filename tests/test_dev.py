"""``metaquorum dev --nodes 3``: three local voters, stopped together on Ctrl-C."""

import functools
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from .nodes import free_port, kill_processes_mentioning


def _default_sigint() -> None:
    # A test run started in the background (``cmd &`` in a script) ignores
    # SIGINT, and children inherit that: this test's Ctrl-C must arrive.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_dev(tmp_path, base: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "metaquorum.cli", "dev", "--nodes", "3",
         "--data-dir", str(tmp_path), "--http-port", str(base), "--fsync", "never", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip


def read_until(proc: subprocess.Popen, marker: str, timeout_s: float) -> str:
    """Its output up to the line holding ``marker`` (asserted, with all output)."""
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            break
    out = "".join(lines)
    assert marker in out, out
    return out


@pytest.mark.slow
def test_dev_runs_three_voters_and_stops_them_together(tmp_path):
    base = free_port(span=6)  # dev --nodes 3 uses base .. base + 5
    proc = start_dev(tmp_path, base)
    try:
        out = read_until(proc, "Ctrl-C stops all voters", 90)
        assert "curl -sL -X POST" in out and "/v1/brokers/register" in out
        statuses = [
            httpx.get(f"http://127.0.0.1:{base + 2 * i}/v1/quorum/status").json() for i in range(3)
        ]
        assert len({s["clusterId"] for s in statuses}) == 1
        assert {s["leaderId"] for s in statuses} <= {0, 1, 2}
        # The main job run a second time on the same data dir, --fresh even:
        # refused before it touches anything, naming the earlier cluster.
        again = subprocess.run(
            [sys.executable, "-m", "metaquorum.cli", "dev", "--nodes", "3", "--fresh",
             "--data-dir", str(tmp_path), "--http-port", str(base)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert again.returncode == 2, again.stdout + again.stderr
        assert f"an earlier cluster still runs on {tmp_path}" in again.stderr, again.stderr
        assert f"pid {proc.pid}" in again.stderr, again.stderr
        assert (tmp_path / "node-0" / "raft.journal").exists()
        after = httpx.get(f"http://127.0.0.1:{base}/v1/quorum/status").json()
        assert after["clusterId"] == statuses[0]["clusterId"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        for i in range(3):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{base + 2 * i}/livez", timeout=1)
    finally:
        stop_all(proc, tmp_path)


def stop_all(proc: subprocess.Popen, tmp_path) -> None:
    # The voters run in sessions of their own: find them by their data dir.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    kill_processes_mentioning(str(tmp_path))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_dev_with_simulated_brokers_is_the_main_job_and_stops_cleanly(tmp_path):
    """``make run``: voters, then brokers with chaos; Ctrl-C stops the brokers
    cleanly (controlled shutdown), checks the log, then stops the voters."""
    base = free_port(span=6)  # dev --nodes 3 uses base .. base + 5
    proc = start_dev(tmp_path, base, "--sim", "--sim-brokers", "6")
    try:
        out = read_until(proc, "running with chaos", 120)
        assert f"http://127.0.0.1:{base}/docs" in out and "curl -s" in out
        brokers = httpx.get(f"http://127.0.0.1:{base}/v1/brokers").json()
        assert len(brokers["brokers"]) == 6, brokers
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        rest, _ = proc.communicate(timeout=150)
        out += rest
        assert proc.returncode == 0, out[-3000:]
        assert "OK: no invariant violated" in out, out[-3000:]
        assert "settled after chaos" in out
        for i in range(3):
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{base + 2 * i}/livez", timeout=1)
    finally:
        stop_all(proc, tmp_path)


def _brokers(base: int) -> list[dict]:
    return httpx.get(f"http://127.0.0.1:{base}/v1/brokers", timeout=5).json()["brokers"]


def _poll(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except (httpx.HTTPError, KeyError, ValueError):
            pass  # a voter between leaders, or not up yet
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_main_job_killed_while_stopping_comes_back_settled(tmp_path):
    """Issue 18: make run, Ctrl-C, then everything killed (terminal closed,
    kill -9) while the brokers are in controlled shutdown; make run again on
    the same data dir, without --fresh, must come back to a settled cluster."""
    base = free_port(span=6)
    proc = start_dev(tmp_path, base, "--sim", "--sim-brokers", "6")
    try:
        read_until(proc, "running with chaos", 120)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: settle, then controlled shutdowns
        _poll(
            lambda: any(b["inControlledShutdown"] and not b["fenced"] for b in _brokers(base)),
            90,
        )  # caught mid-stop if we can; a clean stop wedged the rerun too
    finally:
        stop_all(proc, tmp_path)  # kill -9 of dev and of every voter
    proc = start_dev(tmp_path, base, "--sim", "--sim-brokers", "6")
    try:
        read_until(proc, "running with chaos", 120)

        def settled() -> bool:
            brokers = _brokers(base)
            return len(brokers) == 6 and all(
                not b["fenced"] and not b["inControlledShutdown"] for b in brokers
            )

        assert _poll(settled, 60), _brokers(base)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=150)
        assert proc.returncode == 0, rest[-3000:]
        assert "settled after chaos" in rest and "NO (" not in rest, rest[-3000:]
    finally:
        stop_all(proc, tmp_path)


@pytest.mark.slow
def test_dev_tls_serves_https_and_its_curl_commands_work(tmp_path):
    """``dev --tls``: a throwaway CA in the data dir; the printed curl
    commands carry --cacert, --cert and --key, and work as printed."""
    base = free_port(span=6)
    proc = start_dev(tmp_path, base, "--tls")
    try:
        out = read_until(proc, "Ctrl-C stops all voters", 90)
        url = f"https://127.0.0.1:{base}"
        tls = tmp_path / "tls"
        flags = f"--cacert {tls}/ca.crt --cert {tls}/admin-dev.crt --key {tls}/admin-dev.key"
        lines = [line.strip() for line in out.splitlines()]
        read = next(line for line in lines if "/v1/brokers?consistency=linearizable" in line)
        create = next(line for line in lines if line.endswith('"replicationFactor": 1}]}\''))
        assert read == f"curl -s {flags} '{url}/v1/brokers?consistency=linearizable'"
        assert create.startswith(f"curl -sL {flags} -X POST")
        if shutil.which("curl"):
            ran = subprocess.run(read, shell=True, capture_output=True, text=True, timeout=30)
            assert '"brokers":[]' in ran.stdout, ran
            ran = subprocess.run(create, shell=True, capture_output=True, text=True, timeout=30)
            assert '"name":"orders"' in ran.stdout, ran
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{url}/livez", timeout=5)  # the system's CAs do not know the dev CA
        ca = ssl.create_default_context(cafile=str(tls / "ca.crt"))
        r = httpx.get(f"{url}/v1/brokers", verify=ca, timeout=5)
        assert r.status_code == 401  # no client certificate, no token
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        stop_all(proc, tmp_path)


def test_a_voter_whose_dev_process_died_before_its_prctl_does_not_start():
    """PR_SET_PDEATHSIG only covers a parent that dies after it: a voter whose
    ``metaquorum dev`` is already gone (its parent is not the pid it was
    started by) exits before it runs; one whose parent lives runs."""
    from metaquorum.dev import _voter_preexec

    orphan = subprocess.run(
        ["sleep", "30"], preexec_fn=functools.partial(_voter_preexec, 1), timeout=20
    )
    assert orphan.returncode == 1
    kept = subprocess.run(
        ["true"], preexec_fn=functools.partial(_voter_preexec, os.getpid()), timeout=20
    )
    assert kept.returncode == 0
