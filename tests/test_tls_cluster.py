"""HTTPS end to end: three real ``metaquorum serve`` voters on loopback with
real certificates (tests/tls_files.py), the real client (brokers/client.py)
and the real CLI. Client certificates are optional on this cluster and
tokens work beside them (api/auth.py: a token, when sent, decides)."""

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys

import httpx
import orjson
import pytest

from brokers.client import MetaquorumClient, OutcomeUnknown, RequestRejected, TlsFailure
from metaquorum.dev_certs import ThrowawayCA

from .cluster import Cluster
from .conftest import running
from .local_node import registration_body
from .tls_files import TlsFiles

pytestmark = pytest.mark.slow

TOKENS = "tok-admin admin\ntok-broker-7 broker 7\n"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls-cluster")
    tokens = root / "tokens"
    tokens.write_text(TOKENS)
    tls = TlsFiles(root / "tls")
    with running(Cluster(root, voters=3, tls=tls, extra=["--tokens-file", str(tokens)])) as c:
        yield c


def _client(c: Cluster, seeds: list[int], cert: str | None = None, **kw) -> MetaquorumClient:
    return MetaquorumClient(
        [c.url(i) for i in seeds], tls=c.tls.client_tls(cert), max_attempts=4, **kw
    )


def _follower(c: Cluster) -> tuple[int, int]:
    leader = c.leader()
    return leader, next(i for i in range(c.n) if i != leader)


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def _register_and_unfence(client: MetaquorumClient, cluster_id: str, broker_id: int) -> int:
    body = registration_body(cluster_id, broker_id)
    registration = await client.register(
        broker_id, cluster_id, body["incarnationId"], body["listeners"], body["features"]
    )
    assert registration.ok, registration
    for _ in range(100):
        beat = await client.heartbeat(broker_id, registration.broker_epoch, 1 << 40)
        if beat.ok and not beat.is_fenced:
            return registration.broker_epoch
        await asyncio.sleep(0.05)
    raise AssertionError(f"broker {broker_id} was never unfenced")


def test_every_voter_advertises_https_and_the_leader_change_names_it(tls_cluster):
    c = tls_cluster
    leader = c.leader()
    for i in range(c.n):
        status = c.status(i)
        assert status["leaderUrl"] == c.url(leader) and status["leaderUrl"].startswith("https://")
        urls = [v["url"] for v in status["voters"] if v["url"] is not None]  # self and leader
        assert urls and all(u.startswith("https://") for u in urls), status["voters"]
    records = c.get(leader, "/v1/log", params={"fromOffset": 0, "maxRecords": 1000}).json()
    changes = [r for r in records["records"] if r["type"] == "LEADER_CHANGE"]
    assert changes and all(r["data"]["leaderUrl"].startswith("https://") for r in changes)


def test_a_write_to_a_follower_is_redirected_to_the_leader_over_https(tls_cluster):
    c = tls_cluster
    leader, follower = _follower(c)
    body = {"topics": [{"name": "redirected", "numPartitions": 1, "replicationFactor": 1}]}
    r = c.post(follower, "/v1/topics", body, follow_redirects=False)
    assert r.status_code == 307, r.text
    assert r.headers["location"] == c.url(leader) + "/v1/topics"
    assert r.json()["leaderUrl"] == c.url(leader)
    r = c.post(follower, "/v1/topics", body, follow_redirects=True)
    # Processed by the active controller (no broker is registered yet: the
    # answer is the controller's INVALID_REPLICATION_FACTOR, not a redirect).
    assert r.status_code == 200 and r.json()["topics"][0]["name"] == "redirected", r.text
    assert str(r.url) == c.url(leader) + "/v1/topics"


def test_brokers_register_heartbeat_and_alter_partition_by_certificate(tls_cluster):
    """Each broker authenticates with its own certificate (CN=broker-N), the
    admin with CN=admin-tests; every client starts at a follower, so each
    first write is redirected, over https, to the leader."""
    c = tls_cluster
    leader, follower = _follower(c)

    async def run():
        brokers = {b: _client(c, [follower], f"broker-{b}") for b in (1, 2, 3)}
        admin = _client(c, [follower], "admin-tests")
        try:
            epochs = {
                b: await _register_and_unfence(cl, c.cluster_id, b) for b, cl in brokers.items()
            }
            assert all(cl.leader == c.url(leader) for cl in brokers.values())
            created = await admin.create_topic("tls-orders", partitions=1, replication_factor=3)
            assert created.ok, created
            topic = await admin.topic("tls-orders", linearizable=True)
            partition = topic.body["partitions"][0]
            lead = partition["leader"]
            shrunk = [b for b in partition["isr"] if b != lead][:1] + [lead]
            answer = await brokers[lead].alter_partition(
                lead,
                epochs[lead],
                [{"topicId": topic.body["topicId"], "partitions": [{
                    "partitionIndex": 0,
                    "leaderEpoch": partition["leaderEpoch"],
                    "newIsrWithEpochs": [{"brokerId": b, "brokerEpoch": epochs[b]} for b in shrunk],
                    "leaderRecoveryState": 0,
                    "partitionEpoch": partition["partitionEpoch"],
                }]}],
            )  # fmt: skip
            assert answer.ok and answer.partitions[0].error_code == 0, answer
            assert sorted(answer.partitions[0].isr) == sorted(shrunk)
            # A linearizable read at a follower reflects the acknowledged write.
            reader = _client(c, [follower], "read-dashboard")
            try:
                seen = await reader.topic("tls-orders", linearizable=True)
            finally:
                await reader.close()
            assert sorted(seen.body["partitions"][0]["isr"]) == sorted(shrunk)
            # A broker certificate acting for another broker id: 403.
            other = next(b for b in (1, 2, 3) if b != lead)
            with pytest.raises(RequestRejected) as refused:
                await brokers[lead].heartbeat(other, epochs[other], 1 << 40)
            assert refused.value.status == 403
            assert f"certificate CN=broker-{lead} for broker {lead}" in str(refused.value)
            assert f"may not act for broker {other}" in str(refused.value)
        finally:
            for cl in [*brokers.values(), admin]:
                await cl.close()

    asyncio.run(run())


def test_tokens_work_over_https_and_a_token_decides_over_a_certificate(tls_cluster):
    c = tls_cluster
    leader = c.leader()
    body = registration_body(c.cluster_id, 7)
    no_cert = httpx.Client(verify=c.tls.context(), timeout=10)
    broker_1_cert = httpx.Client(verify=c.tls.context("broker-1"), timeout=10)
    try:
        r = no_cert.post(c.url(leader) + "/v1/brokers/register", json=body,
                         headers={"authorization": "Bearer tok-broker-7"})  # fmt: skip
        assert r.status_code == 200 and r.json()["errorCode"] == 0, r.text
        # The token is broker 7's; the connection's certificate is broker 1's.
        r = broker_1_cert.post(c.url(leader) + "/v1/brokers/register", json=body,
                               headers={"authorization": "Bearer tok-broker-7"})  # fmt: skip
        assert r.status_code == 200, r.text
        r = broker_1_cert.post(c.url(leader) + "/v1/brokers/register", json=body,
                               headers={"authorization": "Bearer not-a-token"})  # fmt: skip
        assert r.status_code == 401 and "unknown bearer token" in r.json()["errorMessage"]
        r = no_cert.get(c.url(leader) + "/v1/brokers")
        assert r.status_code == 401
        assert "or a client certificate" in r.json()["errorMessage"]
    finally:
        no_cert.close()
        broker_1_cert.close()


def test_plain_http_on_the_tls_port_is_refused(tls_cluster):
    c = tls_cluster
    plain = c.url(0).replace("https://", "http://")
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(plain + "/livez", timeout=5)
    r = cli("status", "--url", plain)
    assert r.returncode == 2  # no answer: docs/cli.md
    assert r.stderr.strip() == (
        f"metaquorum: TLS: {plain} speaks HTTPS: use https://127.0.0.1:{c.http[0]} (and --cacert)"
    )


def test_a_server_certificate_of_another_ca_is_refused_as_unknown(tls_cluster, tmp_path):
    c = tls_cluster
    other = TlsFiles(tmp_path / "other")

    async def run():
        client = MetaquorumClient([c.url(0)], tls=other.client_tls())
        try:
            with pytest.raises(TlsFailure) as failed:
                await client.status()
        finally:
            await client.close()
        return str(failed.value)

    line = asyncio.run(run())
    assert line == (
        f"TLS: cannot trust the server at {c.url(0)}: unknown CA: its certificate is not "
        "signed by a CA in --cacert (METAQUORUM_CACERT)"
    )
    r = cli("status", "--url", c.url(0), "--cacert", str(other.ca_file))
    assert r.returncode == 2 and r.stderr.strip() == f"metaquorum: {line}"


def test_a_wrong_host_name_is_refused(tls_cluster):
    """The voters' certificates name 127.0.0.1 only: localhost is another name."""
    c = tls_cluster
    url = f"https://localhost:{c.http[0]}"
    r = cli("status", "--url", url, "--cacert", str(c.tls.ca_file))
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"metaquorum: TLS: cannot trust the server at {url}: name mismatch: its "
        "certificate does not name localhost"
    )


def test_a_client_certificate_the_server_cannot_verify_is_refused(tls_cluster):
    """Another CA's certificate, and this CA's expired one: the handshake
    fails, and the client's probe names its certificate as the cause."""
    c = tls_cluster
    now = dt.datetime.now(dt.UTC)
    for tls in (
        c.tls.client_tls("broker-1", ca=ThrowawayCA("a stranger's CA")),
        c.tls.client_tls(
            "broker-2", not_before=now - dt.timedelta(days=9), not_after=now - dt.timedelta(days=1)
        ),  # fmt: skip
    ):

        async def run(tls=tls):
            client = MetaquorumClient([c.url(0)], tls=tls, max_attempts=2)
            try:
                with pytest.raises(TlsFailure) as read_failed:
                    await client.status()
                # A write cut off this way may have been sent: its outcome is
                # unknown, and the reason rides along.
                with pytest.raises(OutcomeUnknown) as write_failed:
                    await client.heartbeat(1, 1, 0)
            finally:
                await client.close()
            return str(read_failed.value), str(write_failed.value)

        read_line, write_line = asyncio.run(run())
        expected = (
            f"TLS: {c.url(0)} closed the connection right after the handshake: it refused "
            "this client's certificate (--cert: not signed by the server's client CA, "
            "expired, or not for client authentication)"
        )
        assert read_line == expected, read_line
        assert write_line.endswith(expected), write_line


def test_the_operator_cli_authenticates_with_a_certificate(tls_cluster):
    c = tls_cluster
    cert, key = c.tls.client("admin-operator")
    flags = [
        "--url",
        c.url(0),
        "--cacert",
        str(c.tls.ca_file),
        "--cert",
        str(cert),
        "--key",
        str(key),
    ]

    async def create_while_a_broker_heartbeats() -> subprocess.CompletedProcess:
        # Its own broker, kept unfenced while the command runs: one left by an
        # earlier test may have been fenced since (its session expired).
        broker = _client(c, list(range(c.n)), "broker-7")
        try:
            epoch = await _register_and_unfence(broker, c.cluster_id, 7)
            command = asyncio.create_task(
                asyncio.to_thread(
                    cli,
                    *("create-topic", "cli-made", "--partitions", "1", "--replication-factor", "1"),
                    *flags,
                )
            )
            while not command.done():
                await broker.heartbeat(7, epoch, 1 << 40)
                await asyncio.wait({command}, timeout=0.5)
            return command.result()
        finally:
            await broker.close()

    r = asyncio.run(create_while_a_broker_heartbeats())
    assert r.returncode == 0, r.stderr
    r = cli("topics", "cli-made", "--json", *flags)
    assert r.returncode == 0 and '"name": "cli-made"' in r.stdout, r.stderr


def test_the_simulator_runs_over_https_with_its_tls_settings_from_the_environment(tls_cluster):
    c = tls_cluster
    cert, key = c.tls.client("admin-sim")  # an admin may act for every simulated broker
    env = {**os.environ, "METAQUORUM_CACERT": str(c.tls.ca_file),
           "METAQUORUM_CERT": str(cert), "METAQUORUM_KEY": str(key)}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "sim", "--url", ",".join(c.url(i) for i in range(3)),
         "--brokers", "3", "--topics", "1", "--partitions", "3", "--first-broker-id", "100",
         "--duration", "3s", "--json"],
        capture_output=True, timeout=200, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    result = orjson.loads(run.stdout)
    assert result["ok"] and result["final"]["brokers_active"] >= 3, result


def test_a_broker_process_runs_over_https_with_its_own_certificate(tls_cluster):
    c = tls_cluster
    cert, key = c.tls.client("broker-55")
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaquorum.cli", "broker", "--url", c.url(0), "--broker-id", "55",
         "--heartbeat-interval", "0.5s", "--cacert", str(c.tls.ca_file), "--cert", str(cert),
         "--key", str(key)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:

        def unfenced():
            r = c.get(0, "/v1/brokers/55")
            return r.status_code == 200 and not r.json()["fenced"]

        c.wait(unfenced, 30, "broker 55 unfenced")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "stopped cleanly" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
