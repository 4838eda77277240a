"""A real standalone Spark cluster on 127.0.0.1, from the pyspark installation:
one ``org.apache.spark.deploy.master.Master`` and N
``org.apache.spark.deploy.worker.Worker`` processes, ports from the OS. For the
tests and for bench/audit_cluster.py.

Each daemon runs in its own process group, and a worker's executors run in its
group too (the worker starts them as plain child processes), so ``close``
stops every JVM the cluster started, also when the caller failed.

Workers can be started unable to see one directory (``hidden``: an empty tmpfs
mounted over it in their own mount namespace, which needs root): what a
driver's local disk is to the machines of a real cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx

from .nodes import free_port

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def can_hide_directories() -> bool:
    """Whether workers can be given their own mount namespace (root, unshare)."""
    return os.geteuid() == 0 and shutil.which("unshare") is not None


class SparkCluster:
    def __init__(
        self,
        root: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        hidden: Path | None = None,
        java_options: str | None = None,
    ):
        """``java_options``: JDK_JAVA_OPTIONS for every JVM of the cluster (its
        master, workers and the executors they start)."""
        self.root = Path(root)
        self.n = workers
        self.cores = cores
        self.memory = memory
        self.hidden = hidden
        self.port = free_port()
        self.ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}  # by name, the current ones
        self.spawned: list[subprocess.Popen] = []  # every one, killed ones too
        conf = self.root / "conf"  # empty: no spark-defaults.conf of the machine's leaks in
        conf.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
            # The master's REST submission server would take the fixed port 6066.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }
        if java_options:
            self.env["JDK_JAVA_OPTIONS"] = java_options

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 (the child holds it)
        try:
            self.procs[name] = subprocess.Popen(
                argv,
                env=self.env,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.spawned.append(self.procs[name])
        finally:
            log.close()

    def start(self, timeout: float = 90.0) -> SparkCluster:
        """The master and every worker started; returns once all workers registered."""
        spark_class = os.path.join(spark_home(), "bin", "spark-class")
        self._spawn(
            "master",
            [spark_class, MASTER, "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(self.ui_port)],
        )  # fmt: skip
        self.wait(lambda s: s.get("status") == "ALIVE", "the master to be ALIVE", timeout)
        for i in range(self.n):
            self.start_worker(i)
        self.wait_workers(self.n, timeout)
        return self

    def start_worker(self, i: int) -> None:
        work = self.root / f"worker-{i}"
        work.mkdir(exist_ok=True)
        argv = [
            os.path.join(spark_home(), "bin", "spark-class"), WORKER,
            "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
            self.master_url,
        ]  # fmt: skip
        if self.hidden is not None:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs -o size=1m none "$0" && exec "$@"', str(self.hidden), *argv]  # fmt: skip
        self._spawn(f"worker-{i}", argv)

    def ensure_workers(self, timeout: float = 90.0) -> None:
        """Every worker running again (after kill_worker), all registered."""
        for i in range(self.n):
            if f"worker-{i}" not in self.procs:
                self.start_worker(i)
        self.wait_workers(self.n, timeout)

    def state(self) -> dict:
        """The master's view (its web UI's /json): workers, cores, applications.
        Just after its UI port opens, Jetty can answer 404 before the JSON
        handler is attached: an HTTPStatusError then, which ``wait`` retries."""
        r = httpx.get(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5)
        r.raise_for_status()
        return r.json()

    def wait(self, ok, what: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        last: object = "no answer yet"
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(
                        f"Spark {name} exited ({p.returncode}): {self.log_tail(name)}"
                    )
            try:
                last = self.state()
                if ok(last):
                    return last
            except httpx.HTTPError as e:
                last = e
            time.sleep(0.3)
        raise TimeoutError(f"waited {timeout:.0f} s for {what}; last state: {last}\n{self.logs()}")

    def wait_workers(self, n: int, timeout: float = 90.0) -> dict:
        return self.wait(lambda s: s["aliveworkers"] == n, f"{n} alive worker(s)", timeout)

    def kill_worker(self, i: int) -> None:
        """SIGKILL a worker and its executors, as a machine that dies."""
        p = self.procs.pop(f"worker-{i}")
        _signal_group(p.pid, signal.SIGKILL)
        p.wait(10)

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self.root / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def logs(self) -> str:
        return "\n".join(f"--- {name}.log:\n{self.log_tail(name)}" for name in self.procs)

    def pids(self) -> list[int]:
        """Processes still running in the cluster's process groups (daemons and executors)."""
        alive = []
        for p in self.spawned:
            try:
                os.killpg(p.pid, 0)
                alive.append(p.pid)
            except ProcessLookupError:
                pass
        return alive

    def close(self) -> None:
        """Workers (with their executors) first, then the master: SIGTERM, then
        SIGKILL for a group still there after 15 s."""
        master = self.procs.get("master")
        order = [p for p in self.spawned if p is not master] + ([master] if master else [])
        for p in order:
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in order:
            try:
                p.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(p.pid, signal.SIGKILL)  # executors outliving their worker, too
            p.wait(10)
        deadline = time.monotonic() + 15  # killed executors are gone once init reaped them
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
