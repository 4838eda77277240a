"""A throwaway certificate authority: ``metaquorum dev --tls`` makes one for
the local cluster, and the tests make theirs (wrong CAs, expired and
misnamed certificates included).

Keys are ECDSA P-256: generating one takes well under a millisecond, where an
RSA key takes tens. Nothing here is meant for production: the CA key is
written next to the certificates, unencrypted (docs/security.md says how to
issue real ones).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 30


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as PEM."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, cert_path: str | os.PathLike, key_path: str | os.PathLike) -> None:
        write_file(cert_path, self.cert_pem, 0o644)
        write_file(key_path, self.key_pem, 0o600)


def write_file(path: str | os.PathLike, data: bytes, mode: int = 0o600) -> None:
    """Written whole to a temporary name, then renamed: a reader (a voter
    reloading its certificate) never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


class ThrowawayCA:
    """A self-signed CA that issues server and client certificates."""

    def __init__(
        self,
        name: str = "metaquorum throwaway CA",
        days: int = DEFAULT_DAYS,
        not_before: dt.datetime | None = None,
    ) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = not_before or _now()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    def issue(
        self,
        common_name: str,
        *,
        dns: Iterable[str] = (),
        ips: Iterable[str] = (),
        uris: Iterable[str] = (),
        server: bool = True,
        client: bool = True,
        not_before: dt.datetime | None = None,
        not_after: dt.datetime | None = None,
        days: int = DEFAULT_DAYS,
    ) -> Issued:
        """A leaf certificate for ``common_name`` with these subject
        alternative names; ``server``/``client``: its extended key usages."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        sans += [x509.UniformResourceIdentifier(u) for u in uris]
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - dt.timedelta(minutes=5))
            .not_valid_after(not_after or now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))
