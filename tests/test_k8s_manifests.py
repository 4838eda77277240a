"""k8s/: every overlay renders with ``kubectl kustomize``, validates against
the Kubernetes schemas (kubernetes-validate, offline, strict), and keeps the
policies a quorum needs: anti-affinity, a PDB, probes on the right paths,
peers published before ready, no plain secrets, limits, a locked-down
securityContext."""

import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from .k8s_pods import expand
from .k8s_render import (
    K8S_DIR,
    KUBERNETES_VERSION,
    OVERLAYS,
    ROOT,
    named,
    one,
    prepared_copy,
    render,
    render_text,
)

VOTERS = {"base": 3, "dev": 1, "prod": 5}


@pytest.fixture(scope="module")
def k8s_copy(tmp_path_factory):
    return prepared_copy(tmp_path_factory.mktemp("k8s"))


@pytest.fixture(scope="module", params=["base", *OVERLAYS])
def rendered(request, k8s_copy):
    return request.param, render(k8s_copy, request.param)


def _container(objects):
    return one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]


def _labels(objects):
    return one(objects, "StatefulSet")["spec"]["selector"]["matchLabels"]


# ------------------------------------------------------------------ render and validate


def test_every_overlay_validates_against_the_kubernetes_schemas(rendered):
    name, objects = rendered
    kinds = sorted(o["kind"] for o in objects)
    backups = ["CronJob", "PersistentVolumeClaim"] if name == "prod" else []
    assert kinds == sorted(
        [
            *backups,
            "ConfigMap",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Secret",
            "Secret",
            "Secret",
            "Service",
            "Service",
            "StatefulSet",
        ]
    ), name
    for obj in objects:
        version = kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        assert version == KUBERNETES_VERSION.rsplit(".", 1)[0]


def test_the_validator_refuses_a_misspelt_field(k8s_copy):
    """The check has teeth: a typo anywhere in the StatefulSet is an error."""
    sts = one(render(k8s_copy, "prod"), "StatefulSet")
    sts["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(sts, KUBERNETES_VERSION, strict=True)


def test_the_validate_cli_passes_every_overlay_offline(k8s_copy, tmp_path):
    """What an operator runs: ``kubectl kustomize ... | kubernetes-validate``."""
    exe = Path(sys.executable).parent / "kubernetes-validate"
    for overlay in OVERLAYS:
        out = tmp_path / f"{overlay}.yaml"
        out.write_text(render_text(k8s_copy, overlay))
        r = subprocess.run(
            [str(exe), "--strict", "-k", KUBERNETES_VERSION, str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        objects = 11 if overlay == "prod" else 9  # prod: the backup CronJob and its volume
        assert r.stdout.count("passed for resource") == objects, r.stdout


def test_overlays_differ_where_they_should(k8s_copy):
    dev, prod = render(k8s_copy, "dev"), render(k8s_copy, "prod")
    assert one(dev, "StatefulSet")["metadata"]["namespace"] == "metaquorum-dev"
    assert one(prod, "StatefulSet")["metadata"]["namespace"] == "metaquorum"
    mem = [_container(o)["resources"]["limits"]["memory"] for o in (dev, prod)]
    assert mem == ["512Mi", "4Gi"]


# ------------------------------------------------------------------ policies


def test_voters_match_replicas_and_name_the_headless_pods(rendered):
    name, objects = rendered
    sts = one(objects, "StatefulSet")
    replicas = sts["spec"]["replicas"]
    assert replicas == VOTERS[name]
    config = named(objects, "ConfigMap", "metaquorum-config")["data"]
    raft_port = next(p for p in _container(objects)["ports"] if p["name"] == "raft")
    expected = ",".join(
        f"{i}@metaquorum-{i}.{sts['spec']['serviceName']}:{raft_port['containerPort']}"
        for i in range(replicas)
    )
    assert config["METAQUORUM_VOTERS"] == expected
    # Each pod names itself as --voters does (a pod past them joins with it).
    env = {e["name"]: e.get("value") for e in _container(objects)["env"]}
    for i in range(replicas):
        own = expand(env["METAQUORUM_RAFT_ADDRESS"], {"HOSTNAME": f"metaquorum-{i}"})
        assert f"{i}@{own}" in expected.split(",")
    # No start-up delay: a restarted voter's pre-vote is refused while the others
    # hear the leader, and a restarted cluster elects as soon as a majority is up.
    assert not any("ELECTION_DELAY" in key for key in config)
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    claims = sts["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    mounts = {m["name"]: m["mountPath"] for m in _container(objects)["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in _container(objects)["env"]}
    assert env["METAQUORUM_DATA_DIR"].startswith(mounts["data"] + "/")


def test_env_references_resolve_as_kubernetes_resolves_them(rendered):
    """$(VAR) sees only variables defined before it: a patch that reorders
    env would leave a literal $(POD_NAMESPACE) in a URL."""
    _, objects = rendered
    container = _container(objects)
    seen = set(named(objects, "ConfigMap", "metaquorum-config")["data"])
    for var in container["env"]:
        for ref in re.findall(r"\$\(([^)]+)\)", var.get("value", "")):
            assert ref in seen, f"{var['name']} uses $({ref}) before it is defined"
        seen.add(var["name"])
    env = {e["name"]: e for e in container["env"]}
    assert env["METAQUORUM_NODE_ID_FROM_HOSTNAME"]["value"] == "true"
    assert env["HOSTNAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    url = expand(env["METAQUORUM_ADVERTISED_URL"]["value"], {"HOSTNAME": "p", "POD_NAMESPACE": "n"})
    assert url == "https://p.metaquorum-headless.n.svc:8080"


def test_required_anti_affinity_spreads_voters_over_nodes(rendered):
    _, objects = rendered
    spec = one(objects, "StatefulSet")["spec"]["template"]["spec"]
    terms = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms) == 1
    assert terms[0]["topologyKey"] == "kubernetes.io/hostname"
    selector = terms[0]["labelSelector"]["matchLabels"]
    assert (
        selector.items()
        <= one(objects, "StatefulSet")["spec"]["template"]["metadata"]["labels"].items()
    )


def test_a_pdb_allows_one_voter_down_at_a_time(rendered):
    _, objects = rendered
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == _labels(objects)


def test_probes_are_on_the_right_paths(rendered):
    _, objects = rendered
    c = _container(objects)
    paths = {
        p: c[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert paths == {
        "startupProbe": "/livez",
        "livenessProbe": "/livez",
        "readinessProbe": "/readyz",
    }
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["port"] == "http"
    # Replay of a large log must not get the pod killed: 5 minutes to start.
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300


def test_the_prestop_hands_leadership_over_within_the_grace_period(rendered):
    _, objects = rendered
    c = _container(objects)
    hook = c["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[:3] == ["metaquorum", "transfer-leadership", "--if-leader"]
    assert "https://127.0.0.1:8080" in hook
    grace = one(objects, "StatefulSet")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # preStop transfer (<= 10 s) + SIGTERM transfer (<= 10 s) + HTTP drain (5 s) + flush.
    assert grace >= 60


def test_services_publish_peers_before_ready_and_clients_only_when_ready(rendered):
    _, objects = rendered
    sts = one(objects, "StatefulSet")
    headless = one(objects, "Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert {p["name"] for p in headless["spec"]["ports"]} == {"http", "raft"}
    client = one(objects, "Service", "metaquorum")
    assert not client["spec"].get("publishNotReadyAddresses", False)
    assert [p["name"] for p in client["spec"]["ports"]] == ["http"]
    for svc in (headless, client):
        assert svc["spec"]["selector"] == _labels(objects)


def test_the_raft_port_is_open_to_peers_only(rendered):
    _, objects = rendered
    policy = one(objects, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == _labels(objects)
    assert policy["policyTypes"] == ["Ingress"]
    raft_rules = [r for r in policy["ingress"] if any(p["port"] == "raft" for p in r["ports"])]
    assert len(raft_rules) == 1
    assert raft_rules[0]["from"] == [{"podSelector": {"matchLabels": _labels(objects)}}]
    for rule in policy["ingress"]:
        if "from" not in rule:
            assert [p["port"] for p in rule["ports"]] == ["http"]


def test_no_plain_secrets(rendered):
    _, objects = rendered
    c = _container(objects)
    secretish = re.compile(r"SECRET|TOKEN|PASSWORD", re.I)
    for var in c["env"]:
        if secretish.search(var["name"]):
            assert var["name"].endswith("_FILE") and var["value"].startswith("/etc/metaquorum/")
    for key in named(objects, "ConfigMap", "metaquorum-config")["data"]:
        assert not secretish.search(key), key
    secrets = [o for o in objects if o["kind"] == "Secret"]
    for s in secrets:
        assert "stringData" not in s
        # The TLS Secret keeps its name: it is updated in place (rotation).
        assert re.fullmatch(r"metaquorum-((raft|tokens)-[a-z0-9]{10}|tls)", s["metadata"]["name"])
    volumes = one(objects, "StatefulSet")["spec"]["template"]["spec"]["volumes"]
    modes = {
        v["secret"]["secretName"]: v["secret"]["defaultMode"] for v in volumes if "secret" in v
    }
    assert sorted(modes) == sorted(s["metadata"]["name"] for s in secrets)
    assert set(modes.values()) == {0o440}


def test_the_secret_sources_are_never_committed():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "k8s/base/local/tokens"], cwd=ROOT, timeout=30
    )
    assert ignored.returncode == 0, "k8s/base/local/ must be in .gitignore"
    tracked = subprocess.run(
        ["git", "ls-files", "k8s"], cwd=ROOT, capture_output=True, text=True, timeout=30
    ).stdout.split()
    assert tracked and not any("/local/" in path for path in tracked)
    kustomization = yaml.safe_load((K8S_DIR / "base" / "kustomization.yaml").read_text())
    files = [f for g in kustomization["secretGenerator"] for f in g["files"]]
    assert all(f.split("=", 1)[1].startswith("local/") for f in files)


def test_resources_and_a_locked_down_security_context(rendered):
    _, objects = rendered
    spec = one(objects, "StatefulSet")["spec"]["template"]["spec"]
    c = _container(objects)
    for kind in ("requests", "limits"):
        assert set(c["resources"][kind]) == {"cpu", "memory"}
    pod = spec["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0 and pod["fsGroup"] > 0
    assert pod["seccompProfile"]["type"] == "RuntimeDefault"
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    # A read-only root needs a writable /tmp; the service links would inject
    # METAQUORUM_* variables from the Service named metaquorum.
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert spec["enableServiceLinks"] is False
    assert spec["automountServiceAccountToken"] is False


def test_prometheus_scrapes_the_metrics_port(rendered):
    _, objects = rendered
    annotations = one(objects, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    http = next(p for p in _container(objects)["ports"] if p["name"] == "http")
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/port"] == str(http["containerPort"])


def test_prod_backs_up_on_a_schedule_with_the_overlays_own_secrets(k8s_copy):
    """The backup CronJob (k8s/components/backup): its command parses as the
    CLI's, it reads the generated token Secret by its hashed name and the CA,
    writes to its own volume, and no Service or PDB selects its pods."""
    from metaquorum.cli import _parser

    objects = render(k8s_copy, "prod")
    cron = one(objects, "CronJob", "metaquorum-backup")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]
    c = pod["spec"]["containers"][0]
    assert c["image"] == _container(objects)["image"]
    args = _parser("backup").parse_args([*c["command"][1:], *c["args"]])
    assert args.out_dir == "/backups" and args.keep >= 1
    assert args.url == "https://metaquorum:8080"
    secrets = {
        v["name"]: v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v
    }
    assert secrets["tokens"] == named(objects, "Secret", "metaquorum-tokens")["metadata"]["name"]
    assert secrets["tls"] == "metaquorum-tls"
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["METAQUORUM_TOKEN_FILE"] == "/etc/metaquorum/auth/admin-token"
    assert env["METAQUORUM_CACERT"] == "/etc/metaquorum/tls/ca.crt"
    claim = next(v for v in pod["spec"]["volumes"] if v["name"] == "backups")
    one(objects, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
    labels = pod["metadata"]["labels"]
    assert labels.items() & _labels(objects).items() != _labels(objects).items()
    assert cron["metadata"]["namespace"] == one(objects, "StatefulSet")["metadata"]["namespace"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
