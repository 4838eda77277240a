"""Running the audit on a Spark cluster: failing fast and clearly where Spark
would hang or print a JVM stack trace.

* a ``spark://`` master that does not accept connections is refused before
  Spark starts (Spark itself retries for a minute, then fails somewhere else);
* once the session is up, the audit waits a bounded time for its first
  executor (a master without a free worker would queue the job forever), and
  a watch cancels the audit when every executor has been gone that long (all
  workers died);
* an executor that cannot read an input file (the export is on the driver's
  local disk, not on storage every worker shares) is named with its file.

The audit itself runs no Python on the executors (DataFrame operations
only), so the workers need Spark and Java, not Python or this package.
"""

from __future__ import annotations

import re
import socket
import threading
import time


class ClusterError(Exception):
    """Spark could not run the audit on its cluster (the message says why and what to do)."""


def check_master_reachable(master: str, timeout: float = 5.0) -> None:
    """A standalone master (``spark://h:p``, or ``spark://h1:p1,h2:p2`` with
    standby masters) must accept a TCP connection on one of its addresses.
    Other masters (yarn, k8s://) are left to Spark."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout).close()
            return
        except (OSError, ValueError) as e:
            problems.append(f"{address}: {e}")
    raise ClusterError(
        f"cannot reach the Spark master {master} ({'; '.join(problems)}): is the master running, "
        "and is that its port (7077 unless set; not its web UI's 8080)?"
    )


def executor_count(spark) -> int:
    """Executors registered now (the driver's own entry excluded)."""
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


def _stopped(spark) -> bool:
    return spark.sparkContext._jsc.sc().isStopped()


def wait_for_executors(spark, master: str, timeout: float) -> int:
    """The number of executors once there is one; ClusterError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if _stopped(spark):
            raise ClusterError(f"Spark stopped while registering with {master}: {MASTER_HINT}")
        n = executor_count(spark)
        if n > 0:
            return n
        if time.monotonic() >= deadline:
            conf = spark.sparkContext.getConf()
            raise ClusterError(
                f"no executor started within {timeout:.0f} s on {master}: the master has no alive "
                "worker with the free cores and memory this job asks for "
                f"(spark.executor.memory={conf.get('spark.executor.memory', '1g')}, "
                f"spark.executor.cores={conf.get('spark.executor.cores', 'all of a worker')}). "
                "Check the workers on the master's web UI, lower them with --conf, or raise "
                "--executor-wait if executors take longer to start"
            )
        time.sleep(0.5)


MASTER_HINT = (
    "is it a Spark master of the same major version as this pyspark, and can its workers "
    "connect back to this machine (SPARK_LOCAL_IP / spark.driver.host)?"
)


class ExecutorWatch:
    """While the audit runs: when no executor has been registered for
    ``timeout`` seconds (every worker died), cancel its jobs, which would
    otherwise wait for resources forever. ``lost`` says it did."""

    def __init__(self, spark, timeout: float, every: float = 1.0):
        self.spark = spark
        self.timeout = timeout
        self.every = every
        self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="executor-watch", daemon=True)

    def __enter__(self) -> ExecutorWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        seen = time.monotonic()
        while not self._done.wait(self.every):
            try:
                if _stopped(self.spark):
                    return
                if executor_count(self.spark) > 0:
                    seen = time.monotonic()
                elif time.monotonic() - seen >= self.timeout:
                    self.lost = True
                    self.spark.sparkContext.cancelAllJobs()
                    return
            except Exception:  # the session is going away under us: nothing to watch
                return


_READ_FAILED = ("FileNotFoundException", "AccessDeniedException", "FAILED_READ_FILE")
_EXPORT_FILE = re.compile(r"((?:[a-z0-9]+:)?/\S+?\.(?:parquet|jsonl))\b")


def unreadable_input(error: Exception, input_dir: str) -> ClusterError | None:
    """An executor could not read an input file: which, and what to do."""
    text = str(error)
    m = _EXPORT_FILE.search(text)
    if m is None or not any(marker in text for marker in _READ_FAILED):
        return None
    return ClusterError(
        f"a Spark executor could not read {m[1]} (the driver found it in {input_dir}): on a "
        "cluster, --input and --output must be on storage every worker reads at the same path "
        "(an NFS export mounted alike on every machine, hdfs://, s3a://), readable by the user "
        "the workers run as"
    )


def spark_failure(error: Exception) -> ClusterError | None:
    """A Spark job that failed (a Java exception through py4j): its cause in a
    line, and what to try when it ran out of memory; None when ``error`` is
    not Spark's. Without this a failed audit ends in a page of JVM stack and
    exit code 1, which means "violations found"."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    if not isinstance(error, Py4JJavaError | PySparkException):
        return None
    lines = [line.strip(" :\t") for line in str(error).splitlines() if line.strip(" :\t")]
    cause = next(
        (line for line in lines if re.search(r"(Exception|Error)\b:?", line)),
        lines[0] if lines else type(error).__name__,
    )
    hint = ""
    if "OutOfMemoryError" in str(error) or "Not enough memory" in str(error):
        hint = (
            "; give it more memory: --conf spark.driver.memory=4g (on local[N] the driver's "
            "heap is the executors' too), on a cluster --conf spark.executor.memory=..."
        )
    return ClusterError(f"the audit failed in Spark: {cause[:400]}{hint}")
