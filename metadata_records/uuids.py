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


class InvalidUuid(ValueError):
    """The text is neither a 22-character base64url UUID nor a 36-character standard one."""


def uuid_from_bytes(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def parse_uuid(text: object) -> str:
    """The canonical 22-character form of ``text``, or InvalidUuid naming what is wrong."""
    if not isinstance(text, str):
        raise InvalidUuid(f"a UUID must be a string, not {type(text).__name__}")
    if len(text) == 22:
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (ValueError, TypeError):
            raise InvalidUuid(f"{text!r} is not base64url") from None
        # Re-encoding rejects non-alphabet characters that b64decode would skip
        # and non-zero padding bits, so each UUID has exactly one spelling.
        if len(raw) != 16 or uuid_from_bytes(raw) != text:
            raise InvalidUuid(f"{text!r} is not a canonical base64url UUID")
        return text
    if len(text) == 36:
        if not _STANDARD.fullmatch(text):
            raise InvalidUuid(f"{text!r} is not a UUID (expected 8-4-4-4-12 hex digits)")
        return uuid_from_bytes(_uuid.UUID(text).bytes)
    raise InvalidUuid(
        f"{text[:40]!r} is not a UUID (22 base64url or 36 standard characters expected)"
    )


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
