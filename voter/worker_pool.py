"""``serve --http-workers N``: the HTTP API in N worker processes in front of
the core and the orderer (issue 26; docs/decisions.md 95, 118-119, 122).

The core (the ``serve`` process) reserves the API port, serves no HTTP itself
(it answers what the workers forward) and keeps Raft: pysyncobj, the journal,
the Raft port, membership. The orderer process
(voter/orderer_process.py) keeps what orders writes: the controller and
group commit (quorum/orderer.py). This pool starts, watches and restarts both
the orderer and the workers. Each worker listens on the port with SO_REUSEPORT,
inherits one end of a socket pair to the core (its link, voter/link.py)
and one to the orderer, which its writes take, and does the work that needs no
shared state: HTTP, TLS, auth, limits and admission, JSON, redirects, reads
from the image it follows. A worker that dies is started again; its clients'
requests in flight get an error or an unknown outcome, never an
acknowledgement it did not earn.

Run as ``python -m voter.worker_pool CONFIG_JSON`` by the core only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("metaquorum.http_workers")

EXIT_LINK_LOST = 3
# An orderer process silent this long (it reports every half second) is
# frozen or stuck in a decision: it is killed and started again, or the
# voter would keep leading while no write is ever answered. A worker silent
# this long (it reports every second) is killed and started again too: frozen,
# it holds the connections the port gives it unanswered, and the core would
# buffer every committed batch for it. Silence counts from a process's last
# frame, and not while it loads an image (core_link.WorkerLink.heard_at).
ORDERER_SILENT_S = 10.0
WORKER_SILENT_S = 10.0
# An orderer that died this many times in a row (each within a minute of its
# start) on the leader: the leader hands leadership to another voter, whose
# orderer may order, instead of leading a cluster that no write reaches.
ORDERER_HANDOVER_AFTER = 2
RESTART_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)  # by restarts in a row within a minute
IMAGE_WAIT_S = 300.0  # a large image takes a while to encode and load
STATS_EVERY_S = 1.0


def available_cpus() -> int:
    """The CPUs this process may use: its affinity, and a cgroup v2 CPU quota
    (a Kubernetes CPU limit) below it; os.cpu_count() is the host's."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    return cpus


# Below this many CPUs a voter serves HTTP in one process (decision 99): a
# worker and the core on two CPUs measured no faster than one process
# (bench/cores.py), and on one CPU a worker only adds the link's cost.
MIN_CPUS_FOR_WORKERS = 3


def default_workers(cpus: int | None = None) -> int:
    """``auto``: one worker per CPU left after the core and the orderer
    process (at least one); none below MIN_CPUS_FOR_WORKERS CPUs."""
    cpus = available_cpus() if cpus is None else cpus
    return max(1, cpus - 2) if cpus >= MIN_CPUS_FOR_WORKERS else 0


def parse_workers(value: Any) -> int:
    """``--http-workers``: a count (0: the single-process layout), or ``auto``."""
    text = str(value).strip().lower()
    if text == "auto":
        return default_workers()
    try:
        count = int(text)
    except ValueError:
        raise ValueError(
            f"--http-workers {value!r} is not a number of processes (or 'auto')"
        ) from None
    if not 0 <= count <= 256:
        raise ValueError(f"--http-workers {count}: between 0 (one process) and 256")
    return count


SPREAD_SIGMAS = 4


def share(total: int, workers: int) -> int:
    """A worker's part of a voter-wide limit (each worker enforces its own),
    with room for the kernel's uneven spread. SO_REUSEPORT hashes each new
    connection to a worker, so of ``total`` connections (or their requests) a
    worker gets Binomial(total, 1/workers), not total/workers: with the plain
    quotient, 250 connections from one address to 2 workers under the
    default cap of 256 had one worker over its 128 most of the time, and it
    closed that address's idle connections. Four standard deviations above
    the mean, at most ``total``: a voter then holds a little more than
    ``total`` at worst, never a client's connections under it refused."""
    if workers <= 1:
        return total
    p = 1 / workers
    part = total * p + SPREAD_SIGMAS * math.sqrt(total * p * (1 - p))
    return max(1, min(total, math.ceil(part)))


# ---------------------------------------------------------------- the core's side


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    restarts: int = 0
    restarts_in_row: int = 0
    # The core's end of the process's fd channel (voter/link.send_link),
    # with an orderer process: how its links to the orderer reach it.
    channel: socket.socket | None = None


ORDERER = -1  # the orderer process's index among the pool's processes


class WorkerPool:
    """Starts, watches, restarts and stops the HTTP workers of one core, and
    its orderer process when it has one (voter/orderer_process.py)."""

    def __init__(
        self,
        count: int,
        links: Any,
        config: dict[str, Any],
        orderer: dict[str, Any] | None = None,
    ) -> None:
        self.count = count
        self.links = links  # voter/core_link.CoreLinks
        self.config = config
        self.orderer_config = orderer
        self.workers: dict[int, _Worker] = {}  # the orderer as ORDERER
        self.stopping = False
        self._supervisor: asyncio.Task | None = None

    async def start(self) -> None:
        if self.orderer_config is not None:
            await self._spawn(ORDERER, restarts=0, in_row=0)
        for index in range(self.count):
            await self._spawn(index, restarts=0, in_row=0)
        self._supervisor = asyncio.ensure_future(self._supervise())

    async def _spawn(self, index: int, restarts: int, in_row: int) -> None:
        core_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if index == ORDERER:
            module, config = "voter.orderer_process", self.orderer_config
        else:
            module, config = "voter.worker_pool", {**self.config, "index": index}
        config = {**config, "linkFd": child_end.fileno(), "parentPid": os.getpid()}
        passed = [child_end]
        ring = getattr(self.links, "ring", None)
        if ring is not None:  # the committed batches in shared memory (decision 125)
            config["ringFd"] = ring.fileno()
        channel = None
        if self.orderer_config is not None:  # the workers' writes go to the orderer
            channel, child_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            channel.setblocking(False)
            config["fdChannelFd"] = child_channel.fileno()
            passed.append(child_channel)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", module, json.dumps(config)],
                pass_fds=[sock.fileno() for sock in passed] + ([ring.fileno()] if ring else []),
            )
        except BaseException:
            if channel is not None:
                channel.close()
            raise
        finally:
            for sock in passed:
                sock.close()
        self.workers[index] = _Worker(
            index, process, restarts=restarts, restarts_in_row=in_row, channel=channel
        )
        if index == ORDERER:
            await self.links.attach_orderer(core_end)
            log.info("the orderer process started (pid %d)", process.pid)
            for worker in list(self.workers):
                if worker != ORDERER:
                    self._link_to_orderer(worker)
        else:
            await self.links.attach(index, core_end)
            log.info("HTTP worker %d started (pid %d)", index, process.pid)
            self._link_to_orderer(index)

    def _link_to_orderer(self, index: int) -> None:
        """A new link between worker ``index`` and the orderer process, an
        end handed to each (decision 122): when either of them starts."""
        from .link import send_link  # noqa: PLC0415 - the CLI imports this module

        orderer, worker = self.workers.get(ORDERER), self.workers.get(index)
        if orderer is None or worker is None or orderer.channel is None or worker.channel is None:
            return
        worker_end, orderer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            send_link(orderer.channel, index, orderer_end)
            send_link(worker.channel, 0, worker_end)
        except OSError as e:
            # One of them died meanwhile: the supervisor starts it again, and
            # links it then. A worker whose orderer end is gone sees its link
            # close and refuses writes until the next.
            log.warning("worker %d was not linked to the orderer process: %s", index, e)
        finally:
            worker_end.close()
            orderer_end.close()

    @staticmethod
    def _retire(worker: _Worker) -> None:
        if worker.channel is not None:
            worker.channel.close()
            worker.channel = None

    async def _supervise(self) -> None:
        while not self.stopping:
            await asyncio.sleep(0.2)
            for index, worker in list(self.workers.items()):
                code = worker.process.poll()
                if code is None and not self.stopping:
                    self._kill_if_silent(worker)
                if code is None or self.stopping:
                    continue
                ran = time.monotonic() - worker.started
                in_row = 0 if ran > 60 else worker.restarts_in_row + 1
                wait = RESTART_BACKOFF_S[min(in_row, len(RESTART_BACKOFF_S) - 1)]
                if index == ORDERER:
                    self.links.detach_orderer(f"it exited with {_exit_name(code)}")
                    if in_row >= ORDERER_HANDOVER_AFTER:
                        asyncio.ensure_future(self._hand_over(in_row))
                    log.error(
                        "the orderer process (pid %d) exited with %s after %.1f s; starting "
                        "it again in %.1f s (the voter keeps its Raft role; writes in flight "
                        "get an unknown outcome, new writes 503 until it is back)",
                        worker.process.pid,
                        _exit_name(code),
                        ran,
                        wait,
                    )
                else:
                    self.links.detach(index)
                    log.error(
                        "HTTP worker %d (pid %d) exited with %s after %.1f s; starting it "
                        "again in %.1f s (the voter keeps its role; the other workers keep "
                        "serving)",
                        index,
                        worker.process.pid,
                        _exit_name(code),
                        ran,
                        wait,
                    )
                self._retire(self.workers.pop(index))
                await asyncio.sleep(wait)
                if not self.stopping:
                    await self._spawn(index, worker.restarts + 1, in_row)

    async def _hand_over(self, in_row: int) -> None:
        node = self.links.node
        if not node.status().leading:
            return
        log.error(
            "the orderer process died %d times in a row: handing leadership to another voter",
            in_row,
        )
        try:
            moved = await node.transfer_leadership(None)
        except Exception as e:  # noqa: BLE001 - refused or no other voter: said, not fatal
            log.error("leadership was not handed over: %s", e)
            return
        if moved is None:
            log.error("leadership did not move in time; the orderer is started again meanwhile")

    def _kill_if_silent(self, worker: _Worker) -> None:
        if worker.index == ORDERER:
            link, limit = self.links.orderer, ORDERER_SILENT_S
            what, why = "the orderer process", "frozen, or stuck in one decision"
        else:
            link, limit = self.links.links.get(worker.index), WORKER_SILENT_S
            what, why = f"HTTP worker {worker.index}", "frozen, or stuck in one request"
        if link is None or link.lost is not None or link.heard_at is None:
            return
        silent = time.monotonic() - link.heard_at
        if silent > limit:
            log.error(
                "%s (pid %d) has said nothing for %.1f s (%s): killing it; it is started again",
                what,
                worker.process.pid,
                silent,
                why,
            )
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()

    def describe(self) -> list[dict[str, Any]]:
        """The workers, for /v1/quorum/status."""
        now = time.monotonic()
        out = []
        for index, worker in sorted(self.workers.items()):
            if index == ORDERER:
                continue
            link = self.links.links.get(index)
            out.append(
                {
                    "index": index,
                    "pid": worker.process.pid,
                    "alive": worker.process.poll() is None and link is not None and not link.lost,
                    "uptimeS": round(now - worker.started, 1),
                    "restarts": worker.restarts,
                    "requests": (0 if link is None else link.requests)
                    + getattr(self.links.node.orderer, "submitted", {}).get(index, 0),
                    "imageRebases": 0 if link is None else link.rebases,
                }
            )
        return out

    def describe_orderer(self) -> dict[str, Any] | None:
        """The orderer process, for /v1/quorum/status (None without one)."""
        orderer = self.workers.get(ORDERER)
        if orderer is None:
            return None
        link = self.links.orderer
        return {
            "pid": orderer.process.pid,
            "alive": orderer.process.poll() is None and link is not None and not link.lost,
            "uptimeS": round(time.monotonic() - orderer.started, 1),
            "restarts": orderer.restarts,
            "imageRebases": getattr(self.links.node.orderer, "image_rebases", 0),
        }

    def describe_image_file(self) -> dict[str, Any] | None:
        """The voter's newest image file, for /v1/quorum/status (None: none shared)."""
        shared = self.links.shared
        if shared is None:
            return None
        newest = shared.files[-1] if shared.files else None
        return {
            "offset": None if newest is None else newest.next_offset,
            "bytes": 0 if newest is None else newest.size,
            "written": shared.written,
            "failed": shared.failed,
            "serveRebases": self.links.node.sm.file_rebases,
        }

    async def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM (each finishes what it is answering), then SIGKILL."""
        self.stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                worker.process.terminate()
        deadline = time.monotonic() + timeout_s
        for worker in self.workers.values():
            while worker.process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if worker.process.poll() is None:
                log.warning("HTTP worker %d did not stop in time: killed", worker.index)
                worker.process.kill()
                worker.process.wait()
            self._retire(worker)
        self.links.stop()


def _exit_name(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


# ---------------------------------------------------------------- the worker's side


def _die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this worker when the core dies, whatever kills it (the
    link's EOF says so too, but only once the loop runs).

    ``parent_pid``: the core's pid when it started this process. A parent
    that is not it any more means the core died before the prctl. Not
    ``getppid() == 1``: in a container the core itself is pid 1, and every
    worker and orderer it started would take it for dead and exit."""
    with contextlib.suppress(OSError, AttributeError, ImportError):
        import ctypes  # noqa: PLC0415 - not every Python build has it

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the core died before the prctl
        os._exit(EXIT_LINK_LOST)


def worker_main(config: dict[str, Any]) -> int:
    _die_with_parent(config["parentPid"])
    logging.basicConfig(
        level=str(config["logLevel"]).upper(),
        format=f"%(asctime)s %(levelname)s %(name)s[worker {config['index']}]: %(message)s",
    )
    import uvloop  # noqa: PLC0415

    import api.app  # noqa: F401, PLC0415 - imported with the collector off (__main__)
    from quorum.runtime_tuning import tune_runtime, watch_pauses  # noqa: PLC0415

    tune_runtime()  # as the serve process: the collector and malloc tuned
    watch_pauses()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_serve_worker(config))


async def _serve_worker(config: dict[str, Any]) -> int:
    from api.app import create_app
    from api.auth import load_tokens
    from api.connections import ConnectionLimits, ConnectionStats
    from quorum.runtime_tuning import gc_report, long_lived_entries, manage_collector
    from quorum.secret_files import read_secret_file

    from .core_link import connection_counters
    from .http_server import build_tls, http_config
    from .worker_node import ForwardToCore, WorkerNode

    index = config["index"]
    node = WorkerNode(config["nodeId"], index, config["logRetention"], config["clusterId"])
    if config.get("history"):
        from quorum.history import Retention
        from quorum.history_images import HistoryReader

        history = config["history"]
        node.history = HistoryReader(
            history["path"], Retention(history["retentionMs"], history["retentionRecords"])
        )
    channel = config.get("fdChannelFd")
    await node.connect(
        socket.socket(fileno=config["linkFd"]),
        None if channel is None else socket.socket(fileno=channel),
        config.get("ringFd"),
    )
    if not await node.wait_for_image(IMAGE_WAIT_S):
        log.error("no image from the voter's core within %.0f s: exiting", IMAGE_WAIT_S)
        return EXIT_LINK_LOST
    tokens = load_tokens(config["tokensFile"]) if config["tokensFile"] else None
    tls, principals = build_tls(_Flags(config["tls"]))
    stats = ConnectionStats()
    secret_file = config.get("delegationTokenSecretFile")
    app = create_app(
        node,
        tokens=tokens,
        # Read here, not sent: the worker's config is its command line.
        delegation_token_secret=read_secret_file(secret_file, "--delegation-token-secret-file")
        if secret_file
        else None,
        max_pending_writes=config["maxPendingWrites"],
        public_docs=config["publicDocs"],
        connections=stats,
        certificates=principals,
        tls=tls,
        require_certificate=tls is not None and tls.settings.client_auth == "required",
        # What needs the core's own state is answered by the core's app.
        inner_middleware=lambda app: app.add_middleware(
            ForwardToCore, node=node, routes=app.routes
        ),
    )
    limits = ConnectionLimits(
        max_connections=config["maxConnections"],
        max_per_address=config["maxConnectionsPerAddress"],
    )
    import uvicorn  # noqa: PLC0415

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # noqa: ANN001 - uvicorn's signature
            if sig != signal.SIGINT:  # Ctrl-C reaches the group; the core stops us
                super().handle_exit(sig, frame)

    server = Server(http_config(app, config["host"], config["port"], limits, stats, tls))
    lost: list[str] = []

    def on_lost(why: str) -> None:
        lost.append(why)
        server.should_exit = True

    node.on_lost = on_lost
    listener = _listen(config["host"], config["port"])
    metrics = app.state.metrics.requests

    async def report() -> None:
        # The first report also tells the core that this worker listens
        # (CoreLinks.now_serving: the voter is ready once every worker does).
        while True:
            node.send_stats(
                {
                    "connections": connection_counters(stats),
                    "requests": metrics.totals(),
                    "gc": gc_report(),
                    "imageRebases": node.sm.file_rebases,
                }
            )
            await asyncio.sleep(STATS_EVERY_S)

    reporter = asyncio.ensure_future(report())
    reloader = None if tls is None else asyncio.ensure_future(tls.watch())
    collector = asyncio.ensure_future(
        manage_collector(lambda: True, lambda: long_lived_entries(node.image))  # it has an image
    )
    try:
        await server.serve(sockets=[listener])
    finally:
        collector.cancel()
        reporter.cancel()
        if reloader is not None:
            reloader.cancel()
    return EXIT_LINK_LOST if lost else 0


def _listen(host: str, port: int) -> socket.socket:
    """This worker's own listening socket on the voter's API port (the core
    holds the port with SO_REUSEPORT; wiring._reserve)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


class _Flags:
    """The TLS flags, as ``http_server.build_tls`` reads them from argparse."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


if __name__ == "__main__":
    import gc

    gc.disable()  # while it imports (as serve does); tune_runtime turns it back on
    sys.exit(worker_main(json.loads(sys.argv[1])))
