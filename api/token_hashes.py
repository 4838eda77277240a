"""Bearer tokens kept as salted scrypt hashes (``metaquorum hash-token``).

A hashed token is ``ID.SECRET``; the tokens file holds
``$scrypt$id=ID$ln=14,r=8,p=1$SALT$HASH`` (unpadded base64) in its place.
The ``ID`` is not secret: it tells the server which entry to check, so a
presented token costs one scrypt, whatever the number of entries, and a
token with an unknown id none. Checking the whole token against the hash
(``hmac.compare_digest``) is what authenticates.

scrypt with N = 2**14, r = 8 (16 MiB, about 67 ms on this project's 2-core
machine) makes a stolen tokens file slow to attack even for weak tokens;
generated ones (32 random bytes) need no help. The server pays that once per
token per start (api/auth.py caches a verified token by its SHA-256), in a
thread, so the event loop never waits for it.

**The safe range.** Whoever knows a token's id (it is not secret) makes the
server run that entry's scrypt with a wrong secret, unauthenticated. So the
file's parameters are bounded, and a line outside refuses the start: ``ln``
(log2 N) from 10 to 15, ``r`` from 1 to 8, ``p`` = 1. A check then needs at
most 128 * r * N = 32 MiB (ln=15, r=8; about 130 ms here), where the old bound,
256 MiB, let two checking threads hold half a GiB in each HTTP process. ``p``
adds no memory in hashlib but multiplies the time, and buys a server that
checks one token at a time nothing. ``hash_token`` (``metaquorum hash-token
--log-n``) makes nothing outside the range either. How often one client
address can make the server check is bounded in api/auth.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "$scrypt$"
HASH_MARK = "$"  # a tokens-file field starting with it is a hash, never a token
DEFAULT_LOG_N, DEFAULT_R, DEFAULT_P = 14, 8, 1
SALT_BYTES, HASH_BYTES = 16, 32
# The safe range (the docstring): at most 128 * MAX_R * 2**MAX_LOG_N = 32 MiB a check.
MIN_LOG_N, MAX_LOG_N, MAX_R, MAX_P = 10, 15, 8, 1
_MAX_MEMORY = 128 * MAX_R * (1 << MAX_LOG_N)
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{4,64}")
_FORMAT = re.compile(
    r"\$scrypt\$id=(?P<id>[^$]*)\$ln=(?P<ln>\d{1,2}),r=(?P<r>\d{1,2}),p=(?P<p>\d{1,2})"
    r"\$(?P<salt>[A-Za-z0-9+/]+)\$(?P<hash>[A-Za-z0-9+/]+)"
)


class TokenHashError(ValueError):
    """A hashed entry or a token that cannot be used; the message says why."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def token_id(token: str) -> str | None:
    """The id of an ``ID.SECRET`` token, or None if it is not of that form."""
    head, dot, rest = token.partition(".")
    if not dot or not rest or not ID_PATTERN.fullmatch(head):
        return None
    return head


@dataclass(frozen=True)
class TokenHash:
    id: str
    log_n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    def __str__(self) -> str:
        params = f"ln={self.log_n},r={self.r},p={self.p}"
        return f"{PREFIX}id={self.id}${params}${_b64(self.salt)}${_b64(self.digest)}"

    def matches(self, token: str) -> bool:
        """Whether ``token`` is the one hashed here (one scrypt; constant-time compare)."""
        return hmac.compare_digest(
            _scrypt(token, self.salt, self.log_n, self.r, self.p), self.digest
        )


def _scrypt(token: str, salt: bytes, log_n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        token.encode("utf-8"), salt=salt, n=1 << log_n, r=r, p=p, maxmem=_MAX_MEMORY + (1 << 20),
        dklen=HASH_BYTES,
    )  # fmt: skip


def new_token() -> str:
    """A fresh ``ID.SECRET`` token: a 10-character id and 32 random bytes."""
    return f"{secrets.token_hex(5)}.{secrets.token_urlsafe(32)}"


def check_parameters(log_n: int, r: int, p: int) -> None:
    """TokenHashError unless the scrypt parameters are in the safe range."""
    for name, value, low, high in (
        ("ln", log_n, MIN_LOG_N, MAX_LOG_N),
        ("r", r, 1, MAX_R),
        ("p", p, 1, MAX_P),
    ):
        if not low <= value <= high:
            raise TokenHashError(
                f"scrypt parameters ln={log_n},r={r},p={p}: {name}={value} is outside "
                f"{low}..{high} (the safe range is ln {MIN_LOG_N}..{MAX_LOG_N}, r 1..{MAX_R}, "
                f"p 1: at most {_MAX_MEMORY >> 20} MiB per check); hash the token again with "
                f"metaquorum hash-token (ln={DEFAULT_LOG_N},r={DEFAULT_R},p={DEFAULT_P})"
            )


def hash_token(token: str, log_n: int = DEFAULT_LOG_N) -> TokenHash:
    """The hashed entry for ``token``, which must be ``ID.SECRET``; ``log_n``
    in the safe range."""
    check_parameters(log_n, DEFAULT_R, DEFAULT_P)
    ident = token_id(token)
    if ident is None:
        raise TokenHashError(
            "a token to hash must look like ID.SECRET (ID: 4-64 letters, digits, - or _), "
            "so that the server finds its entry without trying every hash; "
            "metaquorum hash-token without --token makes one"
        )
    if len(token) < len(ident) + 1 + 16:
        raise TokenHashError("the SECRET part of the token is shorter than 16 characters")
    salt = secrets.token_bytes(SALT_BYTES)
    return TokenHash(
        ident, log_n, DEFAULT_R, DEFAULT_P, salt, _scrypt(token, salt, log_n, DEFAULT_R, DEFAULT_P)
    )


def _not_ours(text: str) -> str:
    """Why a field that starts with ``$`` but not with ``$scrypt$`` is refused."""
    scheme, dollar, _ = text[1:].partition("$")
    if not scheme:
        return (
            f"`{text[:8]}` is not a hash: a field starting with $ must be a hash this server "
            "checks, `$scrypt$...` as `metaquorum hash-token` prints it (a plain token may not "
            "start with $)"
        )
    shown = f"${scheme[:24]}{dollar}"
    hint = " (in lower case, as it prints it)" if scheme.lower() == "scrypt" else ""
    return (
        f"`{shown}` is not a hash this server checks: only `$scrypt$...` as `metaquorum "
        f"hash-token` prints it{hint} (a plain token may not start with $)"
    )


def parse_hash(text: str) -> TokenHash:
    """A tokens-file field that starts with ``$``: a ``$scrypt$...`` hash as
    ``hash-token`` prints it, or TokenHashError saying why not. Nothing that
    starts with ``$`` is ever taken as a plain token: a hash of another kind
    (``$argon2id$...``) would otherwise authenticate its own literal text."""
    if not text.startswith(PREFIX):
        raise TokenHashError(_not_ours(text))
    m = _FORMAT.fullmatch(text)
    if m is None:
        raise TokenHashError(
            "not a hashed token: expected $scrypt$id=ID$ln=N,r=R,p=P$SALT$HASH "
            "(as metaquorum hash-token prints it)"
        )
    ident, log_n, r, p = m["id"], int(m["ln"]), int(m["r"]), int(m["p"])
    if not ID_PATTERN.fullmatch(ident):
        raise TokenHashError(f"id {ident!r}: 4-64 letters, digits, - or _")
    check_parameters(log_n, r, p)
    try:
        salt, digest = _unb64(m["salt"]), _unb64(m["hash"])
    except ValueError:
        raise TokenHashError("the salt or hash is not base64") from None
    if len(salt) < 8 or len(digest) != HASH_BYTES:
        raise TokenHashError(f"the salt must be 8+ bytes and the hash {HASH_BYTES}")
    if _b64(salt) != m["salt"] or _b64(digest) != m["hash"]:
        raise TokenHashError(
            "the salt or hash is not as printed (unpadded base64 with its last character "
            "changed?): paste the line metaquorum hash-token printed"
        )
    return TokenHash(ident, log_n, r, p, salt, digest)
