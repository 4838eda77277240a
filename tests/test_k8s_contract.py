"""Contract test: the rendered StatefulSet's container, run as real
``metaquorum serve`` processes with exactly the rendered command, args and
environment (tests/k8s_pods.py says what is rewritten for loopback, and why).

The cluster forms with node ids from the pod names, the probes answer what
they claim, and a rolling restart 2, 1, 0 the way the kubelet does it
(preStop, SIGTERM, wait for ready) loses no acknowledged write. The
write-unavailability window of each restart is printed (figures, not asserts;
bench/k8s_rolling.py measures the same over several rounds)."""

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .k8s_pods import LoopbackStatefulSet
from .k8s_render import named, prepared_copy, render
from .k8s_rolling import (
    Writer,
    converged,
    leader_of,
    registered_brokers,
    report_lines,
    rolling_restart,
)

pytestmark = pytest.mark.slow


def _secret(objects, prefix: str, key: str) -> str:
    return base64.b64decode(named(objects, "Secret", prefix)["data"][key]).decode().strip()


@pytest.fixture
def base_pods(tmp_path):
    objects = render(prepared_copy(tmp_path), "base")
    pods = LoopbackStatefulSet(objects, tmp_path / "run")
    try:
        yield objects, pods
    finally:
        pods.close()


def test_three_rendered_voters_form_a_quorum_and_survive_a_rolling_restart(base_pods, capsys):
    objects, pods = base_pods
    token = _secret(objects, "metaquorum-tokens", "admin-token")
    cluster_id = named(objects, "ConfigMap", "metaquorum-config")["data"]["METAQUORUM_CLUSTER_ID"]
    assert pods.replicas == 3
    # As root (CI), every pod runs with a read-only root filesystem, as in the pod.
    assert pods.read_only_root or os.geteuid() != 0

    # One voter alone: alive (startup and liveness pass), not ready (no quorum).
    pods.start(0)
    pods.wait(lambda: pods.probe(0, "startupProbe")[0] == 200, 60, "metaquorum-0 started")
    assert pods.probe(0, "livenessProbe") == (200, {"status": "alive", "reason": None})
    status, body = pods.probe(0, "readinessProbe")
    assert status == 503 and body["status"] == "not ready"
    assert "no leader" in body["reason"]

    # The others join (Parallel: they would all start at once); all become ready.
    pods.start(1)
    pods.start(2)
    pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "all three ready")
    for i in range(3):
        assert pods.probe(i, "readinessProbe") == (200, {"status": "ready", "reason": None})
        s = pods.status(i, token)
        # Node id from the pod name, peers from the headless names, the advertised
        # URL built from $(HOSTNAME) and $(POD_NAMESPACE).
        assert s["nodeId"] == i and s["clusterId"] == cluster_id
        assert [v["raftAddress"] for v in s["voters"]] == [f"{pods.ip(j)}:9093" for j in range(3)]
        assert s["auth"] != "off"
    assert pods.pods[0].env["METAQUORUM_ADVERTISED_URL"] == pods.url(0)
    assert pods.pods[0].env["HOSTNAME"] == "metaquorum-0"

    writer = Writer([pods.url(i) for i in range(3)], token, cluster_id, tls=pods.client_tls).start()
    try:
        pods.wait(lambda: len(writer.acked) >= 20, 60, "the writer's first acks")
        results = rolling_restart(pods, writer, token)
    finally:
        writer.stop()

    with capsys.disabled():
        ro = "read-only root filesystem" if pods.read_only_root else "root filesystem writable"
        print(f"\nk8s rolling restart (3 voters, fsync always, one writer, {ro}):")
        for line in report_lines(results):
            print("  " + line)
        print(
            f"  writes acknowledged {len(writer.acked)}, outcome unknown {len(writer.unknown)}, "
            f"failed {len(writer.failed)}"
        )

    assert [r["pod"] for r in results] == ["metaquorum-2", "metaquorum-1", "metaquorum-0"]
    for r in results:
        assert r["exitCode"] == 0 and not r["killed"], (r, pods.tail(int(r["pod"][-1]), 40))
        assert r["preStopExit"] == 0, r["preStopOutput"]
        expected = "leadership moved" if r["wasLeader"] else "not the leader"
        assert expected in r["preStopOutput"], r
        if not r["wasLeader"]:
            # With no start-up delay, a restarted follower's pre-vote is refused
            # while the others hear the leader: no leader change, no new term.
            assert r["leaderAfter"] == r["leaderBefore"] and r["terms"] == 0, r
    assert not writer.failed, writer.failed[:5]

    # No acknowledged write lost: every voter has every acked registration.
    statuses = pods.wait(lambda: converged(pods, token), 60, "the voters to converge")
    assert leader_of(pods, token) is not None
    acked = {b for b, _ in writer.acked}
    for i in range(3):
        missing = acked - registered_brokers(pods, i, token)
        assert not missing, f"metaquorum-{i} lost acknowledged writes {sorted(missing)[:10]}"
    assert len({s["imageDigest"] for s in statuses}) == 1


def test_the_dev_overlay_runs_one_voter_whose_prestop_is_a_no_op(tmp_path):
    objects = render(prepared_copy(tmp_path), "dev")
    pods = LoopbackStatefulSet(objects, tmp_path / "run")
    token = _secret(objects, "metaquorum-tokens", "admin-token")
    try:
        assert pods.replicas == 1 and pods.namespace == "metaquorum-dev"
        pods.start(0)
        pods.wait(lambda: pods.ready(0), 60, "the dev voter ready")
        assert pods.status(0, token)["leaderId"] == 0
        if pods.read_only_root:  # the voter really runs on a read-only root
            mounts = (Path("/proc") / str(pods.pods[0].proc.pid) / "mounts").read_text()
            options = {line.split()[1]: line.split()[3] for line in mounts.splitlines()}
            assert options["/"].startswith("ro,"), options["/"]
            data = str(pods.pods[0].mounts["/var/lib/metaquorum"])
            assert options[data].startswith("rw,"), options
        stop = pods.terminate(0)
        assert stop["preStopExit"] == 0 and "only voter" in stop["preStopOutput"], stop
        assert stop["exitCode"] == 0 and not stop["killed"], stop
        # It comes back from its volume with the same identity.
        pods.start(0)
        pods.wait(lambda: pods.ready(0), 60, "the dev voter ready again")
        assert pods.status(0, token)["nodeId"] == 0
    finally:
        pods.close()


def test_backup_by_snapshot_download_and_restore_from_volume_copies(base_pods, tmp_path):
    """docs/kubernetes.md's procedure: download /v1/snapshot (and note the
    digest), scale to 0, copy every voter's volume, and later restore the
    copies into fresh volumes: the restored cluster serves the same image."""
    objects, pods = base_pods
    token = _secret(objects, "metaquorum-tokens", "admin-token")
    cluster_id = named(objects, "ConfigMap", "metaquorum-config")["data"]["METAQUORUM_CLUSTER_ID"]
    pods.start_all()
    pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "all three ready")
    writer = Writer([pods.url(i) for i in range(3)], token, cluster_id, tls=pods.client_tls).start()
    try:
        pods.wait(lambda: len(writer.acked) >= 30, 60, "some writes")
    finally:
        writer.stop()
    before = pods.wait(lambda: converged(pods, token), 60, "the voters to converge")[0]
    headers = {"authorization": f"Bearer {token}"}
    backup = pods.http.get(pods.url(1) + "/v1/snapshot", headers=headers, timeout=30).json()
    assert backup["offset"] == before["lastAppliedOffset"]

    for i in reversed(range(3)):  # kubectl scale statefulset metaquorum --replicas=0
        assert pods.terminate(i)["exitCode"] == 0
    volumes = pods.root / "pvc"
    shutil.copytree(volumes, tmp_path / "backup")
    shutil.rmtree(volumes)  # the claims are gone: restore into new, empty ones
    shutil.copytree(tmp_path / "backup", volumes)

    pods.start_all()
    pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "the restored voters ready")
    after = pods.wait(lambda: converged(pods, token), 60, "the restored voters to converge")
    # Every voter agrees; the image moved on only by the new leader's LEADER_CHANGE.
    assert len({s["imageDigest"] for s in after}) == 1
    assert after[0]["lastAppliedOffset"] > before["lastAppliedOffset"]
    restored = pods.http.get(pods.url(0) + "/v1/snapshot", headers=headers, timeout=30).json()
    # The same records (a new leader's LEADER_CHANGE may follow them in the log).
    key = lambda r: (r["type"], json.dumps(r["data"], sort_keys=True))  # noqa: E731
    kept = {key(r) for r in restored["records"] if r["type"] != "LEADER_CHANGE"}
    assert kept == {key(r) for r in backup["records"] if r["type"] != "LEADER_CHANGE"}
    acked = {b for b, _ in writer.acked}
    assert acked <= registered_brokers(pods, 2, token)


def test_backup_by_command_and_restore_into_new_volumes(base_pods, tmp_path):
    """docs/kubernetes.md's other procedure: ``metaquorum backup`` run with a
    voter's environment (the CronJob's flags), every volume lost, each
    voter's new volume written by ``metaquorum restore`` from that one file
    (``--keep-cluster-id``: the rendered cluster.env is unchanged), then the
    StatefulSet started again: it serves the backup's records and every
    write acknowledged before the backup."""
    objects, pods = base_pods
    token = _secret(objects, "metaquorum-tokens", "admin-token")
    cluster_id = named(objects, "ConfigMap", "metaquorum-config")["data"]["METAQUORUM_CLUSTER_ID"]
    pods.start_all()
    pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "all three ready")
    writer = Writer([pods.url(i) for i in range(3)], token, cluster_id, tls=pods.client_tls).start()
    try:
        pods.wait(lambda: len(writer.acked) >= 30, 60, "some writes")
    finally:
        writer.stop()
    acked = {b for b, _ in writer.acked}
    headers = {"authorization": f"Bearer {token}"}
    made = pods.exec(1, ["metaquorum", "backup", "--out-dir", "/tmp", "--keep", "28", "--quiet"])
    assert made.returncode == 0, made.stderr
    (file,) = pods.pods[1].mounts["/tmp"].glob(f"metaquorum-{cluster_id}-*.backup")
    saved = tmp_path / file.name
    shutil.copy(file, saved)
    backup = pods.http.get(pods.url(1) + "/v1/snapshot", headers=headers, timeout=30).json()

    for i in reversed(range(3)):
        assert pods.terminate(i)["exitCode"] == 0
    shutil.rmtree(pods.root / "pvc")  # every volume lost
    for i in range(3):
        r = subprocess.run(
            [shutil.which("metaquorum", path=os.path.dirname(sys.executable)) or "metaquorum",
             "restore", "--from", str(saved), "--data-dir", pods.pods[i].env["METAQUORUM_DATA_DIR"],
             "--node-id", str(i), "--voters", pods.pods[i].env["METAQUORUM_VOTERS"],
             "--keep-cluster-id"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr

    pods.start_all()
    pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "the restored voters ready")
    after = pods.wait(lambda: converged(pods, token), 60, "the restored voters to converge")
    assert len({s["imageDigest"] for s in after}) == 1
    restored = pods.http.get(pods.url(0) + "/v1/snapshot", headers=headers, timeout=30).json()

    # What the new cluster's first leader writes aside: its LEADER_CHANGE, the
    # voter set with the new volumes' directory ids, and the fencing of the
    # writer's brokers, which stopped heartbeating (their sessions begin
    # again with the new leader and expire).
    def key(r):
        data = {k: v for k, v in r["data"].items() if k != "fenced"}
        return r["type"], json.dumps(data, sort_keys=True)

    mine = {"LEADER_CHANGE", "KRAFT_VOTERS"}
    kept = {key(r) for r in restored["records"] if r["type"] not in mine}
    wanted = {key(r) for r in backup["records"] if r["type"] not in mine}
    assert kept >= wanted, sorted(wanted - kept)[:3]
    assert acked <= registered_brokers(pods, 2, token)


def test_ports_are_mapped_when_the_rendered_ones_are_taken(tmp_path):
    """If something held a rendered port on the wildcard address, the pods get
    free ports instead, rewritten everywhere the rendered port appears."""
    objects = render(prepared_copy(tmp_path), "dev")
    pods = LoopbackStatefulSet(objects, tmp_path / "run", map_ports=True)
    try:
        assert pods.port_map[9093] != 9093 and pods.port_map[8080] != 8080
        pods.start(0)
        env = pods.pods[0].env
        raft = f"{pods.ip(0)}:{pods.port_map[9093]}"
        assert env["METAQUORUM_VOTERS"] == f"0@{raft}"
        assert env["METAQUORUM_RAFT_BIND"] == pods.ip(0)
        assert env["METAQUORUM_HTTP_PORT"] == str(pods.port_map[8080])
        assert env["METAQUORUM_ADVERTISED_URL"] == pods.url(0)
        pods.wait(lambda: pods.ready(0), 60, "the dev voter ready on mapped ports")
        stop = pods.terminate(0)  # the preStop's 127.0.0.1:8080 is mapped too
        assert stop["preStopExit"] == 0 and "only voter" in stop["preStopOutput"], stop
        assert stop["exitCode"] == 0
    finally:
        pods.close()
