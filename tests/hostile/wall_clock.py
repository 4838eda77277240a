"""Stepping one process's wall clock, as NTP steps it, without touching the
system clock the other processes share: ``wall_clock_step.c``, preloaded into
that process only (LD_PRELOAD), offsets its CLOCK_REALTIME, gettimeofday() and
time() by what a control file says and leaves its monotonic clocks alone. The
library is compiled on first use with the system's C compiler (CI installs one:
.ci/run); that C file says why it is not libfaketime."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ..cluster import Cluster

_SOURCE = Path(__file__).with_name("wall_clock_step.c")


def step_library() -> str:
    """The compiled library's path. Without a C compiler the test is skipped
    saying what to install, and fails in CI (METAQUORUM_CI), which has one."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        why = "no C compiler to build tests/hostile/wall_clock_step.c: apt-get install gcc"
        if os.environ.get("METAQUORUM_CI"):
            pytest.fail(why)
        pytest.skip(why)
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:16]
    library = Path(tempfile.gettempdir()) / f"metaquorum-wall-clock-step-{digest}.so"
    if not library.exists():
        partial = library.with_suffix(f".{os.getpid()}.part")
        command = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(partial)]
        built = subprocess.run(
            [*command, str(_SOURCE), "-ldl"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if built.returncode != 0:
            pytest.fail(f"{compiler} could not build {_SOURCE.name}:\n{built.stderr}")
        os.replace(partial, library)
    return str(library)


class SteppedClock:
    """One process's wall clock, offset from the real one by ``step(seconds)``."""

    def __init__(self, control: Path) -> None:
        self.control = Path(control)
        self.step(0)

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": step_library(), "WALL_CLOCK_STEP_FILE": str(self.control)}

    def step(self, seconds: int) -> None:
        # Written whole, then renamed: the process never reads half a line.
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(f"{seconds:+d}\n")
        os.replace(tmp, self.control)


def stepped_cluster(root: Path, session_s: float) -> tuple[Cluster, list[SteppedClock]]:
    """Three voters (not started) whose wall clocks ``SteppedClock`` steps, with
    broker sessions of ``session_s``."""
    cluster = Cluster(root, extra=["--session-timeout-ms", str(int(session_s * 1000))])
    clocks = [SteppedClock(root / f"clock-{i}") for i in range(cluster.n)]
    cluster.env = {i: clock.env() for i, clock in enumerate(clocks)}
    return cluster, clocks
