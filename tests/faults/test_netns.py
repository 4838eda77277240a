"""The fault primitives on their own: namespaces come up and go away, a cut
blocks both ways and heals, an offline port cuts the workload too, and the
voter's pid is the serve process itself (so SIGSTOP reaches it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from .netns import Network, clean_leftovers, netns_unavailable_reason, run

_why = netns_unavailable_reason()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

# A tiny TCP echo server, run inside a namespace.
ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7099)); s.listen()
while True:
    c, _ = s.accept(); c.sendall(c.recv(100)); c.close()
"""


def reaches(net: Network, src: int | None, dst: int, timeout: float = 0.5) -> bool:
    """Whether a TCP connection from ``src`` (None = the root namespace) to ``dst`` echoes."""
    code = (
        "import socket,sys\n"
        f"s=socket.create_connection(('{net.ips[dst]}',7099),timeout={timeout})\n"
        "s.sendall(b'hi'); sys.exit(0 if s.recv(10)==b'hi' else 1)"
    )
    if src is None:
        try:
            with socket.create_connection((net.ips[dst], 7099), timeout=timeout) as s:
                s.sendall(b"hi")
                return s.recv(10) == b"hi"
        except OSError:
            return False
    proc = subprocess.run(
        [*net.exec_prefix(src), sys.executable, "-c", code], capture_output=True, timeout=30
    )
    return proc.returncode == 0


def wait_for(predicate, timeout_s: float = 20.0, what: str = "condition") -> None:
    if not _within(predicate, timeout_s):
        raise AssertionError(f"{what} not reached within {timeout_s} s")


def _within(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _cmdline(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError as e:
        return f"({e.strerror})"


@pytest.fixture
def net():
    network = Network(3)
    servers = []
    try:
        network.setup()
        for i in range(3):
            servers.append(subprocess.Popen([*network.exec_prefix(i), sys.executable, "-c", ECHO]))
        wait_for(lambda: all(reaches(network, None, i) for i in range(3)), what="echo servers up")
        yield network
    finally:
        for p in servers:
            p.kill()
            p.wait(timeout=10)
        network.teardown()


@pytest.mark.slow
def test_namespaces_come_up_and_go_away_without_leftovers(net):
    namespaces = run("ip", "netns", "list").stdout
    assert all(ns in namespaces for ns in net.namespaces)
    assert net.bridge in run("ip", "link", "show", net.bridge).stdout
    assert all(reaches(net, a, b) for a in range(3) for b in range(3) if a != b)
    net.teardown()
    namespaces = run("ip", "netns", "list").stdout
    assert not any(ns in namespaces for ns in net.namespaces)
    assert run("ip", "link", "show", net.bridge, check=False).returncode != 0
    assert clean_leftovers() == []  # nothing of a dead run either


@pytest.mark.slow
def test_a_cut_blocks_both_ways_and_heals(net):
    net.cut(0, 1)
    assert not reaches(net, 0, 1) and not reaches(net, 1, 0)
    assert reaches(net, 0, 2) and reaches(net, 2, 1)  # the bridge partition: 2 sees both
    assert reaches(net, None, 0) and reaches(net, None, 1)  # the workload sees everyone
    net.heal()
    assert reaches(net, 0, 1) and reaches(net, 1, 0)


@pytest.mark.slow
def test_isolating_one_voter_is_a_majority_minority_partition(net):
    net.partition([0], [1, 2])
    assert not reaches(net, 0, 1) and not reaches(net, 2, 0)
    assert reaches(net, 1, 2)
    net.heal()
    assert reaches(net, 0, 1) and reaches(net, 2, 0)


@pytest.mark.slow
def test_an_offline_voter_is_cut_from_the_workload_too(net):
    net.offline(1)
    assert not reaches(net, None, 1) and not reaches(net, 0, 1)
    net.heal()
    wait_for(lambda: reaches(net, None, 1), what="voter 1 back online")


@pytest.mark.slow
def test_loss_and_delay_are_applied_and_removed(net):
    net.loss(0, 1.0)  # all of it: nothing gets through (NetnsError: install iptables)
    assert not reaches(net, None, 0)
    net.heal()
    assert reaches(net, None, 0)
    kind = net.delay(0, 100, 10)
    assert kind in ("delay", "slow-link")
    qdisc = run(*net.exec_prefix(0), "tc", "qdisc", "show", "dev", "eth0").stdout
    assert ("netem" if kind == "delay" else "tbf") in qdisc
    assert reaches(net, None, 0, timeout=5.0)  # slowed, not cut
    net.heal()
    qdisc = run(*net.exec_prefix(0), "tc", "qdisc", "show", "dev", "eth0").stdout
    assert "netem" not in qdisc and "tbf" not in qdisc


@pytest.mark.slow
def test_the_popen_pid_is_the_process_inside_the_namespace(net):
    proc = subprocess.Popen(
        [*net.exec_prefix(2), sys.executable, "-c", "import time; time.sleep(60)"]
    )
    try:
        wait_for(lambda: b"time.sleep" in open(f"/proc/{proc.pid}/cmdline", "rb").read())

        def in_namespace() -> bool:
            return str(proc.pid) in run("ip", "netns", "pids", net.namespaces[2]).stdout.split()

        # Waited for: one CI run under load saw `ip netns pids` list another
        # pid (one below the child's) and not the child; the message says
        # which processes the namespace held, should it happen again.
        if not _within(in_namespace, 10.0):
            held = run("ip", "netns", "pids", net.namespaces[2]).stdout.split()
            lines = [f"{p}: {_cmdline(p)}" for p in held]
            raise AssertionError(f"pid {proc.pid} not in the namespace, which holds {lines}")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_leftovers_of_a_dead_run_are_removed_and_a_live_runs_kept():
    dead, live = 2**22 + 12345, os.getpid()  # beyond pid_max's default: never alive
    while _alive(dead):
        dead += 1
    names = [f"mqnem-{dead}-dead-0", f"mqnem-{live}-live-0"]
    bridges = {"mqnbdea0": dead, "mqnblve0": live}
    try:
        for ns in names:
            run("ip", "netns", "add", ns)
        for bridge, pid in bridges.items():
            run("ip", "link", "add", bridge, "type", "bridge")
            run("ip", "link", "set", bridge, "alias", f"metaquorum-nemesis pid={pid}")
        removed = clean_leftovers()
        assert names[0] in removed and "mqnbdea0" in removed
        assert names[1] not in removed and "mqnblve0" not in removed
        assert names[1] in run("ip", "netns", "list").stdout
    finally:
        for ns in names:
            run("ip", "netns", "del", ns, check=False)
        for bridge in bridges:
            run("ip", "link", "del", bridge, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
