"""SCRAM credentials (KIP-554): the mechanisms, their bounds, and who derives what.

Kafka splits the work so that the password never leaves the client: the
client (``Admin.alterUserScramCredentials``, ``kafka-configs``) picks a
random salt and sends ``saltedPassword = Hi(password, salt, iterations)``
(PBKDF2-HMAC of the mechanism's hash, RFC 5802); the controller
(``ScramControlManager.finishUpsertion``) derives and stores only
``storedKey = H(HMAC(saltedPassword, "Client Key"))`` and
``serverKey = HMAC(saltedPassword, "Server Key")`` (``ScramFormatter``).
Neither the password nor the salted password is in any record. The CLI's
side is ``salted_password`` and ``random_salt``; the controller's is
``derived_keys``.

The mechanisms are Kafka's (``org.apache.kafka.clients.admin.ScramMechanism``):
type 1 SCRAM-SHA-256, 2 SCRAM-SHA-512; any other type is UNKNOWN. Iterations
are in [4096, 16384] (``ScramMechanism.minIterations``,
``ScramControlManager.MAX_ITERATIONS``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import NamedTuple

from .records import UserScramCredentialRecord

# type -> (name, hashlib's name of its hash), as Kafka numbers them.
MECHANISMS: dict[int, tuple[str, str]] = {
    1: ("SCRAM-SHA-256", "sha256"),
    2: ("SCRAM-SHA-512", "sha512"),
}
MECHANISM_TYPES = {name: mechanism for mechanism, (name, _hash) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations (both mechanisms)
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS
DEFAULT_ITERATIONS = 4096  # kafka-configs' DefaultScramIterations


class ScramCredential(NamedTuple):
    """What the image keeps of one user's credential for one mechanism
    (Kafka's ``ScramCredentialData``): never shown to a reader."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # As Kafka's ScramCredentialValue.toString: a log line or a failed
        # assert never prints a key.
        return "ScramCredential(salt=[hidden], stored_key=[hidden], server_key=[hidden])"


def mechanism_name(mechanism: int) -> str:
    """Kafka's name of a mechanism type ("SCRAM-SHA-256"), or "UNKNOWN"."""
    known = MECHANISMS.get(mechanism)
    return "UNKNOWN" if known is None else known[0]


def salted_password(password: bytes, salt: bytes, iterations: int, mechanism: int) -> bytes:
    """The client's half: Kafka's ``ScramFormatter.hi`` (PBKDF2-HMAC of the
    mechanism's hash, one block), as ``KafkaAdminClient.getSaltedPassword``."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password, salt, iterations)


def random_salt() -> bytes:
    """A salt as Kafka's ``ScramFormatter.secureRandomBytes`` makes one: the
    base-36 text of 130 random bits, as UTF-8."""
    number = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if not number:
            return text.encode("ascii")


def derived_keys(mechanism: int, salted: bytes) -> tuple[bytes, bytes]:
    """The controller's half: (storedKey, serverKey) from the salted password
    (Kafka's ``ScramFormatter.storedKey(clientKey(..))`` and ``serverKey``)."""
    digest = MECHANISMS[mechanism][1]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return stored_key, server_key


def record_problem(record: UserScramCredentialRecord) -> str | None:
    """Why replay cannot keep this credential (Kafka's replay takes any
    record; one the controller could never have written is ignored here):
    a user with no name or a mechanism Kafka does not know."""
    if not record.name:
        return "an empty user name"
    if record.mechanism not in MECHANISMS:
        return f"unknown SCRAM mechanism {record.mechanism}"
    return None
