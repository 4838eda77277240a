#!/usr/bin/env python3
"""Writes the files the kustomize base turns into Secrets and the cluster id:
k8s/base/local/{raft-secret, delegation-token-secret, tokens, admin-token,
cluster.env} and the HTTPS
files {ca.crt, tls.crt, tls.key} (plus ca.key, which no Secret holds: it
issues more certificates). They are never committed (.gitignore). The
certificates need the ``cryptography`` package (the project's .venv has it);
the rest is standard library.

    python3 k8s/make-secrets.py            # once per cluster, before the first apply
    python3 k8s/make-secrets.py --dir DIR  # somewhere else (tests render a copy)
    python3 k8s/make-secrets.py --namespace team-a   # more namespaces the certificate names

The certificate is one for every voter: its names cover every pod of the
headless Service and the client Service in the given namespaces (and the
overlays' own), and 127.0.0.1 for commands run in a pod. For per-pod
certificates, or renewal, use cert-manager (overlays/cert-manager,
docs/kubernetes.md "TLS").

It refuses to overwrite: a running cluster's data dirs remember their cluster
id, and its voters share the Raft secret, so new values need a new cluster
(or, for the secret alone, a restart of every voter at once).
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import sys
from pathlib import Path

FILES = ("raft-secret", "delegation-token-secret", "tokens", "admin-token", "cluster.env")
TLS_FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")
NAMESPACES = ("metaquorum", "metaquorum-dev", "default")  # the overlays' and the base's
CERT_DAYS = 825  # the longest validity clients accept for a server certificate


def server_names(namespaces) -> list[str]:
    """Every name a voter is reached by: its pod name (the advertised URL,
    the Raft peers' address) and the client Service, short and long."""
    names = ["metaquorum", "localhost"]
    for ns in namespaces:
        for tail in (f"{ns}.svc", f"{ns}.svc.cluster.local"):
            names += [f"*.metaquorum-headless.{tail}", f"metaquorum.{tail}"]
        names.append(f"metaquorum.{ns}")
    return names


def tls_files(namespaces) -> dict[str, bytes]:
    """A private CA and the voters' certificate (ECDSA P-256), as PEM."""
    try:
        import datetime as dt
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise SystemExit(
            "make-secrets: the TLS certificate needs the 'cryptography' package: run this "
            "with the project's .venv/bin/python (or pip install cryptography)"
        ) from None

    def pem_key(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder().subject_name(name("metaquorum CA")).issuer_name(name("metaquorum CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    sans = [x509.DNSName(n) for n in server_names(namespaces)]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder().subject_name(name("metaquorum")).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "ca.key": pem_key(ca_key),
        "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
        "tls.key": pem_key(key),
    }


def kafka_uuid() -> str:
    """A Kafka-style cluster id: 16 random bytes as 22 characters of base64url,
    never starting with '-' (1 in 64 would, and could not be passed as
    ``--cluster-id <id>``; Kafka's Uuid.randomUuid draws again too)."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def write(directory: Path, force: bool = False, namespaces=NAMESPACES) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    existing = [name for name in FILES + TLS_FILES if (directory / name).exists()]
    if existing and not force:
        raise FileExistsError(
            f"{directory} already has {', '.join(existing)}: a cluster may be using them "
            "(its data dirs remember the cluster id). Use --force only for a new cluster."
        )
    admin, operator, reader, broker = (secrets.token_urlsafe(32) for _ in range(4))
    contents = {
        "raft-secret": secrets.token_urlsafe(48) + "\n",
        # The delegation tokens' secret key (serve --delegation-token-secret-file):
        # the same on every voter, as the Raft secret, so it rides in its Secret.
        "delegation-token-secret": secrets.token_urlsafe(48) + "\n",
        "tokens": (
            '# token role [brokerId]  (api/auth.py, docs/api.md "Auth")\n'
            f"{admin} admin    # the pods' own preStop hook and in-pod commands\n"
            f"{operator} admin    # operators\n"
            f"{reader} read     # dashboards, read-only tools\n"
            f"{broker} broker   # brokers (add one line per broker, bound: TOKEN broker ID)\n"
        ),
        "admin-token": admin + "\n",
        "cluster.env": f"METAQUORUM_CLUSTER_ID={kafka_uuid()}\n",
    }
    files = {name: text.encode("utf-8") for name, text in contents.items()}
    files.update(tls_files(dict.fromkeys([*NAMESPACES, *namespaces])))
    for name, data in files.items():
        path = directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return {"operator-token": operator, "read-token": reader, "broker-token": broker}


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=here / "base" / "local")
    parser.add_argument("--force", action="store_true", help="overwrite (a new cluster only)")
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="a namespace the voters' certificate must name (repeatable; the overlays' "
        f"{', '.join(NAMESPACES)} always are)",
    )
    args = parser.parse_args(argv)
    try:
        write(args.dir, args.force, args.namespace)
    except FileExistsError as e:
        print(f"make-secrets: {e}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(FILES + TLS_FILES)} to {args.dir} (mode 0600; never commit them)")
    print("ca.crt is what clients trust (--cacert); keep ca.key offline to issue more")
    print("tokens for people are in its 'tokens' file: keep a copy in your password manager")
    return 0


if __name__ == "__main__":
    sys.exit(main())
