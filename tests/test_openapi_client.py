"""A client generated from ``/openapi.json`` by a third-party generator works
against a real node: what a broker team in another language does first.

The generator (openapi-python-client, pinned) goes into a scratch virtualenv
under the test's tmp dir, not into the project's: its dependencies are not
ours, and the generated package must work with only what it declares. It
generates a package from the document a running ``metaquorum serve`` serves;
the package is installed in that venv, and a script run by that venv's Python
in isolated mode (nothing of this repository importable) uses only the
generated client: it registers two brokers with their bound broker tokens,
heartbeats them until they are unfenced, creates a topic with an admin token,
shrinks and re-expands the ISR with AlterPartition v3 (KIP-903's
``newIsrWithEpochs``) and reads the ISR back after each change; and a
heartbeat with another broker's token comes back as the documented 403 body.

pip may use its cache and the package registry. The time each step takes is
printed (docs/clients.md quotes it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from .cluster import Cluster
from .conftest import running

pytestmark = pytest.mark.slow

GENERATOR = "openapi-python-client==0.29.1"  # the version docs/clients.md names
TOKENS = {"admin": "client-admin", "1": "client-broker-1", "2": "client-broker-2"}
# Generator settings: no post hooks (they run ruff, which the scratch venv has not).
GENERATOR_CONFIG = "post_hooks: []\n"

CLIENT_SCRIPT = r'''
"""Uses only the generated package: the broker side of KIP-497/903 over HTTP."""
import base64
import json
import sys
import time
import uuid

from metaquorum_client import AuthenticatedClient
from metaquorum_client.api.admin import create_topics
from metaquorum_client.api.brokers import alter_partition, broker_heartbeat, register_broker
from metaquorum_client.api.reads import get_topic, quorum_status
from metaquorum_client.models import (
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerFeature,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerState,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ErrorResponse,
    Listener,
    QuorumStatusOut,
    TopicOut,
)
from metaquorum_client.models.alter_partition_topic_data import AlterPartitionTopicData

url, tokens = sys.argv[1], json.loads(sys.argv[2])


def client(who):
    return AuthenticatedClient(base_url=url, token=tokens[who], raise_on_unexpected_status=True)


def expect(answer, kind):
    if not isinstance(answer, kind):
        raise SystemExit(f"expected a {kind.__name__}, the generated client gave {answer!r}")
    if getattr(answer, "error_code", 0) != 0:
        raise SystemExit(f"{kind.__name__}: {answer.error_name}: {answer.error_message}")
    return answer


status = expect(quorum_status.sync(client=client("admin")), QuorumStatusOut)
epochs = {}
for broker in (1, 2):
    registered = register_broker.sync(
        client=client(str(broker)),
        body=BrokerRegistrationRequest(
            broker_id=broker,
            cluster_id=status.cluster_id,
            incarnation_id=base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
            listeners=[
                Listener(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker, security_protocol=0)
            ],
            features=[
                BrokerFeature(
                    name="metadata.version",
                    min_supported_version=status.metadata_version,
                    max_supported_version=status.metadata_version,
                )
            ],
        ),
    )
    epochs[broker] = expect(registered, BrokerRegistrationResponse).broker_epoch

# A broker is unfenced once it reports having applied its own registration.
deadline = time.monotonic() + 30
fenced = {1, 2}
while fenced:
    for broker in sorted(fenced):
        beat = broker_heartbeat.sync(
            client=client(str(broker)),
            body=BrokerHeartbeatRequest(
                broker_id=broker, broker_epoch=epochs[broker], current_metadata_offset=epochs[broker]
            ),
        )
        if not expect(beat, BrokerHeartbeatResponse).is_fenced:
            fenced.discard(broker)
    if fenced and time.monotonic() > deadline:
        raise SystemExit(f"brokers {sorted(fenced)} still fenced after 30 s of heartbeats")
    time.sleep(0.05)

forbidden = broker_heartbeat.sync(
    client=client("1"),
    body=BrokerHeartbeatRequest(broker_id=2, broker_epoch=epochs[2], current_metadata_offset=0),
)
if not isinstance(forbidden, ErrorResponse):
    raise SystemExit(f"broker 1's token acting for broker 2: expected the 403 body, got {forbidden!r}")

created = expect(
    create_topics.sync(
        client=client("admin"),
        body=CreateTopicsRequest(
            topics=[CreatableTopic(name="orders", num_partitions=1, replication_factor=2)]
        ),
    ),
    CreateTopicsResponse,
)
if created.topics[0].error_code != 0:
    raise SystemExit(f"CreateTopics: {created.topics[0].error_name}: {created.topics[0].error_message}")


def read_partition():
    topic = expect(get_topic.sync(name="orders", client=client("admin")), TopicOut)
    return topic.topic_id, topic.partitions[0]


def change_isr(topic_id, partition, isr):
    """AlterPartition v3 from the partition's leader, with each member's broker epoch."""
    leader = partition.leader
    answer = alter_partition.sync(
        client=client(str(leader)),
        version=3,
        body=AlterPartitionRequest(
            broker_id=leader,
            broker_epoch=epochs[leader],
            topics=[
                AlterPartitionTopicData(
                    topic_id=topic_id,
                    partitions=[
                        AlterPartitionPartitionData(
                            partition_index=partition.partition_index,
                            leader_epoch=partition.leader_epoch,
                            partition_epoch=partition.partition_epoch,
                            new_isr_with_epochs=[
                                BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in isr
                            ],
                        )
                    ],
                )
            ],
        ),
    )
    result = expect(answer, AlterPartitionResponse).topics[0].partitions[0]
    if result.error_code != 0:
        raise SystemExit(f"AlterPartition to {isr}: {result.error_name}: {result.error_message}")
    return result


topic_id, before = read_partition()
shrunk = change_isr(topic_id, before, [before.leader])
_, after_shrink = read_partition()
expanded = change_isr(topic_id, after_shrink, before.replicas)
_, after_expand = read_partition()
print(
    json.dumps(
        {
            "epochs": epochs,
            "forbidden": forbidden.error_name,
            "leader": before.leader,
            "replicas": before.replicas,
            "isr": [before.isr, after_shrink.isr, after_expand.isr],
            "answered_isr": [shrunk.isr, expanded.isr],
            "partition_epochs": [
                before.partition_epoch, after_shrink.partition_epoch, after_expand.partition_epoch
            ],
        }
    )
)
'''


def run(args: list, what: str, timeout_s: float, **kw) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, **kw)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what} took more than {timeout_s} s") from None
    assert done.returncode == 0, (
        f"{what} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture
def node(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKENS['admin']} admin\n{TOKENS['1']} broker 1\n{TOKENS['2']} broker 2\n")
    (tmp_path / "node").mkdir()
    c = Cluster(
        tmp_path / "node",
        voters=1,
        # A session longer than the test: no broker is fenced behind its back.
        extra=["--tokens-file", str(tokens), "--session-timeout-ms", "120000"],
    )
    c.client.headers["Authorization"] = f"Bearer {TOKENS['admin']}"
    with running(c):
        yield c


def test_a_generated_python_client_registers_heartbeats_creates_and_alters_an_isr(
    node, tmp_path, capsys
):
    document = node.get(0, "/openapi.json")
    assert document.status_code == 200, document.text
    spec = tmp_path / "openapi.json"
    spec.write_bytes(document.content)
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    timings = {}

    started = time.monotonic()
    run([sys.executable, "-m", "venv", str(venv)], "creating the scratch venv", 120)
    run([*pip, GENERATOR], f"pip install {GENERATOR}", 300)
    timings["venv and generator"] = time.monotonic() - started

    started = time.monotonic()
    config = tmp_path / "generator.yaml"
    config.write_text(GENERATOR_CONFIG)
    out = tmp_path / "client"
    generated = run(
        [
            str(venv / "bin" / "openapi-python-client"), "generate",
            "--path", str(spec), "--output-path", str(out), "--meta", "setup",
            "--config", str(config), "--fail-on-warning",
        ],
        "openapi-python-client generate (warnings fail it)",
        120,
    )  # fmt: skip
    assert "Warning" not in generated.stdout + generated.stderr, generated.stdout
    timings["generation"] = time.monotonic() - started
    modules = {p.stem for p in (out / "metaquorum_client" / "api").rglob("*.py")}
    for name in ("register_broker", "broker_heartbeat", "alter_partition", "create_topics"):
        assert name in modules, f"no module {name} generated (operationIds?): {sorted(modules)}"

    started = time.monotonic()
    run([*pip, str(out)], "installing the generated package", 300)
    timings["install"] = time.monotonic() - started

    script = tmp_path / "broker_side.py"
    script.write_text(CLIENT_SCRIPT)
    started = time.monotonic()
    result = run(
        [str(python), "-I", str(script), node.url(0), json.dumps(TOKENS)],
        "the script using the generated client",
        120,
        cwd=tmp_path,
    )
    timings["script"] = time.monotonic() - started
    seen = json.loads(result.stdout.strip().splitlines()[-1])

    leader, replicas = seen["leader"], seen["replicas"]
    before, shrunk, expanded = seen["isr"]
    assert sorted(replicas) == [1, 2] and before == replicas, f"topic created as {seen}"
    assert shrunk == [leader] == seen["answered_isr"][0], f"the ISR did not shrink: {seen}"
    assert sorted(expanded) == [1, 2] == sorted(seen["answered_isr"][1]), (
        f"the ISR did not expand back: {seen}"
    )
    epochs = seen["partition_epochs"]
    assert epochs[0] < epochs[1] < epochs[2], f"each change bumps the partition epoch: {seen}"
    assert seen["forbidden"] == "CLUSTER_AUTHORIZATION_FAILED", seen
    with capsys.disabled():
        print(
            f"\ngenerated client ({GENERATOR}): "
            + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
        )
