"""Kafka UUIDs: 16 random bytes shown as 22 characters of unpadded base64url.

Inside metaquorum a UUID is always that canonical 22-character string; the
standard 36-character form is accepted on input and converted.
"""

from __future__ import annotations

import base64
import os
import re
import uuid as _uuid

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
# Kafka reserves the zero UUID and the metadata topic's id (1); neither is ever a topic id.
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
_RESERVED = frozenset({ZERO_UUID, METADATA_TOPIC_ID})
# uuid.UUID() alone is lenient (strips hyphens, braces, accepts Unicode digits).
_STANDARD = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


# The one spelling of 16 bytes in 22 base64url characters: the last holds 2
# bits of the UUID and 4 zero bits (A, Q, g or w). One C call; it agrees with
# decoding and re-encoding (``canonical_by_round_trip``, tests/test_uuids.py),
# which costs three times as much in every process that decodes a record.
_CANONICAL = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")


class InvalidUuid(ValueError):
    """The text is neither a 22-character base64url UUID nor a 36-character standard one."""


def uuid_from_bytes(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def parse_uuid(text: object) -> str:
    """The canonical 22-character form of ``text``, or InvalidUuid naming what is wrong."""
    if not isinstance(text, str):
        raise InvalidUuid(f"a UUID must be a string, not {type(text).__name__}")
    if len(text) == 22:
        if _CANONICAL.fullmatch(text) is None:
            raise InvalidUuid(f"{text!r} is not a canonical base64url UUID")
        return text
    if len(text) == 36:
        if not _STANDARD.fullmatch(text):
            raise InvalidUuid(f"{text!r} is not a UUID (expected 8-4-4-4-12 hex digits)")
        return uuid_from_bytes(bytes.fromhex(text.replace("-", "")))
    raise InvalidUuid(
        f"{text[:40]!r} is not a UUID (22 base64url or 36 standard characters expected)"
    )


def canonical_by_round_trip(text: str) -> bool:
    """Whether 22 characters decode to 16 bytes that encode back to them: what
    ``_CANONICAL`` checks in one match (re-encoding rejects characters that
    b64decode would skip and non-zero padding bits)."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        return False
    return len(raw) == 16 and uuid_from_bytes(raw) == text


def random_uuid() -> str:
    """A fresh random UUID, avoiding Kafka's reserved ids and a leading '-'
    (Kafka's ``Uuid.randomUuid`` does the same so ids never look like CLI flags)."""
    while True:
        text = uuid_from_bytes(os.urandom(16))
        if text not in _RESERVED and not text.startswith("-"):
            return text


def to_standard(text: str) -> str:
    """The 36-character form, for people and tools that expect it."""
    return str(_uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")))
