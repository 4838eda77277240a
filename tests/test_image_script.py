"""scripts/image.sh for real: the image built with podman from a debootstrap
base (no registry), then its cluster check (3 voters from the image with the
StatefulSet's command line and environment, a leader killed, the acknowledged
registration found on the new leader), also after a killed run left a
container and a volume behind, and interrupted with Ctrl-C.

It needs root (rootful podman) and Debian's podman, runc and debootstrap
(.ci/run installs them; the script installs what is missing with apt-get).
It is skipped elsewhere, saying why, and fails in CI (METAQUORUM_CI). A cold
run, the debootstrap base included, took under 4 minutes here; a warm one
(the base and pip's cache kept) about one (docs/kubernetes.md, "The image").
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time

import pytest

from .k8s_render import ROOT, named, one, prepared_copy, render

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "scripts" / "image.sh"
LABEL = "io.metaquorum.image-sh"
PODMAN = ["podman", "--cgroup-manager=cgroupfs"]


def _require() -> None:
    why = None
    if os.geteuid() != 0:
        why = "scripts/image.sh runs rootful podman: run these tests as root"
    elif shutil.which("podman") is None and shutil.which("apt-get") is None:
        why = "no podman, and no apt-get to install it: install podman, runc and debootstrap"
    if why and os.environ.get("METAQUORUM_CI"):
        pytest.fail(why)
    if why:
        pytest.skip(why)


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _leftovers() -> tuple[list[str], list[str]]:
    containers = subprocess.run(
        [*PODMAN, "ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    volumes = subprocess.run(
        [*PODMAN, "volume", "ls", "-q", "--filter", f"label={LABEL}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return containers, volumes


@pytest.fixture(scope="module")
def image() -> str:
    _require()
    r = _script("build", timeout=1200)
    assert r.returncode == 0, f"scripts/image.sh build failed:\n{r.stdout}\n{r.stderr}"
    m = re.search(r"==> (\S+): (\d+) MB \((\d+) MB gzipped", r.stdout)
    assert m, r.stdout
    return m.group(1)


@pytest.fixture
def cleaned():
    """Whatever a test leaves (a failed check, an interrupted run) is removed."""
    yield
    r = _script("clean", timeout=120)
    assert r.returncode == 0, r.stderr
    assert _leftovers() == ([], [])


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    objects = render(prepared_copy(tmp_path_factory.mktemp("k8s")), "base")
    spec = one(objects, "StatefulSet")["spec"]["template"]["spec"]
    return spec, named(objects, "ConfigMap", "metaquorum-config")["data"]


def test_the_image_runs_the_manifests_command_as_its_user_without_a_shell(image, pod):
    spec, _ = pod
    container = spec["containers"][0]
    (config,) = json.loads(
        subprocess.run(
            [*PODMAN, "image", "inspect", image], capture_output=True, text=True, check=True
        ).stdout
    )
    config = config["Config"]
    assert config["Entrypoint"] + config["Cmd"] == container["command"] + container["args"]
    assert config["User"] == f"{spec['securityContext']['runAsUser']}:" + str(
        spec["securityContext"]["runAsGroup"]
    )
    # The pipeline extra and the packaging tools are not in it, and nor is a shell.
    runtime = ["--runtime", shutil.which("runc"), "--ulimit", "nofile=1024:1024"]
    probe = subprocess.run(
        [*PODMAN, "run", "--rm", *runtime, "--ulimit", "nproc=4096:4096", "--read-only",
         "--entrypoint", "/opt/metaquorum/bin/python", image, "-c",
         "import importlib.util as u, os; "
         "print([m for m in ('pyspark', 'pyarrow', 'matplotlib', 'pip', 'setuptools') "
         "if u.find_spec(m)], os.path.exists('/bin/sh'))"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split("\n")[0] == "[] False"


def _voter_command(output: str) -> list[str]:
    line = next(x for x in output.splitlines() if x.strip().startswith("$ podman run"))
    return shlex.split(line.strip()[2:])


def test_the_cluster_check_uses_the_statefulsets_environment_and_mounts(image, pod, cleaned):
    r = _script("cluster", timeout=600)
    assert r.returncode == 0, f"scripts/image.sh cluster failed:\n{r.stdout}\n{r.stderr}"
    assert "cluster check passed" in r.stdout
    assert _leftovers() == ([], [])

    spec, configmap = pod
    container = spec["containers"][0]
    argv = _voter_command(r.stdout)
    names = set()
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "-e":
            names.add(value.split("=", 1)[0])
        elif flag == "--env-file" and value.endswith("config.env"):
            names |= {
                line.split("=", 1)[0]
                for line in (ROOT / "k8s" / "base" / "config.env").read_text().splitlines()
                if "=" in line and not line.startswith("#")
            }
        elif flag == "--env-file":
            names.add("METAQUORUM_CLUSTER_ID")  # the script's cluster.env, from make-secrets.py
    # The StatefulSet leaves the HTTP workers to `auto`; the check sets them,
    # to run voter 1 in the workers layout.
    assert "METAQUORUM_HTTP_WORKERS" in names
    names.discard("METAQUORUM_HTTP_WORKERS")
    assert names == {e["name"] for e in container["env"]} | set(configmap)
    mounts = {v.split(":")[1] for f, v in zip(argv, argv[1:], strict=False) if f == "-v"}
    mounts |= {v.split(":")[0] for f, v in zip(argv, argv[1:], strict=False) if f == "--tmpfs"}
    assert mounts == {m["mountPath"] for m in container["volumeMounts"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] and "--read-only" in argv
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert argv[argv.index("--cap-drop") + 1] == "ALL"


def test_the_cluster_check_removes_what_a_killed_run_left(image, cleaned):
    # As a run killed with SIGKILL leaves them: a voter's volume, and its
    # container still running under the name the next run uses.
    subprocess.run(
        [*PODMAN, "volume", "create", "--label", LABEL, "metaquorum-image-data-1"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [*PODMAN, "run", "-d", "--runtime", shutil.which("runc"), "--ulimit", "nofile=1024:1024",
         "--ulimit", "nproc=4096:4096", "--name", "metaquorum-image-1", "--label", LABEL,
         "-v", "metaquorum-image-data-1:/var/lib/metaquorum",
         "--entrypoint", "/opt/metaquorum/bin/python", image, "-c",
         "import signal; signal.pause()"],
        check=True, capture_output=True,
    )  # fmt: skip
    r = _script("cluster", timeout=600)
    assert r.returncode == 0, f"scripts/image.sh cluster failed:\n{r.stdout}\n{r.stderr}"
    assert "removing containers left by an earlier run: metaquorum-image-1" in r.stdout
    assert "removing volumes left by an earlier run: metaquorum-image-data-1" in r.stdout
    assert "cluster check passed" in r.stdout
    assert _leftovers() == ([], [])


def test_ctrl_c_stops_the_cluster_check_and_removes_its_voters(image, cleaned):
    # SIGINT as a terminal's shell leaves it. A test run may inherit it
    # ignored (a job started in the background does), and bash cannot trap a
    # signal ignored when it starts: the script would run on to its end, as
    # in one CI run here, where even its subshells went on after the Ctrl-C.
    proc = subprocess.Popen(
        [str(SCRIPT), "cluster"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, cwd=ROOT, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        seen = []
        deadline = time.monotonic() + 300
        for line in proc.stdout:  # until the last voter has been started
            seen.append(line)
            if "waiting for a leader" in line or "leads," in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        # At once: the check is over in about 15 s, and asking podman what runs
        # first took long enough on a loaded machine for it to end meanwhile.
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        assert sum("$ podman run" in line for line in seen) == 3, "".join(seen)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, "".join(seen) + rest
    assert _leftovers() == ([], []), "".join(seen) + rest
