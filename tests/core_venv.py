"""A fresh virtualenv with the core install of this checkout (``pip install .``,
no extra), as a new user gets it: for tests/test_packaging.py and
bench/core_install.py.

The checkout's files (tracked and new, not ignored ones) are copied first, so
the build sees what a fresh clone holds and leaves nothing in the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What the pipeline extra brings (numpy comes with matplotlib): none of it is
# in a core install, and no command outside the pipeline imports any of it.
PIPELINE_MODULES = ("pyspark", "pyarrow", "matplotlib", "numpy")
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".*_cache", ".hypothesis",
    ".metaquorum-dev", "data",
)  # fmt: skip


@dataclass
class CoreVenv:
    path: Path
    install_s: float  # `pip install <checkout>`, from an empty venv

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """``argv[0]`` from the venv's bin (``metaquorum``, ``python``), from a
        directory outside the checkout (the checkout must not be importable)."""
        return subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            capture_output=True, text=True, timeout=timeout, cwd=self.path, env=clean_env(),
        )  # fmt: skip

    def size_bytes(self) -> int:
        return tree_bytes(self.path)


def tree_bytes(path: Path) -> int:
    """The files under ``path``, by size (links not followed nor counted)."""
    total = 0
    for parent, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(parent, name)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total


def clean_env() -> dict[str, str]:
    """This environment without what would let the venv see the checkout or
    the test run's own virtualenv."""
    hidden = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in hidden}


def copy_checkout(dest: Path) -> Path:
    """The checkout's source files, as a fresh clone has them, under ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
    )
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist, say)
        shutil.copytree(ROOT, dest, ignore=_NOT_SOURCE)
        return dest
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():  # a file deleted but not yet committed is still listed
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def make_core_venv(where: Path) -> CoreVenv:
    """``python -m venv`` then ``pip install <checkout>`` (not editable); pip
    may use its cache and the registry."""
    src = copy_checkout(where / "src")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=clean_env())
    started = time.monotonic()
    r = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(src)],
        capture_output=True, text=True, timeout=900, env=clean_env(),
    )  # fmt: skip
    if r.returncode != 0:
        raise AssertionError(f"pip install {src} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return CoreVenv(venv, time.monotonic() - started)
