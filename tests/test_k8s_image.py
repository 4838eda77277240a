"""The Dockerfile, checked without a Docker engine (none runs here): a slim
Python base, a non-root user that matches the pod's securityContext, the
package installed from its wheel, and an entrypoint that is the manifest's
command. The wheel is built and its ``metaquorum`` is run."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from .k8s_render import ROOT, one, prepared_copy, render

pytestmark = pytest.mark.slow


def _stages(text: str) -> list[list[tuple[str, str]]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    stages: list[list[tuple[str, str]]] = []
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        logical += line[:-1] + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        word, _, rest = logical.partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        stages[-1].append((word.upper(), rest.strip()))
        logical = ""
    return stages


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    objects = render(prepared_copy(tmp_path_factory.mktemp("k8s")), "prod")
    return one(objects, "StatefulSet")["spec"]["template"]["spec"]


def test_the_dockerfile_matches_the_statefulset(manifest):
    stages = _stages((ROOT / "Dockerfile").read_text())
    assert len(stages) == 2
    for stage in stages:
        base = stage[0][1].split()[0]
        assert base.startswith("python:3.11-slim"), base
    final = dict(stage for stage in stages[-1])  # the last of each instruction
    container = manifest["containers"][0]
    entry = json.loads(final["ENTRYPOINT"]) + json.loads(final["CMD"])
    assert entry == container["command"] + container["args"] == ["metaquorum", "serve"]
    user, _, group = final["USER"].partition(":")
    assert int(user) == manifest["securityContext"]["runAsUser"] != 0
    assert int(group) == manifest["securityContext"]["runAsGroup"]
    exposed = {int(p) for p in final["EXPOSE"].split()}
    assert exposed == {p["containerPort"] for p in container["ports"]}
    runs = " ".join(arg for word, arg in stages[-1] if word == "RUN")
    assert "--no-index --find-links /wheels metaquorum" in runs
    assert "pip wheel" in " ".join(arg for word, arg in stages[0] if word == "RUN")


def test_the_build_context_keeps_what_the_wheel_needs():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for needed in ("pyproject.toml", "README.md", "metaquorum", "quorum", "api"):
        assert needed not in ignored
    assert ".venv" in ignored and ".git" in ignored


def test_the_wheel_builds_and_its_metaquorum_has_what_the_pod_runs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in ("metadata_records", "quorum", "api", "brokers", "pipeline", "metaquorum"):
        if (ROOT / package).is_dir():
            shutil.copytree(
                ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__")
            )
    wheels = tmp_path / "wheels"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = wheels.glob("metaquorum-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "metaquorum = metaquorum.cli:main" in z.read(entry_points).decode()
    for module in ("metaquorum/serve.py", "quorum/node.py", "api/app.py", "brokers/client.py"):
        assert module in names
    assert not any(n.startswith("tests/") for n in names)

    # Install it alone and run it, importing the wheel's code (not the checkout's).
    target = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), wheel],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}

    def run(*args):
        return subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, timeout=60, env=env,
            cwd=tmp_path,
        )  # fmt: skip

    where = run("-c", "import metaquorum.serve as s; print(s.__file__)")
    assert where.stdout.strip().startswith(str(target)), where
    serve = run("-m", "metaquorum.cli", "serve", "--help")
    assert "--raft-bind" in serve.stdout and "--node-id-from-hostname" in serve.stdout
    hook = run("-m", "metaquorum.cli", "transfer-leadership", "--help")
    assert "--if-leader" in hook.stdout and "--token-file" in hook.stdout
