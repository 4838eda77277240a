"""The client's TLS: its ``ssl.SSLContext`` from ``--cacert``/``--cert``/``--key``
and one clear line for each way a TLS connection fails.

The server's certificate is always verified, host name included (Python's
default context): ``--cacert`` names the CA that signs the voters'
certificates; without it the system's CAs are used. ``--cert``/``--key`` is
this client's certificate, for servers that map certificates to principals.

Why a probe: with TLS 1.3 the server judges the client's certificate after
the client has finished its handshake, and an asyncio server (uvicorn's)
then drops the connection without sending its alert. So a refused
certificate (another CA's, an expired one) reaches httpx as a bare "server
disconnected" on the first read, the same as a server that crashed
mid-request. ``tls_problem`` then opens one connection of its own and sends
``GET /livez``: a server that lets this client in answers it (any status),
one that refused its certificate closes at once. A probe runs only after
such a failure by a client with a certificate (or, for a read from an
``http`` URL, to find a server that speaks only HTTPS), at most once per URL
per ``PROBE_EVERY_S``. A missing certificate
where one is required is not a TLS failure: metaquorum answers it 401,
saying so (as nginx does), since only an answer can say why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

PROBE_EVERY_S = 10.0
PROBE_TIMEOUT_S = 1.0

# OpenSSL's X509_V_ERR_* codes for a server certificate this client refused.
_UNKNOWN_CA = {2, 18, 19, 20, 21}
_EXPIRED, _NOT_YET_VALID = 10, 9
_NAME_MISMATCH = {62, 64}
# Alerts the server sends about this client's certificate, and other reasons.
_REASONS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server requires a client certificate: "
    "pass --cert and --key (METAQUORUM_CERT, METAQUORUM_KEY)",
    "TLSV1_ALERT_UNKNOWN_CA": "the server does not trust this client's certificate "
    "(it is not signed by the server's client CA)",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "the server refused this client's certificate: "
    "it has expired",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the server refused this client's certificate "
    "(expired, not yet valid, or not for client authentication)",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE": "the server refused this client's certificate: "
    "it is not for client authentication",
    "TLSV1_ALERT_PROTOCOL_VERSION": "no TLS version in common (the server takes TLS 1.2 and 1.3)",
    "WRONG_VERSION_NUMBER": "it does not speak TLS on this port: use an http:// URL, or "
    "the HTTPS port",
    "RECORD_LAYER_FAILURE": "it does not speak TLS on this port: use an http:// URL, or "
    "the HTTPS port",
    "PACKET_LENGTH_TOO_LONG": "it does not speak TLS on this port: use an http:// URL, or "
    "the HTTPS port",
    "UNEXPECTED_EOF_WHILE_READING": "it closed the connection during the TLS handshake "
    "(not a TLS port, or it refused this client)",
}


class ClientTlsError(ValueError):
    """A client TLS file or flag that cannot be used; the message names the flag."""


@dataclass(frozen=True)
class ClientTls:
    context: ssl.SSLContext
    has_cert: bool  # a client certificate is loaded: the probe can blame it


def load_client_tls(
    cacert: str | None = None, cert: str | None = None, key: str | None = None
) -> ClientTls | None:
    """``client_context`` with what the probe needs to know."""
    ctx = client_context(cacert, cert, key)
    return None if ctx is None else ClientTls(ctx, bool(cert))


def client_context(
    cacert: str | None = None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext | None:
    """The context for these files, or None if none is given (then httpx's
    own verification, against its CA bundle, applies to https URLs)."""
    if not (cacert or cert or key):
        return None
    if key and not cert:
        raise ClientTlsError("--key needs --cert (the certificate of that key)")
    if cert and not key:
        raise ClientTlsError("--cert needs --key (its private key)")
    for flag, path in (("--cacert", cacert), ("--cert", cert), ("--key", key)):
        if path and not os.path.isfile(path):
            raise ClientTlsError(f"{flag} {path}: no such file")
    try:
        ctx = ssl.create_default_context(cafile=cacert)
    except ssl.SSLError as e:
        raise ClientTlsError(f"--cacert {cacert}: no PEM CA certificate in it ({e})") from None
    except OSError as e:
        raise ClientTlsError(f"--cacert {cacert}: {e.strerror}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        try:
            ctx.load_cert_chain(cert, key, password=_no_password)
        except ClientTlsError:
            raise
        except ssl.SSLError as e:
            if "KEY_VALUES_MISMATCH" in (e.reason or ""):
                raise ClientTlsError(f"--key {key} does not match --cert {cert}") from None
            raise ClientTlsError(f"--cert {cert} / --key {key}: not a PEM pair ({e})") from None
        except OSError as e:
            raise ClientTlsError(f"--cert {cert} / --key {key}: {e.strerror}") from None
    return ctx


def _no_password() -> str:
    raise ClientTlsError("--key: the key is encrypted; give an unencrypted key file")


def tls_error(exc: BaseException | None) -> ssl.SSLError | None:
    """The TLS error in ``exc``'s chain (httpx wraps it), if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ssl.SSLError):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def explain(error: BaseException, url: str) -> str | None:
    """One line for a TLS failure in ``error``'s chain, or None if it was not one."""
    e = tls_error(error)
    if e is None:
        return None
    host = urlsplit(url).hostname or url
    if isinstance(e, ssl.SSLCertVerificationError):
        code = e.verify_code
        if code in _UNKNOWN_CA:
            why = (
                "unknown CA: its certificate is not signed by a CA in --cacert (METAQUORUM_CACERT)"
            )
        elif code == _EXPIRED:
            why = "its certificate has expired"
        elif code == _NOT_YET_VALID:
            why = "its certificate is not valid yet (check the clocks)"
        elif code in _NAME_MISMATCH:
            why = f"name mismatch: its certificate does not name {host}"
        else:
            why = f"its certificate was refused ({e.verify_message})"
        return f"TLS: cannot trust the server at {url}: {why}"
    reason = (e.reason or "").upper()
    for key, why in _REASONS.items():
        if key in reason:
            return f"TLS: {url}: {why}"
    return f"TLS: {url}: {e.reason or e}"


class Prober:
    """Runs ``tls_problem`` probes, at most one per URL per PROBE_EVERY_S."""

    def __init__(self, context: ssl.SSLContext | None, has_cert: bool = False) -> None:
        self.context = context
        self.has_cert = has_cert
        self._last: dict[str, tuple[float, str | None]] = {}

    async def problem(self, url: str, write: bool) -> str | None:
        """Only where a probe can find something: an https URL with a client
        certificate (refused?), or a read from an http URL (a TLS port?); a
        write's unknown outcome is not delayed for a plain-HTTP guess."""
        if not (self.has_cert if url.startswith("https:") else not write):
            return None
        now = time.monotonic()
        last = self._last.get(url)
        if last is not None and now - last[0] < PROBE_EVERY_S:
            return last[1]
        found = await tls_problem(url, self.context, self.has_cert)
        self._last[url] = (now, found)
        return found


async def tls_problem(
    url: str, context: ssl.SSLContext | None, has_cert: bool = False
) -> str | None:
    """Why TLS to ``url`` fails, found by a connection of its own; None if
    nothing about TLS is wrong (or the server cannot be reached at all).
    ``has_cert``: the context holds a client certificate."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    if https:
        ctx = context or ssl.create_default_context()
    else:  # does a plain-HTTP URL point at a port that speaks only TLS?
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=ctx, server_hostname=host), PROBE_TIMEOUT_S
        )
        if not https:
            return f"TLS: {url} speaks HTTPS: use https://{parts.netloc} (and --cacert)"
        try:
            writer.write(
                f"GET /livez HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            )
            answered = bool(await asyncio.wait_for(reader.read(1), PROBE_TIMEOUT_S))
        except (ConnectionError, ssl.SSLError):
            answered = False  # reset or cut: the server dropped it, as at EOF
        if answered or not has_cert:
            return None  # answered: the TLS layer let this client in
        return (
            f"TLS: {url} closed the connection right after the handshake: it refused this "
            "client's certificate (--cert: not signed by the server's client CA, expired, "
            "or not for client authentication)"
        )
    except ssl.SSLError as e:
        return explain(e, url) if https else None
    except (OSError, TimeoutError, EOFError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
