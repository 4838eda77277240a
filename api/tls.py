"""The HTTP API's TLS: building the server's ``ssl.SSLContext`` from its
files, reloading it when they change, and what a connection's TLS layer says
about its peer.

Rules:

* **A bad file is refused at start, naming the flag**: missing, unreadable,
  not PEM, an encrypted key, a key that does not match the certificate, a
  certificate that has expired or is not yet valid, a client CA file without
  a certificate in it (``TlsConfigError``; ``serve`` exits 2).
* **TLS 1.2 and 1.3 only**; on TLS 1.2 only forward-secret AEAD suites.
* **A client certificate, when sent, must verify** against the client CA or
  the handshake fails. ``--tls-client-auth required`` is enforced one layer
  up, by the HTTP edge (api/edge.py): a connection without a certificate gets
  a 401 that says one is required, where a TLS refusal would reach the
  client as a bare disconnect (asyncio drops the TLS alert). nginx's
  ``ssl_verify_client on`` does the same.
* **Rotation never interrupts service** (``ReloadingContext``): the files are
  re-read every few seconds (Kubernetes updates a mounted Secret by swapping
  a symlink, so contents are compared, not mtimes). A changed set is built
  into a *new* context, checked as at start, and only then used; a set that
  fails (a half-updated pair, an expired certificate) is logged and the
  previous context keeps serving. The listening socket keeps one context for
  life (uvicorn and the event loop hold it); its ``sni_callback``, which
  OpenSSL runs on every handshake, with or without SNI, hands each new
  handshake the newest context (Python's documented ``SSLObject.context``
  switch). So a new certificate, key or client CA (one removed included)
  applies from the next handshake; connections already open keep theirs.
* **The peer's certificate is read once per connection**
  (``tls_extension``), after the handshake, and travels in the ASGI scope as
  ``scope["extensions"]["tls"]`` (the ASGI TLS extension; uvicorn does not
  fill it), with the parsed certificate under ``PEER_CERT`` for the
  principal mapping (api/cert_principals.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import ssl
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

log = logging.getLogger(__name__)

CLIENT_AUTH_MODES = ("none", "optional", "required")
# TLS 1.2's forward-secret AEAD suites; TLS 1.3's are all AEAD and OpenSSL's own.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
DEFAULT_RELOAD_INTERVAL_S = 5.0
FIELDS = ("CN", "URI", "DNS")  # the certificate names a principal rule can match
PEER_CERT = "metaquorum.peer_cert"  # getpeercert()'s dict, {} if the client sent none
_TLS_VERSIONS = {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


class TlsConfigError(ValueError):
    """A TLS file or flag that cannot be used; the message names the flag."""


@dataclass(frozen=True)
class TlsSettings:
    """``serve``'s TLS flags."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_auth: str = "none"  # none | optional | required
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S

    def __post_init__(self) -> None:
        if self.client_auth not in CLIENT_AUTH_MODES:
            raise TlsConfigError(
                f"--tls-client-auth {self.client_auth!r}: expected one of "
                f"{', '.join(CLIENT_AUTH_MODES)}"
            )
        if self.client_auth != "none" and not self.client_ca_file:
            raise TlsConfigError(
                f"--tls-client-auth {self.client_auth} needs --tls-client-ca-file "
                "(the CA that signs client certificates)"
            )
        if self.reload_interval_s <= 0:
            raise TlsConfigError("--tls-reload-interval-ms must be positive")


def settings_from_flags(
    cert_file: str | None,
    key_file: str | None,
    client_ca_file: str | None,
    client_auth: str | None,
    reload_interval_ms: float | None = None,
) -> TlsSettings | None:
    """None when TLS is off; TlsConfigError for an incomplete set. A client
    CA without ``client_auth`` means ``optional``: kubelet probes and
    token-only clients still connect, and a certificate, when sent, is checked."""
    if not cert_file and not key_file:
        if client_ca_file or client_auth not in (None, "none"):
            raise TlsConfigError(
                "--tls-client-ca-file and --tls-client-auth need --tls-cert-file and "
                "--tls-key-file (the server's own certificate)"
            )
        return None
    if not cert_file:
        raise TlsConfigError("--tls-key-file needs --tls-cert-file")
    if not key_file:
        raise TlsConfigError("--tls-cert-file needs --tls-key-file")
    mode = client_auth or ("optional" if client_ca_file else "none")
    if mode == "none" and client_ca_file:
        raise TlsConfigError(
            "--tls-client-ca-file with --tls-client-auth none: client certificates would "
            "never be asked for; use optional or required, or drop the CA file"
        )
    interval = (
        DEFAULT_RELOAD_INTERVAL_S if reload_interval_ms is None else reload_interval_ms / 1000
    )
    return TlsSettings(cert_file, key_file, client_ca_file or None, mode, interval)


# ---------------------------------------------------------------- checking files


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise TlsConfigError(f"{flag} {path}: no such file") from None
    except OSError as e:
        raise TlsConfigError(f"{flag} {path}: cannot read it ({e.strerror})") from None


def _certificates(data: bytes, path: str, flag: str) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise TlsConfigError(f"{flag} {path}: no PEM certificate in it")
    return certs


def _subject(cert: x509.Certificate) -> str:
    return cert.subject.rfc4514_string() or "(empty subject)"


def _check_validity(cert: x509.Certificate, path: str, flag: str, now: dt.datetime) -> None:
    if cert.not_valid_after_utc <= now:
        raise TlsConfigError(
            f"{flag} {path}: the certificate {_subject(cert)} expired on "
            f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC; issue a new one"
        )
    if cert.not_valid_before_utc > now:
        raise TlsConfigError(
            f"{flag} {path}: the certificate {_subject(cert)} is not valid before "
            f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC (check this machine's clock)"
        )


def _check_key(data: bytes, path: str) -> None:
    try:
        serialization.load_pem_private_key(data, password=None)
    except TypeError:  # cryptography's word for "encrypted, and no password given"
        raise TlsConfigError(
            f"--tls-key-file {path}: the key is encrypted; metaquorum needs an unencrypted "
            "key file (keep it readable by the server's user only)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise TlsConfigError(f"--tls-key-file {path}: no PEM private key in it") from None


def _no_password() -> str:
    raise TlsConfigError("the key is encrypted: metaquorum needs an unencrypted key file")


@dataclass(frozen=True)
class Loaded:
    """A context built from one reading of the files, and what it holds."""

    context: ssl.SSLContext
    fingerprint: bytes  # of the files' contents: a change means a reload
    not_after: dt.datetime  # the server certificate's expiry
    subject: str


def _fingerprint(*contents: bytes | None) -> bytes:
    h = hashlib.sha256()
    for data in contents:
        h.update(b"-" if data is None else hashlib.sha256(data).digest())
    return h.digest()


def fingerprint(settings: TlsSettings) -> bytes:
    """A digest of the files' contents (TlsConfigError if one cannot be read)."""
    return _fingerprint(*_read_all(settings))


def _read_all(settings: TlsSettings) -> tuple[bytes, bytes, bytes | None]:
    ca = settings.client_ca_file
    return (
        _read(settings.cert_file, "--tls-cert-file"),
        _read(settings.key_file, "--tls-key-file"),
        _read(ca, "--tls-client-ca-file") if ca else None,
    )


def build_context(settings: TlsSettings, now: dt.datetime | None = None) -> Loaded:
    """A server context from the files, checked as the module docstring says."""
    now = now or dt.datetime.now(dt.UTC)
    cert_data, key_data, ca_data = _read_all(settings)
    leaf = _certificates(cert_data, settings.cert_file, "--tls-cert-file")[0]
    _check_validity(leaf, settings.cert_file, "--tls-cert-file", now)
    _check_key(key_data, settings.key_file)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        ctx.load_cert_chain(settings.cert_file, settings.key_file, password=_no_password)
    except TlsConfigError as e:
        raise TlsConfigError(f"--tls-key-file {settings.key_file}: {e}") from None
    except ssl.SSLError as e:
        raise TlsConfigError(_explain_key_problem(e, settings)) from None
    except OSError as e:  # the file went away between the reads
        raise TlsConfigError(f"--tls-key-file {settings.key_file}: {e.strerror}") from None
    if settings.client_ca_file and ca_data is not None:
        flag = "--tls-client-ca-file"
        cas = _certificates(ca_data, settings.client_ca_file, flag)
        valid = [c for c in cas if c.not_valid_before_utc <= now < c.not_valid_after_utc]
        if not valid:
            raise TlsConfigError(
                f"{flag} {settings.client_ca_file}: no certificate in it is valid now "
                f"({', '.join(_subject(c) for c in cas)}: expired or not yet valid)"
            )
        for c in cas:
            if c not in valid:
                log.warning(
                    "%s %s: the CA certificate %s is not valid now (it is ignored)",
                    flag,
                    settings.client_ca_file,
                    _subject(c),
                )
        try:
            ctx.load_verify_locations(cadata=ca_data.decode("ascii", "replace"))
        except ssl.SSLError as e:
            raise TlsConfigError(f"{flag} {settings.client_ca_file}: {e.reason or e}") from None
        # "required" is enforced by the HTTP edge, which can say why (401), as
        # nginx does: a TLS-level refusal reaches the client as a bare
        # disconnect (asyncio drops the alert). A certificate that is sent is
        # verified here either way: a bad one fails the handshake.
        ctx.verify_mode = ssl.CERT_OPTIONAL
    fp = _fingerprint(cert_data, key_data, ca_data)
    return Loaded(ctx, fp, leaf.not_valid_after_utc, _subject(leaf))


def _explain_key_problem(e: ssl.SSLError, settings: TlsSettings) -> str:
    reason = (e.reason or "").upper()
    if "KEY_VALUES_MISMATCH" in reason or "mismatch" in str(e).lower():
        return (
            f"--tls-key-file {settings.key_file} does not match the certificate in "
            f"--tls-cert-file {settings.cert_file} (a key from another pair?)"
        )
    if e.library == "PEM" or "PEM" in reason or "NO_START_LINE" in reason:
        return f"--tls-key-file {settings.key_file}: no PEM private key in it"
    return f"--tls-cert-file {settings.cert_file} / --tls-key-file {settings.key_file}: {e}"


# ---------------------------------------------------------------- rotation


class ReloadingContext:
    """The listening context, whose handshakes use the newest good files."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        first = build_context(settings)  # TlsConfigError at start: exit 2
        self.listening = first.context
        self.current = first
        self.reloads = 0
        self.failures = 0
        self.last_problem: str | None = None
        self.listening.sni_callback = self._on_hello

    def _on_hello(self, ssl_object: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        current = self.current.context
        if current is not context:
            ssl_object.context = current
        return None

    def reload(self, now: dt.datetime | None = None) -> bool:
        """Builds a new context if the files changed; True if one now serves."""
        try:
            if fingerprint(self.settings) == self.current.fingerprint:
                return False
            fresh = build_context(self.settings, now)
        except TlsConfigError as e:
            problem = str(e)
            if problem != self.last_problem:  # once per distinct problem, not every poll
                log.error("TLS files changed but cannot be used; still serving %s: %s",
                          self.current.subject, problem)  # fmt: skip
            self.last_problem = problem
            self.failures += 1
            return False
        if fresh.fingerprint == self.current.fingerprint:
            return False
        self.current = fresh
        self.reloads += 1
        self.last_problem = None
        log.info(
            "TLS files reloaded: serving %s (valid until %s) on new connections",
            fresh.subject,
            f"{fresh.not_after:%Y-%m-%d %H:%M} UTC",
        )
        return True

    async def watch(self) -> None:
        """Polls the files until cancelled (from the event loop, which also
        runs the handshakes: a swap never races one)."""
        while True:
            await asyncio.sleep(self.settings.reload_interval_s)
            self.reload()


# ---------------------------------------------------------------- the peer


def _rfc4514(subject: tuple) -> str | None:
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "domainComponent": "DC", "userId": "UID"}  # fmt: skip

    def escape(value: str) -> str:
        out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
        if out.startswith(("#", " ")):
            out = "\\" + out
        return out[:-1] + "\\ " if out.endswith(" ") else out

    rdns = [
        "+".join(f"{short.get(k, k)}={escape(str(v))}" for k, v in rdn) for rdn in reversed(subject)
    ]
    return ",".join(rdns) or None


def tls_extension(transport: Any) -> dict[str, Any] | None:
    """The ASGI TLS extension of a connection, or None for plain HTTP. Read
    once, when the connection is made (after the handshake)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    peer = ssl_object.getpeercert() or {}
    der = ssl_object.getpeercert(binary_form=True) if peer else None
    return {
        "server_cert": None,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
        "client_cert_name": _rfc4514(peer.get("subject", ())) if peer else None,
        "client_cert_error": None,
        "tls_version": _TLS_VERSIONS.get(ssl_object.version() or ""),
        "cipher_suite": None,  # Python exposes the suite's name only
        PEER_CERT: peer,
    }


def peer_certificate(scope: dict) -> dict | None:
    """The verified client certificate of the request's connection (as
    ``getpeercert()`` parses it), or None: plain HTTP, or no certificate sent."""
    tls = scope.get("extensions", {}).get("tls")
    if not tls:
        return None
    return tls.get(PEER_CERT) or None


def describe(settings: TlsSettings) -> str:
    client = (
        f"client certificates {settings.client_auth} (CA {settings.client_ca_file})"
        if settings.client_ca_file
        else "no client certificates"
    )
    return f"certificate {settings.cert_file}, {client}"


def certificate_names(peer: dict) -> dict[str, list[str]]:
    """The names a rule can match, from ``SSLSocket.getpeercert()``'s dict."""
    names: dict[str, list[str]] = {field: [] for field in FIELDS}
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names["CN"].append(value)
    for kind, value in peer.get("subjectAltName", ()):
        if kind in names:
            names[kind].append(value)
    return names


def describe_names(peer: dict) -> str:
    names = certificate_names(peer)
    shown = [f"{f}={v}" for f in FIELDS for v in names[f]]
    return ", ".join(shown[:4]) + (", ..." if len(shown) > 4 else "") or "no names"
