"""Real certificates for tests, made with ``cryptography``: a CA, a server
certificate for 127.0.0.1, and client certificates on demand."""

from __future__ import annotations

import ssl
from pathlib import Path

from brokers.tls import ClientTls, load_client_tls
from metaquorum.dev_certs import Issued, ThrowawayCA, write_file


class TlsFiles:
    """``root``/ca.crt, server.crt and server.key (127.0.0.1, ``localhost``
    only if asked), and ``client(name)`` for client certificates."""

    def __init__(self, root: Path, ca: ThrowawayCA | None = None, dns=()) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.ca = ca or ThrowawayCA("metaquorum test CA")
        self.ca_file = self.root / "ca.crt"
        write_file(self.ca_file, self.ca.cert_pem, 0o644)
        self.cert_file = self.root / "server.crt"
        self.key_file = self.root / "server.key"
        self.server = self.ca.issue("metaquorum test server", ips=["127.0.0.1"], dns=dns)
        self.server.write(self.cert_file, self.key_file)

    def client(self, name: str, ca: ThrowawayCA | None = None, **kw) -> tuple[Path, Path]:
        """A client certificate with CN ``name`` (signed by ``ca``, default the
        test CA); returns (cert, key) paths."""
        issued: Issued = (ca or self.ca).issue(name, server=False, **kw)
        cert, key = self.root / f"{name}.crt", self.root / f"{name}.key"
        issued.write(cert, key)
        return cert, key

    def client_tls(self, name: str | None = None, **kw) -> ClientTls:
        """What a client with certificate ``name`` (none if None) uses."""
        cert, key = self.client(name, **kw) if name else (None, None)
        tls = load_client_tls(str(self.ca_file), cert and str(cert), key and str(key))
        assert tls is not None
        return tls

    def context(self, name: str | None = None, **kw) -> ssl.SSLContext:
        return self.client_tls(name, **kw).context

    def serve_flags(self, client_auth: str | None = "optional") -> list[str]:
        flags = ["--tls-cert-file", str(self.cert_file), "--tls-key-file", str(self.key_file)]
        if client_auth is not None:
            flags += ["--tls-client-ca-file", str(self.ca_file), "--tls-client-auth", client_auth]
        return flags

    def rotate_server(self, **kw) -> Issued:
        """A new server certificate and key from the same CA, written in
        place the way Kubernetes updates a Secret: both files at once."""
        issued = self.ca.issue("metaquorum test server (rotated)", ips=["127.0.0.1"], **kw)
        issued.write(self.cert_file, self.key_file)
        return issued
