"""``metaquorum serve`` over TLS, as real processes: the server certificate
rotated in place while clients keep working (nothing restarts, no voter
leaves the quorum), and ``--tls-client-auth required``."""

import socket
import ssl
import threading
import time

import httpx
import pytest

from .cluster import Cluster
from .conftest import running
from .local_node import registration_body
from .tls_files import TlsFiles

pytestmark = pytest.mark.slow


def served_certificate(c: Cluster, i: int) -> bytes:
    """The DER certificate voter ``i`` presents on a new connection."""
    ctx = c.tls.context()
    with socket.create_connection(("127.0.0.1", c.http[i]), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


class Load(threading.Thread):
    """Calls ``step`` until stopped, counting calls and keeping every error."""

    def __init__(self, name: str, step) -> None:
        super().__init__(name=name, daemon=True)
        self.step = step
        self.calls = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.step()
                self.calls += 1
            except Exception as e:  # noqa: BLE001 - kept, and asserted empty
                self.errors.append(f"{self.name}: {e!r}")
            time.sleep(0.005)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)


def test_rotating_the_server_certificate_while_clients_keep_working(tmp_path):
    """Kubernetes updates a mounted Secret in place: here all three voters'
    files are rewritten at once. A broker heartbeating over one keep-alive
    connection and a reader opening a new connection per request see no
    error; new handshakes get the new certificate; the leader, its term and
    every voter's connection stay as they were."""
    tls = TlsFiles(tmp_path / "tls")
    with running(Cluster(tmp_path, voters=3, tls=tls)) as c:
        leader = c.leader()
        before = c.status(leader)
        old = served_certificate(c, 0)
        assert old == ssl.PEM_cert_to_DER_cert(tls.server.cert_pem.decode())
        broker = httpx.Client(verify=tls.context("broker-1"), timeout=10)
        r = broker.post(c.url(leader) + "/v1/brokers/register",
                        json=registration_body(c.cluster_id, 1))  # fmt: skip
        epoch = r.json()["brokerEpoch"]
        beat = {"brokerId": 1, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40}

        def heartbeat() -> None:
            r = broker.post(c.url(leader) + "/v1/brokers/heartbeat", json=beat)
            assert r.status_code == 200 and r.json()["errorCode"] == 0, r.text

        reader_ctx = tls.context("read-rotation")
        turn = iter(range(1 << 30))

        def read_on_a_new_connection() -> None:
            i = next(turn) % c.n
            with httpx.Client(verify=reader_ctx, timeout=10) as fresh:
                r = fresh.get(c.url(i) + "/v1/brokers")
            assert r.status_code == 200, r.text

        loads = [Load("keep-alive heartbeats", heartbeat),
                 Load("a new connection per read", read_on_a_new_connection)]  # fmt: skip
        try:
            for load in loads:
                load.start()
            c.wait(lambda: all(load.calls > 5 for load in loads), 30, "load running")
            rotated = tls.rotate_server()
            new = ssl.PEM_cert_to_DER_cert(rotated.cert_pem.decode())
            c.wait(
                lambda: all(served_certificate(c, i) == new for i in range(c.n)),
                30,
                "every voter serving the new certificate",
            )
            counts = [load.calls for load in loads]
            c.wait(
                lambda: all(load.calls > n + 20 for load, n in zip(loads, counts, strict=True)),
                30,
                "load going on after the rotation",
            )
        finally:
            for load in loads:
                load.stop()
            broker.close()
        assert [e for load in loads for e in load.errors] == []
        after = c.status(leader)
        assert (after["leaderId"], after["raftTerm"]) == (before["leaderId"], before["raftTerm"])
        assert all(v["connected"] for v in after["voters"] if v["nodeId"] != leader), after
        metrics = c.get(0, "/metrics").text
        assert "metaquorum_tls_reloads_total 1.0" in metrics
        assert "metaquorum_tls_reload_failures_total 0.0" in metrics


def test_required_client_certificates_are_asked_of_every_request(tmp_path):
    """``--tls-client-auth required``: a connection without a certificate
    gets a 401 that says so, the probes included (kubelet's probes send
    none: docs/security.md), and one with a certificate is served."""
    tls = TlsFiles(tmp_path / "tls")
    c = Cluster(tmp_path, voters=1, tls=tls, extra=["--tls-client-auth", "required"])
    try:
        c.start()
        c.wait_ready()  # the cluster's own client presents admin-tests's certificate
        with httpx.Client(verify=tls.context(), timeout=10) as anonymous:
            for path in ("/readyz", "/v1/brokers"):
                r = anonymous.get(c.url(0) + path)
                assert r.status_code == 401, r.text
                assert r.json()["errorMessage"] == (
                    "this server requires a TLS client certificate on every connection "
                    "(--tls-client-auth required): connect with --cert and --key"
                )
        with httpx.Client(verify=tls.context("read-x"), timeout=10) as reader:
            assert reader.get(c.url(0) + "/v1/brokers").status_code == 200
    finally:
        c.close()
