"""Network namespaces, a bridge and the network faults between them.

Each voter lives in its own namespace with one veth pair plugged into a bridge
in the root namespace; the bridge has an address too, so the workload (in the
root namespace) reaches every voter over it. Addresses come from a private
10.x.y.0/24 that no route on the machine uses.

Faults, and why each tool:

* partitions: ``blackhole`` routes inside the namespaces (pure iproute2, no
  kernel module beyond routing). A /32 blackhole beats the bridge's connected
  /24, so packets to the cut peer are dropped silently, as on a real cut
  link (TCP retransmits, nothing is refused). Added on both sides of a cut.
* a node offline: its veth is set down on the bridge side (cut from the
  workload too).
* packet loss: iptables' ``statistic`` match (random DROP) in the namespace;
  CI installs iptables when missing.
* packet delay: netem when the kernel has it; kernels built without netem (the
  CI machines') get a tbf rate limit instead (a slow link: packets queue up
  to a second), and the fault is reported as ``slow-link``.

Names carry the owning pid, so a later run can tell a crashed run's leftovers
(pid gone: removed at setup) from a run going on in parallel (left alone).
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shutil
import signal
import subprocess

NS_PREFIX = "mqnem-"  # namespaces: mqnem-<pid>-<tag>-<i>
LINK_PREFIX = "mqn"  # bridge mqnb<tag>, host-side veths mqnv<tag><i> (15 chars at most)
ALIAS = "metaquorum-nemesis pid="


class NetnsError(RuntimeError):
    """A namespace command failed; the message carries the command and its stderr."""


def run(*cmd: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def netns_unavailable_reason() -> str | None:
    """Why this machine cannot run the namespace tests (not root), or None.

    Only that is a reason to skip: a root machine without the tools fails with
    what to install (``require_tools``), never skips."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); run as root, as CI does"
    return None


def require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        packages = " ".join("iproute2" if t in ("ip", "tc") else t for t in missing)
        raise NetnsError(
            f"{', '.join(missing)} not installed: apt-get install {packages} "
            "(.ci/run installs them when missing)"
        )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers() -> list[str]:
    """Removes namespaces and bridges of nemesis runs whose process is gone
    (a crashed or killed run); kills what still runs inside them."""
    removed = []
    for line in run("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        m = re.fullmatch(re.escape(NS_PREFIX) + r"(\d+)-\w+-\d+", name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGCONT)
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        run("ip", "netns", "del", name, check=False)
        removed.append(name)
    for line in run("ip", "-o", "link", "show", "type", "bridge").stdout.splitlines():
        m = re.match(r"\d+: (" + LINK_PREFIX + r"b\w+)[:@].*" + re.escape(ALIAS) + r"(\d+)", line)
        if m and not _pid_alive(int(m.group(2))):
            run("ip", "link", "del", m.group(1), check=False)
            removed.append(m.group(1))
    return removed


def _free_subnet(rng: random.Random) -> ipaddress.IPv4Network:
    used = [
        ipaddress.ip_network(word, strict=False)
        for line in run("ip", "-4", "route", "show", "table", "all").stdout.splitlines()
        for word in line.split()[:1]
        if re.fullmatch(r"\d+\.\d+\.\d+\.\d+(/\d+)?", word)
    ] + [
        ipaddress.ip_interface(word).network
        for line in run("ip", "-4", "-o", "addr").stdout.splitlines()
        for word in line.split()
        if re.fullmatch(r"\d+\.\d+\.\d+\.\d+/\d+", word)
    ]
    for _ in range(200):
        net = ipaddress.ip_network(f"10.{rng.randrange(64, 250)}.{rng.randrange(256)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise NetnsError("no free 10.x.y.0/24 subnet found for the test bridge")


class Network:
    """``n`` namespaces on one bridge. ``setup`` builds it, ``teardown`` removes
    all of it (idempotent; call it in a finally)."""

    def __init__(self, n: int, rng: random.Random | None = None) -> None:
        rng = rng or random.Random()
        self.n = n
        self.tag = f"{rng.randrange(16**4):04x}"
        self.namespaces = [f"{NS_PREFIX}{os.getpid()}-{self.tag}-{i}" for i in range(n)]
        self.bridge = f"{LINK_PREFIX}b{self.tag}"
        self.veths = [f"{LINK_PREFIX}v{self.tag}{i}" for i in range(n)]
        self.subnet = _free_subnet(rng)
        hosts = list(self.subnet.hosts())
        self.bridge_ip = str(hosts[0])
        self.ips = [str(hosts[9 + i]) for i in range(n)]
        self.cuts: set[frozenset[int]] = set()
        self.down: set[int] = set()
        self.shaped: set[int] = set()
        self._built = False
        self._netem: bool | None = None

    # ------------------------------------------------------------ build and remove

    def setup(self) -> Network:
        require_tools("ip", "tc")
        clean_leftovers()
        self._built = True
        prefix = self.subnet.prefixlen
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "link", "set", self.bridge, "alias", f"{ALIAS}{os.getpid()}")
        run("ip", "addr", "add", f"{self.bridge_ip}/{prefix}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for i, ns in enumerate(self.namespaces):
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", self.veths[i], "type", "veth", "peer", "name", "eth0",
                "netns", ns)  # fmt: skip
            run("ip", "link", "set", self.veths[i], "master", self.bridge, "up")
            run("ip", "-n", ns, "addr", "add", f"{self.ips[i]}/{prefix}", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    def teardown(self) -> None:
        if not self._built:
            return
        for ns in self.namespaces:
            for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGCONT)
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            run("ip", "netns", "del", ns, check=False)  # takes its veth pair with it
        run("ip", "link", "del", self.bridge, check=False)
        self._built = False

    def exec_prefix(self, i: int) -> list[str]:
        """Prepend to a command to run it inside voter ``i``'s namespace."""
        return ["ip", "netns", "exec", self.namespaces[i]]

    # ------------------------------------------------------------ partitions

    def cut(self, a: int, b: int) -> None:
        """No packet between ``a`` and ``b`` either way (the workload still reaches both)."""
        if frozenset((a, b)) in self.cuts:
            return
        run("ip", "-n", self.namespaces[a], "route", "add", "blackhole", f"{self.ips[b]}/32")
        run("ip", "-n", self.namespaces[b], "route", "add", "blackhole", f"{self.ips[a]}/32")
        self.cuts.add(frozenset((a, b)))

    def partition(self, *groups: list[int]) -> None:
        """Cuts every pair of voters that are in different groups."""
        where = {i: g for g, members in enumerate(groups) for i in members}
        for a in range(self.n):
            for b in range(a + 1, self.n):
                if where.get(a, -1 - a) != where.get(b, -1 - b):
                    self.cut(a, b)

    def heal_cuts(self) -> None:
        for ns in self.namespaces:
            run("ip", "-n", ns, "route", "flush", "type", "blackhole", check=False)
        self.cuts.clear()

    def offline(self, i: int) -> None:
        """Voter ``i`` cut from everyone, the workload included (its bridge port down)."""
        run("ip", "link", "set", self.veths[i], "down")
        self.down.add(i)

    def online(self, i: int) -> None:
        run("ip", "link", "set", self.veths[i], "up")
        self.down.discard(i)

    # ------------------------------------------------------------ loss and delay

    def loss(self, i: int, fraction: float) -> None:
        """Drops ``fraction`` of the packets voter ``i`` sends and receives."""
        require_tools("iptables")
        for chain in ("INPUT", "OUTPUT"):
            run(*self.exec_prefix(i), "iptables", "-A", chain, "-m", "statistic", "--mode",
                "random", "--probability", f"{fraction:.3f}", "-j", "DROP")  # fmt: skip
        self.shaped.add(i)

    def has_netem(self) -> bool:
        """Whether the kernel has netem (probed once, on voter 0's veth)."""
        if self._netem is None:
            ns = self.namespaces[0]
            probe = run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root",
                        "netem", "delay", "1ms", check=False)  # fmt: skip
            self._netem = probe.returncode == 0
            run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root",
                check=False)  # fmt: skip
        return self._netem

    def delay(self, i: int, ms: int, jitter_ms: int) -> str:
        """Slows what voter ``i`` sends; returns the kind it could do: ``delay``
        (netem) or ``slow-link`` (tbf, on kernels without netem)."""
        tc = [*self.exec_prefix(i), "tc", "qdisc", "add", "dev", "eth0", "root"]
        if self.has_netem():
            run(*tc, "netem", "delay", f"{ms}ms", f"{jitter_ms}ms")
            kind = "delay"
        else:
            # ~256 kbit/s with a one-second queue: bursts (appends, snapshots) wait.
            run(*tc, "tbf", "rate", "256kbit", "burst", "4kb", "latency", "1s")
            kind = "slow-link"
        self.shaped.add(i)
        return kind

    def heal_shaping(self) -> None:
        for i in list(self.shaped):
            run(*self.exec_prefix(i), "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
            if shutil.which("iptables"):
                run(*self.exec_prefix(i), "iptables", "-F", check=False)
        self.shaped.clear()

    def heal(self) -> None:
        """Every fault undone: cuts, offline ports, loss and delay."""
        self.heal_cuts()
        for i in list(self.down):
            self.online(i)
        self.heal_shaping()
