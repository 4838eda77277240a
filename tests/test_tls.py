"""api/tls.py: the server context from its files (every bad file refused at
start, naming the flag), its rotation under a live listening socket, and
what a connection's TLS layer tells the app. Real certificates, real
handshakes over loopback (uvloop, as ``serve`` runs), nothing mocked."""

import argparse
import asyncio
import datetime as dt
import os
import ssl
import subprocess
import sys

import pytest
import uvloop
from cryptography.hazmat.primitives import serialization

from api.tls import (
    PEER_CERT,
    ReloadingContext,
    TlsConfigError,
    TlsSettings,
    build_context,
    settings_from_flags,
    tls_extension,
)
from metaquorum.dev_certs import ThrowawayCA, write_file
from metaquorum.serve import add_serve_flags, build_config
from voter.http_server import build_tls

from .tls_files import TlsFiles

NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def files(tmp_path):
    return TlsFiles(tmp_path / "tls")


def _settings(files: TlsFiles, **kw) -> TlsSettings:
    return TlsSettings(str(files.cert_file), str(files.key_file), **kw)


# ---------------------------------------------------------------- refused at start


def test_a_good_pair_builds_a_tls12_plus_context(files):
    loaded = build_context(
        _settings(files, client_ca_file=str(files.ca_file), client_auth="optional")
    )
    ctx = loaded.context
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert loaded.subject == "CN=metaquorum test server"
    assert all(c["protocol"] in ("TLSv1.2", "TLSv1.3") for c in ctx.get_ciphers())
    # TLS 1.2's suites are forward-secret AEAD ones only.
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(n.startswith("ECDHE-") and ("GCM" in n or "CHACHA" in n) for n in tls12)


def _expired(files: TlsFiles, tmp_path):
    files.ca.issue("old", not_before=NOW - dt.timedelta(days=9),
                   not_after=NOW - dt.timedelta(days=1)).write(tmp_path / "old.crt", tmp_path / "old.key")  # fmt: skip
    return str(tmp_path / "old.crt"), str(tmp_path / "old.key")


def _future(files: TlsFiles, tmp_path):
    files.ca.issue("early", not_before=NOW + dt.timedelta(days=2)).write(
        tmp_path / "early.crt", tmp_path / "early.key"
    )
    return str(tmp_path / "early.crt"), str(tmp_path / "early.key")


def _mismatched(files: TlsFiles, tmp_path):
    files.ca.issue("other").write(tmp_path / "other.crt", tmp_path / "other.key")
    return str(files.cert_file), str(tmp_path / "other.key")


def _encrypted(files: TlsFiles, tmp_path):
    key = serialization.load_pem_private_key(files.server.key_pem, None)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    write_file(tmp_path / "enc.key", pem)
    return str(files.cert_file), str(tmp_path / "enc.key")


def _junk(name: str):
    def make(files: TlsFiles, tmp_path):
        (tmp_path / "junk").write_text("not PEM at all\n")
        junk = str(tmp_path / "junk")
        return (junk, str(files.key_file)) if name == "cert" else (str(files.cert_file), junk)

    return make


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda f, t: (str(t / "nope.crt"), str(f.key_file)), "--tls-cert-file {t}/nope.crt: no such file"),
        (lambda f, t: (str(f.cert_file), str(t / "nope.key")), "--tls-key-file {t}/nope.key: no such file"),
        (lambda f, t: (str(t), str(f.key_file)), "--tls-cert-file {t}: cannot read it (Is a directory)"),
        (_junk("cert"), "--tls-cert-file {t}/junk: no PEM certificate in it"),
        (_junk("key"), "--tls-key-file {t}/junk: no PEM private key in it"),
        (_encrypted, "--tls-key-file {t}/enc.key: the key is encrypted"),
        (_mismatched, "--tls-key-file {t}/other.key does not match the certificate in --tls-cert-file"),
        (_expired, "--tls-cert-file {t}/old.crt: the certificate CN=old expired on"),
        (_future, "--tls-cert-file {t}/early.crt: the certificate CN=early is not valid before"),
    ],
)  # fmt: skip
def test_a_bad_server_file_is_refused_naming_the_flag(files, tmp_path, make, message):
    cert, key = make(files, tmp_path)
    with pytest.raises(TlsConfigError) as refused:
        build_context(TlsSettings(cert, key))
    assert message.format(t=tmp_path) in str(refused.value)


def test_a_bad_client_ca_file_is_refused_naming_the_flag(files, tmp_path):
    (tmp_path / "junk").write_text("nothing\n")
    with pytest.raises(TlsConfigError, match=r"--tls-client-ca-file .*/junk: no PEM certificate"):
        build_context(
            _settings(files, client_ca_file=str(tmp_path / "junk"), client_auth="optional")
        )
    old = ThrowawayCA("expired CA", days=1, not_before=NOW - dt.timedelta(days=5))
    write_file(tmp_path / "old-ca.crt", old.cert_pem)
    with pytest.raises(TlsConfigError, match="no certificate in it is valid now"):
        build_context(
            _settings(files, client_ca_file=str(tmp_path / "old-ca.crt"), client_auth="optional")
        )


@pytest.mark.parametrize(
    "flags,message",
    [
        ((None, "k", None, None), "--tls-key-file needs --tls-cert-file"),
        (("c", None, None, None), "--tls-cert-file needs --tls-key-file"),
        ((None, None, "ca", None), "need --tls-cert-file and --tls-key-file"),
        (("c", "k", None, "required"), "--tls-client-auth required needs --tls-client-ca-file"),
        (("c", "k", "ca", "none"), "--tls-client-ca-file with --tls-client-auth none"),
        (("c", "k", None, "sometimes"), "--tls-client-auth 'sometimes': expected one of"),
    ],
)
def test_incomplete_tls_flags_are_refused(flags, message):
    with pytest.raises(TlsConfigError, match=message):
        settings_from_flags(*flags)


def test_a_client_ca_makes_client_certificates_optional_by_default():
    assert settings_from_flags("c", "k", "ca", None).client_auth == "optional"
    assert settings_from_flags("c", "k", None, None).client_auth == "none"
    assert settings_from_flags(None, None, None, None) is None


def _serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_flags(parser)
    return parser.parse_args(
        ["--node-id", "0", "--voters", "0@127.0.0.1:1", "--data-dir", "/d", *extra]
    )


def test_serve_advertises_https_and_refuses_an_http_url_with_tls(files):
    tls = ["--tls-cert-file", str(files.cert_file), "--tls-key-file", str(files.key_file)]
    assert build_config(_serve_args(*tls)).advertised_url.startswith("https://")
    with pytest.raises(ValueError, match="--advertised-url http://h:1: this node serves HTTPS"):
        build_config(_serve_args(*tls, "--advertised-url", "http://h:1"))
    assert build_config(_serve_args()).advertised_url.startswith("http://")


def test_serve_maps_certificates_by_the_default_rules_or_a_file(files, tmp_path):
    tls = files.serve_flags("optional")
    context, principals = build_tls(_serve_args(*tls))
    assert (
        isinstance(context, ReloadingContext)
        and "CN=broker-{id} broker {id}" in principals.describe()
    )
    rules = tmp_path / "principals"
    rules.write_text("URI=spiffe://example.org/broker/{id} broker {id}\n")
    _, principals = build_tls(_serve_args(*tls, "--tls-principals-file", str(rules)))
    assert principals.describe() == f"{rules}: URI=spiffe://example.org/broker/{{id}} broker {{id}}"
    rules.write_text("CN=x superuser\n")
    with pytest.raises(
        TlsConfigError, match=r"--tls-principals-file: .* line 1: unknown role 'superuser'"
    ):
        build_tls(_serve_args(*tls, "--tls-principals-file", str(rules)))
    with pytest.raises(TlsConfigError, match="--tls-principals-file needs --tls-client-ca-file"):
        build_tls(_serve_args(*files.serve_flags(None), "--tls-principals-file", str(rules)))


def test_serve_exits_2_with_one_line_for_an_expired_certificate(files, tmp_path):
    cert, key = _expired(files, tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "serve", "--node-id", "0",
         "--voters", "0@127.0.0.1:1", "--data-dir", str(tmp_path / "d"),
         "--tls-cert-file", cert, "--tls-key-file", key],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"metaquorum serve: --tls-cert-file {cert}: the certificate CN=old expired on"
    ), r.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was written


# ---------------------------------------------------------------- real handshakes


class Listener:
    """An asyncio TLS server on loopback over ``context``: each connection
    answers with its ASGI TLS extension's view of the client, then stays
    open for more lines ("again\\n")."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.seen: list[dict | None] = []

    async def __aenter__(self):
        listener = self

        class Protocol(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport = transport
                listener.seen.append(tls_extension(transport))
                transport.write(b"hello\n")

            def data_received(self, data):
                self.transport.write(b"again\n")

        self.server = await asyncio.get_running_loop().create_server(
            Protocol, "127.0.0.1", 0, ssl=self.context
        )
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    async def connect(self, client: ssl.SSLContext):
        """(reader, writer, the server certificate's DER), after the greeting."""
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=client, server_hostname="127.0.0.1"
        )
        assert await asyncio.wait_for(reader.readline(), 5) == b"hello\n"
        return reader, writer, writer.get_extra_info("ssl_object").getpeercert(binary_form=True)

    async def refuses(self, client: ssl.SSLContext) -> bool:
        """Whether the server drops this client in its handshake (with TLS
        1.3 the client's side completes first: the greeting never comes)."""
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", self.port, ssl=client, server_hostname="127.0.0.1"
            )
        except (ssl.SSLError, ConnectionError):
            return True
        try:
            return await asyncio.wait_for(reader.readline(), 5) == b""
        except (ssl.SSLError, ConnectionError):
            return True
        finally:
            writer.close()


def _der(issued) -> bytes:
    return ssl.PEM_cert_to_DER_cert(issued.cert_pem.decode())


def test_the_peer_certificate_reaches_the_asgi_tls_extension(files):
    server = build_context(
        _settings(files, client_ca_file=str(files.ca_file), client_auth="optional")
    )

    async def run():
        async with Listener(server.context) as listener:
            for client in (
                files.context("broker-3", uris=["spiffe://x/broker/3"]),
                files.context(),
            ):
                _, writer, _ = await listener.connect(client)
                writer.close()
        return listener.seen

    with_cert, without = uvloop.run(run())
    assert with_cert["client_cert_name"] == "CN=broker-3"
    assert with_cert["tls_version"] in (0x0303, 0x0304)
    assert with_cert["client_cert_chain"][0].startswith("-----BEGIN CERTIFICATE-----")
    assert ("URI", "spiffe://x/broker/3") in with_cert[PEER_CERT]["subjectAltName"]
    assert without["client_cert_chain"] == [] and without[PEER_CERT] == {}


def test_a_tls12_only_client_is_served(files):
    server = build_context(_settings(files))
    client = files.context()
    client.maximum_version = ssl.TLSVersion.TLSv1_2

    async def run():
        async with Listener(server.context) as listener:
            _, writer, _ = await listener.connect(client)
            version = writer.get_extra_info("ssl_object").version()
            writer.close()
            return version

    assert uvloop.run(run()) == "TLSv1.2"


def test_rotation_serves_new_handshakes_with_the_new_files_and_keeps_open_connections(files):
    """The server certificate, then the client CA, replaced in place: each
    new handshake gets the newest files, connections already open go on, a
    half-updated pair is not used, and an old CA's clients are refused once
    that CA is gone (the listening socket keeps one context for life)."""
    reloading = ReloadingContext(
        _settings(
            files, client_ca_file=str(files.ca_file), client_auth="optional", reload_interval_s=0.05
        )
    )
    first = _der(files.server)
    broker = files.context("broker-1")

    async def run():
        async with Listener(reloading.listening) as listener:
            reader, writer, der = await listener.connect(broker)
            assert der == first
            assert not reloading.reload()  # nothing changed: nothing rebuilt

            rotated = files.rotate_server()
            assert reloading.reload() and reloading.reloads == 1
            _, fresh_writer, der = await listener.connect(broker)
            assert der == _der(rotated)
            fresh_writer.close()
            writer.write(b"still there?\n")  # the connection made before the rotation
            assert await asyncio.wait_for(reader.readline(), 5) == b"again\n"

            # A new certificate beside the old key: refused, the last good pair serves.
            files.ca.issue("half-written").write(files.cert_file, files.root / "unused.key")
            assert not reloading.reload() and reloading.failures == 1
            assert "does not match" in reloading.last_problem
            _, w, der = await listener.connect(broker)
            assert der == _der(rotated)
            w.close()

            # A new client CA only: the old CA's client certificates are refused.
            files.server.write(files.cert_file, files.key_file)
            new_ca = ThrowawayCA("next CA")
            write_file(files.ca_file, new_ca.cert_pem)
            assert not await listener.refuses(broker)
            assert reloading.reload()
            assert await listener.refuses(broker)  # the old CA's certificate
            trusting_both = files.context("broker-2", ca=new_ca)
            trusting_both.load_verify_locations(cadata=files.ca.cert_pem.decode())
            _, w, _ = await listener.connect(trusting_both)
            w.close()
            writer.close()
            return listener.seen

    seen = uvloop.run(run())
    assert seen[-1]["client_cert_name"] == "CN=broker-2"


def test_the_watcher_reloads_by_itself(files):
    reloading = ReloadingContext(_settings(files, reload_interval_s=0.02))

    async def run():
        watcher = asyncio.ensure_future(reloading.watch())
        try:
            files.rotate_server()
            deadline = asyncio.get_running_loop().time() + 10
            while reloading.reloads == 0:
                assert asyncio.get_running_loop().time() < deadline, "no reload within 10 s"
                await asyncio.sleep(0.01)
        finally:
            watcher.cancel()

    uvloop.run(run())
    assert reloading.current.subject == "CN=metaquorum test server (rotated)"


def test_an_expired_certificate_is_not_rotated_in(files):
    reloading = ReloadingContext(_settings(files))
    files.ca.issue("stale", not_before=NOW - dt.timedelta(days=3),
                   not_after=NOW - dt.timedelta(days=1)).write(files.cert_file, files.key_file)  # fmt: skip
    assert not reloading.reload()
    assert "expired on" in reloading.last_problem
    assert reloading.current.subject == "CN=metaquorum test server"


def _kubelet_update(directory, files: dict[str, bytes], generation: int) -> None:
    """What the kubelet's AtomicWriter does to a mounted Secret: the files
    are written into a new timestamped directory, ``..data`` is swapped to it
    with one rename, and each key is a symlink through ``..data``."""
    stamp = directory / f"..2026_01_01_00_00_0{generation}"
    stamp.mkdir()
    for name, data in files.items():
        (stamp / name).write_bytes(data)
    (directory / "..data_tmp").symlink_to(stamp.name)
    os.rename(directory / "..data_tmp", directory / "..data")
    for name in files:
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")


def test_a_kubernetes_secret_update_by_symlink_swap_is_reloaded(files, tmp_path):
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    _kubelet_update(mounted, {"tls.crt": files.server.cert_pem, "tls.key": files.server.key_pem}, 1)
    reloading = ReloadingContext(TlsSettings(str(mounted / "tls.crt"), str(mounted / "tls.key")))
    renewed = files.ca.issue("renewed by cert-manager", ips=["127.0.0.1"])
    _kubelet_update(mounted, {"tls.crt": renewed.cert_pem, "tls.key": renewed.key_pem}, 2)
    assert reloading.reload()
    assert reloading.current.subject == "CN=renewed by cert-manager"
