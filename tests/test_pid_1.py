"""A voter that is pid 1, as ``metaquorum serve`` is in every container (the
image's ENTRYPOINT, the StatefulSet's command): each voter here runs as pid 1
of a pid namespace of its own. Pid 1 is special twice over: its children see
a parent of pid 1 (which had meant "the core died" to HTTP workers
and the orderer), and the kernel delivers it only the signals it has a
handler for (a SIGTERM while it started was dropped)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from .cluster import Cluster, holds_for
from .conftest import running
from .test_cluster import brokers, register

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _needs_pid_namespaces():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        why = "a pid namespace of the voter's own needs root and unshare"
        if os.environ.get("METAQUORUM_CI"):
            pytest.fail(why + " (CI has both)")
        pytest.skip(why)


# The command after it is pid 1 of a pid namespace of its own; unshare kills
# it when it is killed (--kill-child), and the kernel then every process left
# in the namespace.
AS_PID_1 = ["unshare", "--pid", "--fork", "--kill-child"]


def child_of(unshare: int, timeout_s: float = 10.0) -> int:
    """The process unshare started (pid 1 in there), by its pid out here."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(f"/proc/{unshare}/task/{unshare}/children") as f:
            children = f.read().split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise AssertionError(f"unshare ({unshare}) started nothing within {timeout_s} s")


class InPidNamespace(Cluster):
    """Each voter is pid 1 of a pid namespace of its own."""

    def args(self, i: int) -> list[str]:
        return [*AS_PID_1, *super().args(i)]

    def voter_pid(self, i: int) -> int:
        return child_of(self.procs[i].pid)


def status_field(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/status") as f:
        return next(line for line in f if line.startswith(name + ":")).split(":", 1)[1]


def test_a_core_that_is_pid_1_keeps_its_workers_and_orderer(tmp_path):
    # Workers and the orderer once took a parent of pid 1 for a dead core and
    # exited at start: in every container, a crash loop and no leader kept.
    with running(InPidNamespace(tmp_path, voters=1, extra=["--http-workers", "1"])) as c:
        assert status_field(c.voter_pid(0), "NSpid").split()[-1] == "1"
        assert register(c, 0, 1) > 0  # through the worker and the orderer

        def nothing_restarted():
            status = c.status(0)
            assert [w["restarts"] for w in status["httpWorkers"]] == [0], status["httpWorkers"]
            assert status["ordererProcess"]["alive"], status["ordererProcess"]
            assert status["ordererProcess"]["restarts"] == 0, status["ordererProcess"]

        holds_for(3.0, nothing_restarted, every=0.5)
        assert register(c, 0, 2) > 0 and brokers(c, 0).keys() == {1, 2}
        assert "exited with code" not in c.tail(0, 200), c.tail(0, 200)


def test_pid_1_keeps_sigterms_default_action_until_serve_takes_it(tmp_path):
    # What ``metaquorum``'s main() does first, in a process that only sleeps:
    # without it, this SIGTERM is dropped (and, in serve, every SIGTERM that
    # comes before serve's own handler: imports, journal replay).
    script = (
        "import sys, time\n"
        "from metaquorum.cli import stop_on_sigterm_as_pid_1\n"
        "if sys.argv[1] == 'handled':\n"
        "    stop_on_sigterm_as_pid_1()\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    for mode, code in (("handled", 128 + signal.SIGTERM), ("bare", None)):
        proc = subprocess.Popen(
            [*AS_PID_1, sys.executable, "-c", script, mode],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout.readline() == "up\n"
            os.kill(child_of(proc.pid), signal.SIGTERM)
            try:
                got = proc.wait(timeout=2 if code is None else 15)
            except subprocess.TimeoutExpired:
                got = None  # dropped: pid 1 had no handler
            assert got == code, (mode, got)
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("workers", [0, 1])
def test_sigterm_stops_a_voter_that_is_pid_1_without_a_quorum(tmp_path, workers):
    # Voter 0 of three whose others never start: serving, never ready, as a
    # pod whose peers are not scheduled.
    c = InPidNamespace(tmp_path, voters=3, extra=["--http-workers", str(workers)])
    try:
        c.start(0)
        voter = c.voter_pid(0)
        c.wait(lambda: c.status(0) is not None, 60, "voter 0 answering")
        assert not c.ready(0)
        os.kill(voter, signal.SIGTERM)
        code = c.procs[0].wait(timeout=15)  # unshare ends with its child's status
        assert code == 0, (code, c.tail(0))
    finally:
        c.close()


def test_sigterm_stops_a_ready_voter_that_is_pid_1_gracefully(tmp_path):
    with running(InPidNamespace(tmp_path, voters=1)) as c:
        os.kill(c.voter_pid(0), signal.SIGTERM)
        assert c.procs[0].wait(timeout=20) == 0, c.tail(0)
        assert "stopping: transferring leadership if leading" in c.tail(0)
