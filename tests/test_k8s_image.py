"""The Dockerfile, checked without a container engine: a Python base chosen by
build ARG (the registry's slim one by default), the package installed from the
wheelhouse alone, the run stage assembled FROM scratch, a non-root user that
matches the pod's securityContext, and an entrypoint that is the manifest's
command. The wheel is built and its ``metaquorum`` is run. The image is built
and run for real by tests/test_image_script.py (scripts/image.sh)."""

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
    """Instructions per stage, continuation lines joined, comments dropped; the
    first list holds what comes before the first FROM (global ARGs)."""
    stages: list[list[tuple[str, str]]] = [[]]
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
    preamble, build, run = _stages((ROOT / "Dockerfile").read_text())
    assert preamble == [("ARG", "BASE=python:3.11-slim-bookworm")]
    assert build[0] == ("FROM", "${BASE} AS build")
    assert run[0] == ("FROM", "scratch")  # nothing but what the build stage assembled
    final = dict(stage for stage in run)  # the last of each instruction
    container = manifest["containers"][0]
    entry = json.loads(final["ENTRYPOINT"]) + json.loads(final["CMD"])
    assert entry == container["command"] + container["args"] == ["metaquorum", "serve"]
    user, _, group = final["USER"].partition(":")
    assert int(user) == manifest["securityContext"]["runAsUser"] != 0
    assert int(group) == manifest["securityContext"]["runAsGroup"]
    exposed = {int(p) for p in final["EXPOSE"].split()}
    assert exposed == {p["containerPort"] for p in container["ports"]}
    # Offline from the wheelhouse, the core package alone (no pipeline extra),
    # pip and setuptools gone, the rootfs made for the same uid and gid.
    runs = " ".join(arg for word, arg in build if word == "RUN")
    assert "pip install --no-cache-dir --no-index --find-links /wheels metaquorum " in runs
    assert "pip uninstall --yes --quiet pip setuptools" in runs
    assert f"--uid {user} --gid {group}" in runs
    assert ("COPY", "wheelhouse/ /wheels/") in build
    assert ("COPY", f"--from=build --chown={user}:{group} /data/ /var/lib/metaquorum/") in run
    assert final["WORKDIR"] == "/var/lib/metaquorum"


def test_the_build_context_is_the_wheelhouse_and_the_rootfs_script():
    lines = [
        line
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines == ["*", "!wheelhouse/", "!scripts/image_rootfs.py"]
    copied = [
        line.split()[1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
    ]
    assert copied == ["wheelhouse/", "scripts/image_rootfs.py"]
    assert "/wheelhouse/" in (ROOT / ".gitignore").read_text().split()


def test_the_wheel_builds_and_its_metaquorum_has_what_the_pod_runs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in (
        "metadata_records",
        "quorum",
        "api",
        "voter",
        "brokers",
        "pipeline",
        "metaquorum",
    ):
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
