"""The core install as a new user gets it (figures, not asserts; README
"Install", docs/decisions.md 72): a fresh virtualenv, ``pip install <this
checkout>`` (no extra; pip may use its cache and the registry), then

* ``install``: how long the ``pip install`` took;
* ``size``: the venv on disk, pip included, and its largest packages;
* ``--help`` and ``--version``: wall time of the console script, the median
  of ``--runs`` runs (what an operator waits for each command to start).

    python bench/core_install.py [--runs N] [--keep DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.core_venv import CoreVenv, clean_env, make_core_venv, tree_bytes  # noqa: E402


def _timed(venv: CoreVenv, argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run(
            [str(venv.bin / "metaquorum"), *argv],
            capture_output=True, check=True, cwd=venv.path, env=clean_env(),
        )  # fmt: skip
        times.append(time.monotonic() - started)
    return statistics.median(times)


def measure(where: Path, runs: int) -> dict:
    print(f"fresh venv + pip install of {Path(__file__).resolve().parent.parent} ...", flush=True)
    venv = make_core_venv(where)
    site = next((venv.path / "lib").glob("python3*/site-packages"))
    largest = sorted(((tree_bytes(p), p.name) for p in site.iterdir() if p.is_dir()), reverse=True)
    return {
        "install_s": round(venv.install_s, 1),
        "size_mb": round(venv.size_bytes() / 1e6, 1),
        "largest_mb": {name: round(size / 1e6, 1) for size, name in largest[:8]},
        "help_s": round(_timed(venv, ["--help"], runs), 3),
        "version_s": round(_timed(venv, ["--version"], runs), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each timed command")
    parser.add_argument("--keep", help="build the venv here (a new or empty dir) and keep it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.keep:
        where = Path(args.keep)
        if where.exists() and any(where.iterdir()):
            parser.error(f"--keep {where} is not empty: give a new or empty directory")
        where.mkdir(parents=True, exist_ok=True)
        figures = measure(where, args.runs)
    else:
        with tempfile.TemporaryDirectory(prefix="metaquorum-core-") as tmp:
            figures = measure(Path(tmp), args.runs)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"pip install (core, no extra): {figures['install_s']} s")
    print(f"venv size, pip included:      {figures['size_mb']} MB")
    for name, mb in figures["largest_mb"].items():
        print(f"  {name:32} {mb} MB")
    print(f"metaquorum --help:            {figures['help_s']} s (median of {args.runs})")
    print(f"metaquorum --version:         {figures['version_s']} s (median of {args.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
