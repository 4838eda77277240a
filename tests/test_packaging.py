"""Packaging (issue 20): the core install runs a voter, the CLI and the
simulator without the pipeline's Spark, Arrow or matplotlib; the pipeline's
commands say which extra to install; ``python -m build`` makes a clean wheel
and sdist with the version from one place."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

from metaquorum import __version__

from .cluster import Cluster
from .core_venv import PIPELINE_MODULES, ROOT, clean_env, copy_checkout, make_core_venv
from .test_cluster import register_body

# Runs in a fresh interpreter: every command's --help (so its parser) and then
# every module outside the pipeline, each time listing what of the pipeline
# got imported.
_IMPORT_CHECK = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    from metaquorum.cli import _parser, main
    from metaquorum.pipeline_cli import PIPELINE_COMMANDS

    HEAVY = set(sys.argv[1].split(","))

    def loaded():
        return sorted({m.split(".")[0] for m in sys.modules} & HEAVY)

    def run(argv):
        try:
            main(argv)
        except SystemExit:
            pass
        return loaded()

    checked = {"--help": run(["--help"]), "--version": run(["--version"])}
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    core = sorted(set(commands) - set(PIPELINE_COMMANDS))
    for command in core:
        checked[command + " --help"] = run([command, "--help"])
    # metaquorum.export is the export command's own module.
    for pkg in ("metadata_records", "controller", "quorum", "api", "voter", "brokers", "metaquorum"):
        for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
            if info.name != "metaquorum.export":
                importlib.import_module(info.name)
                checked["import " + info.name] = loaded()
    print("commands:", " ".join(core))
    bad = {what: mods for what, mods in checked.items() if mods}
    print("imported:", next(iter(bad.items())) if bad else "none")
    """
)


def test_no_command_outside_the_pipeline_imports_it():
    r = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHECK, ",".join(PIPELINE_MODULES)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    # The check covered the commands there are (a new one is checked by itself).
    assert {"serve", "dev", "sim", "broker", "hash-token", "demo", "log"} <= set(
        lines["commands"].split()
    ), r.stdout
    assert lines["imported"] == "none", r.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_build_makes_a_clean_wheel_and_sdist_with_one_version(tmp_path):
    """``python -m build``: the sdist, then the wheel built from that sdist (so
    the sdist holds what a build needs), and not one warning."""
    src = copy_checkout(tmp_path / "src")
    env = clean_env()
    # Set here, it makes setuptools warn that it skips byte-compiling: not ours.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(src)],
        capture_output=True, text=True, timeout=540, env=env,
    )  # fmt: skip
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    noisy = [line for line in log.splitlines() if "warn" in line.lower() or "deprecat" in line.lower()]  # fmt: skip
    assert noisy == [], "\n".join(noisy)

    name = f"metaquorum-{__version__}"
    with tarfile.open(tmp_path / "dist" / f"{name}.tar.gz") as sdist:
        members = {m.name.removeprefix(name + "/") for m in sdist.getmembers()}
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO", "metaquorum/cli.py"} <= members
    assert {"quorum/node.py", "pipeline/audit.py", "api/app.py"} <= members
    stray = [m for m in members if m.split("/")[0] in (".venv", ".git", "tests", "build", "dist")
             or "__pycache__" in m or m.endswith(".pyc")]  # fmt: skip
    assert stray == [], stray

    with zipfile.ZipFile(tmp_path / "dist" / f"{name}-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"{name}.dist-info/METADATA").decode()
        entry_points = wheel.read(f"{name}.dist-info/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {
        "metadata_records", "controller", "quorum", "api", "voter", "brokers", "pipeline", "metaquorum",
        f"{name}.dist-info",
    }  # fmt: skip
    assert f"{name}.dist-info/licenses/LICENSE" in names
    # The web console ships whole: it fetches nothing from any network.
    console = {f"api/console/{f}" for f in ("index.html", "login.html", "app.js", "login.js", "console.css")}  # fmt: skip
    assert console <= names and console <= members, console - names
    headers = [line.split(": ", 1) for line in metadata.split("\n\n")[0].splitlines()]
    assert ["Version", __version__] in headers and ["License-Expression", "Apache-2.0"] in headers
    requires = [v for k, v in headers if k == "Requires-Dist"]
    for module in ("pyspark", "pyarrow", "matplotlib"):
        (req,) = [v for v in requires if v.startswith(module + "==")]
        assert req.endswith('; extra == "pipeline"'), req
    assert "metaquorum = metaquorum.cli:main" in entry_points


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    venv = make_core_venv(tmp_path_factory.mktemp("core-install"))
    # Figures, not asserts (README "Install"; bench/core_install.py prints them too).
    print(f"\ncore install: {venv.size_bytes() / 1e6:.0f} MB, pip install {venv.install_s:.0f} s")
    return venv


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_core_install_has_no_pipeline_and_its_cli_works(core):
    found = core.run(
        "python", "-c",
        "import importlib.util as u, sys; "
        "print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)) or 'none')",
        *PIPELINE_MODULES,
    )  # fmt: skip
    assert found.stdout.strip() == "none", found.stdout + found.stderr
    # A generous bound: pyspark alone is 491 MB (the figure is printed above).
    assert core.size_bytes() < 300e6

    version = core.run("metaquorum", "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"metaquorum {__version__}"
    helped = core.run("metaquorum", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "audit" in helped.stdout and "serve" in helped.stdout

    # Each pipeline command, run without the extra: exit 2, the missing
    # packages named and the command that installs them, no traceback.
    for argv, needs in (
        (["audit", "--input", str(core.path)], "pyspark, pyarrow and matplotlib"),
        (["export", "--url", "http://127.0.0.1:1", "--out", str(core.path / "x")], "pyarrow"),
        (["synth-log", "--records", "10", "--out", str(core.path / "y")], "pyarrow"),
    ):
        r = core.run("metaquorum", *argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert f"`metaquorum {argv[0]}` needs {needs}" in r.stderr, r.stderr
        assert "pip install 'metaquorum[pipeline]'" in r.stderr, r.stderr
        assert "pip install -e '.[pipeline]'" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
    assert not (core.path / "x").exists() and not (core.path / "y").exists()


class _VenvVoters(Cluster):
    """tests/cluster.py's voters, run by the core venv's ``metaquorum``."""

    def __init__(self, root, metaquorum: str):
        super().__init__(root, voters=1)
        self.metaquorum = metaquorum
        # Nothing from the test run's own environment on the voter's path.
        self.env[0] = {"PYTHONPATH": "", "VIRTUAL_ENV": ""}

    def args(self, i: int) -> list[str]:
        argv = super().args(i)
        assert argv[1:4] == ["-m", "metaquorum.cli", "serve"], argv
        return [self.metaquorum, *argv[3:]]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_core_install_serves_a_voter_that_registers_a_broker(core, tmp_path):
    voters = _VenvVoters(tmp_path, str(core.bin / "metaquorum"))
    try:
        voters.start()
        voters.wait_ready(timeout_s=90)
        assert voters.get(0, "/readyz").status_code == 200
        leader = voters.leader()
        r = voters.post(leader, "/v1/brokers/register", register_body(voters, 1))
        assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text
        listed = voters.get(0, "/v1/brokers?consistency=linearizable").json()["brokers"]
        assert [b["brokerId"] for b in listed] == [1]
        assert voters.stop(0) == 0, voters.tail(0)
    finally:
        voters.close()
