"""k8s/ over HTTPS: the rendered TLS Secret, how it is mounted and used, the
probes' scheme, and the cert-manager overlay. The certificate make-secrets.py
writes is checked by real handshakes against every name a client uses."""

import asyncio
import base64
import ssl
import tempfile
from pathlib import Path

import kubernetes_validate
import pytest

from .k8s_render import KUBERNETES_VERSION, OVERLAYS, one, prepared_copy, render

NAMESPACES = {"base": "default", "dev": "metaquorum-dev", "prod": "metaquorum"}
VOTERS = {"base": 3, "dev": 1, "prod": 5}


@pytest.fixture(scope="module")
def k8s_copy(tmp_path_factory):
    return prepared_copy(tmp_path_factory.mktemp("k8s-tls"))


@pytest.fixture(scope="module", params=["base", *OVERLAYS])
def rendered(request, k8s_copy):
    return request.param, render(k8s_copy, request.param)


def _pod_spec(objects):
    return one(objects, "StatefulSet")["spec"]["template"]["spec"]


def _env(objects) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in _pod_spec(objects)["containers"][0]["env"]}


def _secret_files(objects, name: str) -> dict[str, bytes]:
    secret = one(objects, "Secret", name)
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def _handshake(files: dict[str, bytes], host: str) -> None:
    """A TLS handshake with the Secret's certificate, verified as a client
    that trusts its ca.crt and asks for ``host`` (SSLCertVerificationError if
    the certificate does not name it)."""
    with tempfile.TemporaryDirectory() as d:
        for key in ("tls.crt", "tls.key"):
            (Path(d) / key).write_bytes(files[key])
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(Path(d) / "tls.crt", Path(d) / "tls.key")
    client = ssl.create_default_context(cadata=files["ca.crt"].decode())

    async def run() -> None:
        async def greet(reader, writer):
            writer.write(b"ok")
            await writer.drain()
            writer.close()

        listener = await asyncio.start_server(greet, "127.0.0.1", 0, ssl=server)
        port = listener.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname=host
            )
            assert await reader.read() == b"ok"
            writer.close()
        finally:
            listener.close()

    asyncio.run(run())


def test_the_api_serves_https_from_a_mounted_tls_secret(rendered):
    """Mounted as a directory (a subPath mount would never see an update),
    named without a hash suffix (updated in place, not rolled), and named in
    every flag that reads it."""
    _, objects = rendered
    secret = one(objects, "Secret", "metaquorum-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    spec = _pod_spec(objects)
    container = spec["containers"][0]
    volume = next(
        v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "metaquorum-tls"
    )
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    assert "subPath" not in mount and mount["readOnly"] is True
    env = _env(objects)
    assert env["METAQUORUM_TLS_CERT_FILE"] == f"{mount['mountPath']}/tls.crt"
    assert env["METAQUORUM_TLS_KEY_FILE"] == f"{mount['mountPath']}/tls.key"
    assert env["METAQUORUM_CACERT"] == f"{mount['mountPath']}/ca.crt"  # in-pod commands
    # Client certificates are off in the base: a CA shared with other uses would
    # make every certificate it signs a possible admin (docs/kubernetes.md).
    assert "METAQUORUM_TLS_CLIENT_CA_FILE" not in env


def test_every_url_is_https_and_the_probes_use_https(rendered):
    _, objects = rendered
    env = _env(objects)
    assert env["METAQUORUM_ADVERTISED_URL"].startswith("https://")
    assert env["METAQUORUM_URL"] == "https://127.0.0.1:8080"
    container = _pod_spec(objects)["containers"][0]
    hook = container["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[hook.index("--url") + 1] == "https://127.0.0.1:8080"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    annotations = one(objects, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scheme"] == "https"


def test_the_certificate_names_every_pod_the_client_service_and_loopback(rendered):
    """Real handshakes, hostname verification included, for every name a
    client uses in the overlay's namespace: each pod's advertised name (the
    307s name it), the client Service's, and 127.0.0.1 (preStop)."""
    name, objects = rendered
    files = _secret_files(objects, "metaquorum-tls")
    ns = NAMESPACES[name]
    hosts = [f"metaquorum-{i}.metaquorum-headless.{ns}.svc" for i in range(VOTERS[name])]
    hosts += [f"metaquorum-0.metaquorum-headless.{ns}.svc.cluster.local"]
    hosts += [f"metaquorum.{ns}.svc", f"metaquorum.{ns}", "metaquorum", "127.0.0.1"]
    for host in hosts:
        _handshake(files, host)
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(files, "metaquorum-0.metaquorum-headless.elsewhere.svc")


# ------------------------------------------------------------------ cert-manager


@pytest.fixture(scope="module")
def cert_manager(k8s_copy):
    return render(k8s_copy, "cert-manager")


def test_the_cert_manager_overlay_replaces_the_generated_secret(cert_manager):
    objects = cert_manager
    assert not [
        o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == "metaquorum-tls"
    ]
    core = [o for o in objects if not o["apiVersion"].startswith("cert-manager.io/")]
    for obj in core:  # the rest is prod's, and still valid
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert one(objects, "StatefulSet")["spec"]["replicas"] == 5
    assert one(objects, "StatefulSet")["metadata"]["namespace"] == "metaquorum"
    cert = one(objects, "Certificate", "metaquorum-tls")
    volumes = _pod_spec(objects)["volumes"]
    assert any(v.get("secret", {}).get("secretName") == cert["spec"]["secretName"] for v in volumes)


def test_the_cert_manager_chain_resolves_and_names_every_pod(cert_manager):
    objects = cert_manager
    cert = one(objects, "Certificate", "metaquorum-tls")["spec"]
    issuer = one(objects, "Issuer", cert["issuerRef"]["name"])
    ca_cert = one(objects, "Certificate", "metaquorum-ca")["spec"]
    assert issuer["spec"]["ca"]["secretName"] == ca_cert["secretName"] and ca_cert["isCA"]
    assert "selfSigned" in one(objects, "Issuer", ca_cert["issuerRef"]["name"])["spec"]
    assert {
        o["metadata"]["namespace"] for o in objects if o["kind"] in ("Certificate", "Issuer")
    } == {"metaquorum"}
    names = cert["dnsNames"]
    sts = one(objects, "StatefulSet")
    headless = sts["spec"]["serviceName"]
    ns = sts["metadata"]["namespace"]
    for i in range(sts["spec"]["replicas"]):
        pod = f"metaquorum-{i}.{headless}.{ns}.svc"
        assert any(n == pod or (n.startswith("*.") and pod.endswith(n[1:])) for n in names), pod
    assert f"metaquorum.{ns}.svc" in names and cert["ipAddresses"] == ["127.0.0.1"]
    assert "server auth" in cert["usages"] and cert["privateKey"]["rotationPolicy"] == "Always"
    # Renewed well before it expires (cert-manager's durations are Go durations).
    hours = {k: int(cert[k].removesuffix("h")) for k in ("duration", "renewBefore")}
    assert hours["renewBefore"] * 3 >= hours["duration"] > hours["renewBefore"]
