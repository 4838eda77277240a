"""Delegation tokens (KIP-48): what the image keeps of a token, and its HMAC.

A token is its id, its owner, the principal that requested it, the
principals that may renew it, and three wall-clock times (milliseconds since
the epoch, as Kafka's): when it was issued, the max time past which it can
never be renewed, and its expiry, which renewing moves. Kafka's
``DelegationTokenData`` and ``TokenInformation``.

The HMAC is the token's password: HmacSHA512 of the token id (UTF-8) under
the cluster's secret key (UTF-8), as Kafka's
``DelegationTokenControlManager.createHmac``. No record holds it: any node
with the secret derives it from the id, and a node without the secret
(delegation tokens disabled) cannot. Every voter must be given the same
secret (``serve --delegation-token-secret-file``), or a token made on one
leader is not found by HMAC on the next.

Principals are Kafka's ``KafkaPrincipal.toString``: ``type:name``, of which
a token's renewers may only be ``User`` (Kafka refuses the others with
INVALID_PRINCIPAL_TYPE).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NamedTuple

from .records import DelegationTokenRecord

USER_TYPE = "User"  # Kafka's KafkaPrincipal.USER_TYPE


class DelegationToken(NamedTuple):
    """One token of the image (Kafka's ``TokenInformation`` without its id,
    which is the image's key). Never its HMAC."""

    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int

    def expired(self, now_wall_ms: int) -> bool:
        """Kafka's test: past its max time or its expiry (strictly)."""
        return self.max_timestamp < now_wall_ms or self.expiration_timestamp < now_wall_ms

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``TokenInformation.ownerOrRenewer`` (and the controller's
        ``allowedToRenew``)."""
        return principal == self.owner or principal in self.renewers


def token_of(record: DelegationTokenRecord) -> DelegationToken:
    return DelegationToken(
        record.owner,
        record.requester,
        tuple(record.renewers),
        record.issue_timestamp,
        record.max_timestamp,
        record.expiration_timestamp,
    )


def record_of(token_id: str, token: DelegationToken, **changes: int) -> DelegationTokenRecord:
    """The record that states ``token`` (with ``changes``, e.g. a new
    ``expiration_timestamp``), as Kafka's ``DelegationTokenData.toRecord``."""
    fields = token._asdict() | changes
    return DelegationTokenRecord(token_id=token_id, **fields)


def token_hmac(secret: str, token_id: str) -> bytes:
    """Kafka's ``createHmac``: HmacSHA512(key = the secret's UTF-8 bytes,
    message = the token id's)."""
    return hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def split_principal(principal: str) -> tuple[str, str] | None:
    """``type:name`` as (type, name) (Kafka's ``SecurityUtils.parseKafkaPrincipal``:
    split at the first colon), or None without a colon or with an empty part."""
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return None
    return kind, name


def record_problem(record: DelegationTokenRecord) -> str | None:
    """Why replay cannot keep this token (Kafka's replay takes any record;
    one the controller could never have written is ignored here)."""
    if not record.token_id:
        return "an empty token id"
    if split_principal(record.owner) is None:
        return f"owner {record.owner!r}, which is not a type:name principal"
    if record.expiration_timestamp > record.max_timestamp:
        return f"expiration {record.expiration_timestamp} after its max time {record.max_timestamp}"
    return None
