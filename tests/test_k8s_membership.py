"""docs/kubernetes.md's membership procedures on the rendered StatefulSet, run
as real processes (tests/k8s_pods.py): scale 3 -> 5 -> 3 with kubectl scale
and metaquorum add-voter / remove-voter run in a pod, and a voter whose PVC is
gone replaced by deleting the pod and its claim. No acknowledged write is
lost and every voter ends with one image."""

import base64
import json
import shutil

import pytest

from .k8s_pods import LoopbackStatefulSet
from .k8s_render import named, prepared_copy, render
from .k8s_rolling import Writer, converged, registered_brokers

pytestmark = pytest.mark.slow


@pytest.fixture
def pods(tmp_path):
    objects = render(prepared_copy(tmp_path), "base")
    p = LoopbackStatefulSet(objects, tmp_path / "run")
    p.admin = (
        base64.b64decode(named(objects, "Secret", "metaquorum-tokens")["data"]["admin-token"])
        .decode()
        .strip()
    )
    try:
        yield p
    finally:
        p.close()


def role(pods, i) -> str | None:
    return (pods.status(i, pods.admin) or {}).get("role")


def voter_ids(pods, i) -> set[int]:
    s = pods.status(i, pods.admin) or {}
    return {v["nodeId"] for v in s.get("voters", []) if v.get("voter", True)}


def mq(pods, i, *args):
    """``kubectl exec metaquorum-i -- metaquorum ARGS --json``."""
    done = pods.exec(i, ["metaquorum", *args, "--json"])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_scale_to_five_and_back_and_replace_a_lost_volume(pods):
    pods.start_all()
    pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "three voters ready")
    cluster_id = pods.resolved_env(pods.pods[0])["METAQUORUM_CLUSTER_ID"]
    writer = Writer(
        [pods.url(i) for i in range(3)], pods.admin, cluster_id, tls=pods.client_tls
    ).start()
    try:
        # kubectl scale statefulset metaquorum --replicas=5
        pods.scale(5)
        for j in (3, 4):
            pods.start(j)
        for j in (3, 4):
            pods.wait(lambda j=j: role(pods, j) == "observer", 60, f"metaquorum-{j} joining")
            address = f"metaquorum-{j}.metaquorum-headless:9093"
            body = mq(pods, 0, "add-voter", "--node-id", str(j), "--address", address)
            assert j in {v["nodeId"] for v in body["voters"]}
        pods.wait(lambda: all(pods.ready(i) for i in range(5)), 90, "five voters ready")
        assert voter_ids(pods, 0) == {0, 1, 2, 3, 4}
        # A voter whose PVC is gone, while a voter added since (not in the
        # pods' --voters) leads: the empty pod must still find its leader
        # (voter_guard rule 7; CI saw it wait for good when node 4 led).
        leader = pods.status(0, pods.admin)["leaderId"]
        if leader != 4:
            mq(pods, leader, "transfer-leadership", "--to", "4")
        pods.wait(lambda: pods.status(0, pods.admin)["leaderId"] == 4, 30, "node 4 leading")
        # Delete the claim and the pod.
        old = pods.status(2, pods.admin)["directoryId"]
        pods.terminate(2)
        shutil.rmtree(pods.claim_dir(2))
        pods.start(2)
        pods.wait(
            lambda: role(pods, 2) == "voter" and pods.status(2, pods.admin)["directoryId"] != old,
            90,
            "metaquorum-2 a voter again with a new directory",
        )
        # Back to three: remove-voter from the top, then kubectl scale --replicas=3.
        for j in (4, 3):
            leader = pods.status(0, pods.admin)["leaderId"]
            if leader == j:
                mq(pods, j, "transfer-leadership")
            mq(pods, 0, "remove-voter", "--node-id", str(j))
            pods.terminate(j)
        claims = [pods.claim_dir(j) for j in (3, 4)]
        pods.scale(3)
        for claim in claims:  # kubectl delete pvc data-metaquorum-3 data-metaquorum-4
            shutil.rmtree(claim)
        pods.wait(lambda: voter_ids(pods, 0) == {0, 1, 2}, 30, "three voters")
        pods.wait(lambda: all(pods.ready(i) for i in range(3)), 90, "three voters ready")
        acks = len(writer.acked)
        pods.wait(lambda: len(writer.acked) > acks + 5, 30, "writes after the changes")
    finally:
        writer.stop()
    acked = {broker for broker, _ in writer.acked}
    assert acked, writer.failed[:3]
    assert acked <= registered_brokers(pods, 0, pods.admin), "an acknowledged write was lost"
    pods.wait(lambda: converged(pods, pods.admin), 60, "one image on every voter")
