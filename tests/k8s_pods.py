"""A kubelet on loopback: the rendered StatefulSet's pods as real processes.

Each pod runs the rendered container's ``command`` + ``args`` with the
rendered environment, resolved the way the kubelet resolves it: ``envFrom``
first, then ``env`` in order, ``fieldRef`` from the pod, ``$(VAR)`` expanded
only from variables defined before it (an unresolvable reference stays as
written, as in Kubernetes). Nothing else of the test's environment leaks in
but ``PATH`` (where the image has ``metaquorum``), ``HOME`` and ``PYTHONPATH``.

There is no cluster network here, so these rewrites (and only these) are
applied to the resolved env, the command line and the preStop command
(``PYTHONPATH`` also passes, when set, so that a checkout's code runs):

* a pod's DNS name (``metaquorum-N.metaquorum-headless`` with or without
  ``.NS.svc[.cluster.local]``) -> that pod's own loopback address
  127.A.B.(N+1): each pod gets an address, as each pod gets an IP;
* the wildcard bind address ``0.0.0.0`` -> the pod's own address (in a pod,
  the wildcard reaches only the pod's network namespace);
* ``127.0.0.1`` (the pod's own loopback, used by the preStop hook) -> the pod's
  own address;
* a volume's ``mountPath`` prefix -> that volume's directory under the test's
  root: the PVC's directory lives as long as the ordinal (like the claim),
  secret volumes hold the rendered Secret's decoded keys, emptyDirs are new for
  each pod;
* ports, only if a rendered container port cannot be bound on the chosen
  addresses (something holds the wildcard): then each is mapped to a free one
  (``port_map`` says which), in ``host:port`` and in a value that is exactly
  the port;
* a ``kubernetes.io/tls`` Secret's files -> a certificate for the pod alone,
  from this kubelet's own CA (``issuer``), as cert-manager's csi-driver issues
  one per pod: the rendered certificate names the pods' DNS names, which are
  loopback addresses here. It names the pod's address, its DNS names and the
  client Service; ``ca.crt`` is the issuer's. The test's own clients
  (``http``, ``client_tls``) trust that CA; the probes, as the kubelet's, do
  not verify.

``readOnlyRootFilesystem`` is enforced for real where the test runs as root:
each pod process (and its preStop hook) runs in its own mount namespace
(``unshare -m``) whose root filesystem is remounted read-only, with only the
writable volumes (the PVC and the emptyDirs) left writable, so a write
anywhere else fails as it would in the pod. Its /tmp is read-only too: the
service needs no temporary files (the manifest still mounts an emptyDir there).
"""

from __future__ import annotations

import base64
import os
import random
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from brokers.tls import ClientTls
from metaquorum.dev_certs import ThrowawayCA

from .k8s_render import one
from .nodes import bindable, free_port

# Runs in a fresh mount namespace: keep the writable volumes writable (a bind
# mount onto itself), make everything else read-only, then exec the command.
_READ_ONLY_ROOT = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind "$1" "$1" || exit 97; shift; '
    'n=$((n-1)); done; mount -o remount,ro,bind / || exit 97; exec "$@"'
)


def can_make_root_read_only() -> bool:
    """Whether ``unshare -m`` and a read-only remount work here (root, util-linux)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", _READ_ONLY_ROOT, "ro", "0",
         "sh", "-c", "! touch /.metaquorum-ro-probe 2>/dev/null"],
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    return probe.returncode == 0


_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known names are replaced, ``$$`` is ``$``,
    an unknown reference stays as written."""

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, text)


@dataclass
class Pod:
    ordinal: int
    name: str
    ip: str
    proc: subprocess.Popen | None = None
    log: Path | None = None
    starts: int = 0
    mounts: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


class LoopbackStatefulSet:
    def __init__(
        self,
        objects: list[dict],
        root: Path,
        bin_dir: Path | None = None,
        map_ports: bool = False,  # as if the rendered ports were taken (tests the mapping)
    ) -> None:
        self.objects = objects
        self.root = Path(root)
        self.sts = one(objects, "StatefulSet")
        meta, spec = self.sts["metadata"], self.sts["spec"]
        self.name = meta["name"]
        self.namespace = meta.get("namespace", "default")
        self.service = spec["serviceName"]
        self.replicas = int(spec.get("replicas", 1))
        self.pod_spec = spec["template"]["spec"]
        self.container = self.pod_spec["containers"][0]
        self.grace_s = float(self.pod_spec.get("terminationGracePeriodSeconds", 30))
        self.bin_dir = Path(bin_dir or Path(sys.executable).parent)
        self.ports = {p["name"]: int(p["containerPort"]) for p in self.container["ports"]}
        self._choose_addresses(map_ports)
        self.pods = [
            Pod(i, f"{self.name}-{i}", f"{self.subnet}.{i + 1}") for i in range(self.replicas)
        ]
        # The API speaks HTTPS when the container is given a certificate.
        names = {e["name"] for e in self.container.get("env", [])}
        self.scheme = "https" if "METAQUORUM_TLS_CERT_FILE" in names else "http"
        self.issuer = ThrowawayCA("loopback kubelet CA")
        self.client_tls = ClientTls(
            ssl.create_default_context(cadata=self.issuer.cert_pem.decode()), has_cert=False
        )
        self.http = httpx.Client(timeout=5.0, verify=self.client_tls.context)
        self.prober = httpx.Client(verify=False)  # the kubelet does not verify
        self.read_only_root = can_make_root_read_only()

    # ------------------------------------------------------------ addresses

    def _choose_addresses(self, map_ports: bool) -> None:
        rng = random.Random()
        for _ in range(0 if map_ports else 50):
            subnet = f"127.{rng.randint(1, 254)}.{rng.randint(1, 254)}"
            ips = [f"{subnet}.{i + 1}" for i in range(self.replicas)]
            if all(bindable(port, ip) for ip in ips for port in self.ports.values()):
                self.subnet = subnet
                self.port_map = {p: p for p in self.ports.values()}
                return
        # Something holds a rendered port on the wildcard: map the ports.
        self.subnet = f"127.{rng.randint(1, 254)}.{rng.randint(1, 254)}"
        self.port_map = {}
        for port in self.ports.values():
            self.port_map[port] = free_port()

    def ip(self, ordinal: int) -> str:
        return self.pods[ordinal].ip

    def url(self, ordinal: int, port_name: str = "http") -> str:
        return f"{self.scheme}://{self.ip(ordinal)}:{self.port_map[self.ports[port_name]]}"

    # ------------------------------------------------------------ rewrites

    def _confined(self, argv: list[str], pod: Pod) -> list[str]:
        if not self.read_only_root:
            return argv
        volumes = {v["name"]: v for v in self.pod_spec.get("volumes", [])}
        writable = [
            str(pod.mounts[m["mountPath"]])
            for m in self.container.get("volumeMounts", [])
            if not m.get("readOnly") and "secret" not in volumes.get(m["name"], {})
        ]
        return [
            "unshare", "-m", "--propagation", "private", "sh", "-c", _READ_ONLY_ROOT,
            "read-only-root", str(len(writable)), *writable, *argv,
        ]  # fmt: skip

    def _volume_dirs(self, pod: Pod) -> dict[str, Path]:
        """mountPath -> directory, made and filled as the kubelet would."""
        volumes = {v["name"]: v for v in self.pod_spec.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in self.sts["spec"].get("volumeClaimTemplates", [])}
        out: dict[str, Path] = {}
        for mount in self.container.get("volumeMounts", []):
            name, path = mount["name"], mount["mountPath"]
            if name in claims:
                d = self.root / "pvc" / f"{name}-{pod.name}"  # lives as long as the ordinal
                d.mkdir(parents=True, exist_ok=True)
            else:
                d = self.root / "pods" / f"{pod.name}.{pod.starts}" / name
                if d.exists():
                    shutil.rmtree(d)
                d.mkdir(parents=True)
                volume = volumes[name]
                if "secret" in volume:
                    secret = one(self.objects, "Secret", volume["secret"]["secretName"])
                    mode = int(volume["secret"].get("defaultMode", 0o644))
                    files = {k: base64.b64decode(v) for k, v in secret.get("data", {}).items()}
                    if secret.get("type") == "kubernetes.io/tls":
                        files.update(self._pod_certificate(pod))
                    for key, value in files.items():
                        f = d / key
                        f.write_bytes(value)
                        f.chmod(mode)
                elif "emptyDir" not in volume:
                    raise NotImplementedError(f"volume {name}: only secrets, emptyDir and PVCs")
            out[path] = d
        return out

    def _pod_certificate(self, pod: Pod) -> dict[str, bytes]:
        """tls.crt, tls.key and ca.crt for ``pod`` (see the module docstring)."""
        dns = [f"{pod.name}.{self.service}", f"{pod.name}.{self.service}.{self.namespace}.svc",
               f"{self.name}.{self.namespace}.svc"]  # fmt: skip
        issued = self.issuer.issue(pod.name, ips=[pod.ip], dns=dns, client=False)
        return {
            "tls.crt": issued.cert_pem,
            "tls.key": issued.key_pem,
            "ca.crt": self.issuer.cert_pem,
        }

    def rewrite(self, text: str, pod: Pod, mounts: dict[str, Path]) -> str:
        def host_port(ip: str, port: str | None) -> str:
            if port is None:
                return ip
            return f"{ip}:{self.port_map.get(int(port), int(port))}"

        names = re.compile(
            rf"\b{re.escape(self.name)}-(\d+)\.{re.escape(self.service)}"
            rf"(?:\.{re.escape(self.namespace)}\.svc(?:\.cluster\.local)?)?(?::(\d+))?\b"
        )
        text = names.sub(lambda m: host_port(self.ip(int(m.group(1))), m.group(2)), text)
        text = re.sub(r"\b127\.0\.0\.1(?::(\d+))?\b", lambda m: host_port(pod.ip, m.group(1)), text)
        if text == "0.0.0.0":
            text = pod.ip
        if text.isdigit() and int(text) in self.port_map:
            text = str(self.port_map[int(text)])
        for path in sorted(mounts, key=len, reverse=True):
            if text == path or text.startswith(path.rstrip("/") + "/"):
                text = str(mounts[path]) + text[len(path.rstrip("/")) :]
                break
        return text

    # ------------------------------------------------------------ the environment

    def resolved_env(self, pod: Pod) -> dict[str, str]:
        """The container's environment exactly as Kubernetes builds it (no rewrites)."""
        env: dict[str, str] = {}
        for source in self.container.get("envFrom", []):
            if "configMapRef" in source:
                cm = one(self.objects, "ConfigMap", source["configMapRef"]["name"])
                env.update({k: str(v) for k, v in cm.get("data", {}).items()})
            elif "secretRef" in source:
                secret = one(self.objects, "Secret", source["secretRef"]["name"])
                env.update(
                    {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
                )
        fields = {
            "metadata.name": pod.name,
            "metadata.namespace": self.namespace,
            "status.podIP": pod.ip,
        }
        for var in self.container.get("env", []):
            if "value" in var:
                env[var["name"]] = expand(str(var["value"]), env)
            elif "fieldRef" in var.get("valueFrom", {}):
                env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                raise NotImplementedError(f"env {var['name']}: {var.get('valueFrom')}")
        return env

    def process_env(self, pod: Pod, mounts: dict[str, Path]) -> dict[str, str]:
        env = {k: self.rewrite(v, pod, mounts) for k, v in self.resolved_env(pod).items()}
        env["PATH"] = f"{self.bin_dir}{os.pathsep}/usr/bin:/bin"
        if os.environ.get("PYTHONPATH"):
            # The code under test (a checkout run with PYTHONPATH) is what the
            # image would hold, not whatever the venv has installed.
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        home = self.root / "pods" / pod.name
        home.mkdir(parents=True, exist_ok=True)
        env.setdefault("HOME", str(home))
        return env

    def _argv(self, argv: list[str], env: dict[str, str], pod: Pod, mounts) -> list[str]:
        resolved = [self.rewrite(expand(a, env), pod, mounts) for a in argv]
        exe = shutil.which(resolved[0], path=env["PATH"])
        if exe is None:
            raise FileNotFoundError(f"{resolved[0]} is not on the pod's PATH {env['PATH']}")
        return [exe, *resolved[1:]]

    def command_line(self, pod: Pod, mounts) -> tuple[list[str], dict[str, str]]:
        env = self.process_env(pod, mounts)
        argv = [*self.container.get("command", []), *self.container.get("args", [])]
        # $(VAR) in command/args expands from the container's env (before rewrites).
        raw = self.resolved_env(pod)
        return self._argv([expand(a, raw) for a in argv], env, pod, mounts), env

    # ------------------------------------------------------------ lifecycle

    def start(self, ordinal: int) -> None:
        pod = self.pods[ordinal]
        assert pod.proc is None or pod.proc.poll() is not None, f"{pod.name} is running"
        pod.starts += 1
        pod.mounts = self._volume_dirs(pod)
        argv, env = self.command_line(pod, pod.mounts)
        pod.env = env
        pod.log = self.root / f"{pod.name}.log"
        with open(pod.log, "ab") as log:
            log.write(f"--- start {pod.starts}: {argv}\n".encode())
            log.flush()
            pod.proc = subprocess.Popen(
                self._confined(argv, pod), env=env, stdout=log, stderr=subprocess.STDOUT,
                cwd=str(self.root),
            )  # fmt: skip

    def scale(self, replicas: int) -> None:
        """``kubectl scale``: ordinals from ``replicas`` up stop being pods (stop
        them first with ``terminate``); new ordinals get a pod each, started
        with ``start``. Claims (PVC directories) stay, as Kubernetes keeps them."""
        for i in range(len(self.pods), replicas):
            self.pods.append(Pod(i, f"{self.name}-{i}", f"{self.subnet}.{i + 1}"))
        del self.pods[replicas:]
        self.replicas = replicas

    def claim_dir(self, ordinal: int, claim: str = "data") -> Path:
        return self.root / "pvc" / f"{claim}-{self.pods[ordinal].name}"

    def exec(self, ordinal: int, argv: list[str], timeout_s: float = 120.0):
        """``kubectl exec``: ``argv`` in the running pod's environment."""
        pod = self.pods[ordinal]
        argv = self._argv(list(argv), pod.env, pod, pod.mounts)
        return subprocess.run(
            self._confined(argv, pod), env=pod.env, capture_output=True, text=True,
            timeout=timeout_s,
        )  # fmt: skip

    def start_all(self) -> None:
        for i in range(self.replicas):  # podManagementPolicy: Parallel
            self.start(i)

    def run_prestop(self, ordinal: int, timeout_s: float) -> subprocess.CompletedProcess:
        pod = self.pods[ordinal]
        hook = self.container["lifecycle"]["preStop"]["exec"]["command"]
        # An exec hook runs in the container with the container's environment;
        # the kubelet does not expand $(VAR) in it.
        argv = self._argv(list(hook), pod.env, pod, pod.mounts)
        return subprocess.run(
            self._confined(argv, pod), env=pod.env, capture_output=True, text=True,
            timeout=max(1.0, timeout_s),
        )  # fmt: skip

    def terminate(self, ordinal: int, prestop: bool = True) -> dict:
        """Deletes the pod as the kubelet does: preStop, then SIGTERM, SIGKILL
        when terminationGracePeriodSeconds (counted from the start) runs out.
        ``prestop=False`` skips the hook (to measure what it buys)."""
        pod = self.pods[ordinal]
        t0 = time.monotonic()
        if prestop:
            hook = self.run_prestop(ordinal, self.grace_s)
        else:
            hook = subprocess.CompletedProcess([], 0, "(no preStop)", "")
        t_hook = time.monotonic() - t0
        killed = False
        if pod.proc.poll() is None:
            pod.proc.send_signal(signal.SIGTERM)
        try:
            code = pod.proc.wait(timeout=max(2.0, self.grace_s - t_hook))
        except subprocess.TimeoutExpired:
            pod.proc.kill()
            code = pod.proc.wait(timeout=10)
            killed = True
        return {
            "preStopExit": hook.returncode,
            "preStopOutput": (hook.stdout + hook.stderr).strip(),
            "preStopSeconds": t_hook,
            "exitCode": code,
            "killed": killed,
            "stopSeconds": time.monotonic() - t0,
        }

    def lose(self, ordinal: int) -> None:
        """The pod's node is gone: the process dies at once, no preStop, no
        SIGTERM (its kernel, and every socket with it, goes too)."""
        proc = self.pods[ordinal].proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def close(self) -> None:
        for pod in self.pods:
            if pod.proc is not None and pod.proc.poll() is None:
                pod.proc.kill()
                pod.proc.wait(timeout=10)
        self.http.close()
        self.prober.close()

    # ------------------------------------------------------------ probes

    def probe(self, ordinal: int, which: str) -> tuple[int, dict]:
        """(status, body) of the rendered ``startupProbe``/``livenessProbe``/
        ``readinessProbe``; status 0 when nothing answers (a failed probe)."""
        spec = self.container[which]["httpGet"]
        port = spec["port"]
        port = self.ports[port] if isinstance(port, str) else int(port)
        scheme = spec.get("scheme", "HTTP").lower()
        url = f"{scheme}://{self.ip(ordinal)}:{self.port_map[port]}{spec['path']}"
        timeout = float(self.container[which].get("timeoutSeconds", 1))
        try:
            r = self.prober.get(url, timeout=timeout)
        except httpx.HTTPError:
            return 0, {}
        try:
            body = r.json()
        except ValueError:
            body = {}
        return r.status_code, body

    def ready(self, ordinal: int) -> bool:
        # The kubelet counts 200-399 as success.
        return 200 <= self.probe(ordinal, "readinessProbe")[0] < 400

    def wait(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            for pod in self.pods:
                if pod.proc is not None and pod.proc.poll() not in (None, 0, -9, -15):
                    raise AssertionError(
                        f"{pod.name} exited with {pod.proc.returncode}:\n{self.tail(pod.ordinal)}"
                    )
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{self.tail(p.ordinal)}" for p in self.pods)
                raise AssertionError(f"{what} not reached within {timeout_s} s\n{logs}")
            time.sleep(0.05)

    def tail(self, ordinal: int, lines: int = 20) -> str:
        log = self.pods[ordinal].log
        if log is None or not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def status(self, ordinal: int, token: str) -> dict | None:
        try:
            r = self.http.get(
                self.url(ordinal) + "/v1/quorum/status",
                params={"digest": "true"},
                headers={"authorization": f"Bearer {token}"},
                timeout=5.0,
            )
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None
