"""The web console's sign-in cookie: a token holder's browser session, read-only.

A browser cannot send a bearer header when it navigates, so ``POST
/ui/login`` (with the token in its Authorization header, checked by the
edge like any request's) answers a cookie that stands for that token:

    v1.<token name>.<expiry, epoch s>.<HMAC-SHA256>

The HMAC is keyed by what the voter stores for that token (a plain token's
SHA-256, a hashed token's scrypt digest: ``TokenTable.session_key``), so the
cookie holds no secret, every HTTP process of every voter with the same
tokens file checks it without shared state, and removing the token from
the file (revoking it) ends its sessions at the next start. A session is
the token's caller with the ``read`` role, on GET and HEAD only
(``Authenticator.identify``): it can never write, so a forged cross-site
request gains nothing (and ``SameSite=Strict`` keeps the browser from
sending it cross-site at all). Pure: the time is an argument.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

COOKIE = "mq_console"
VERSION = "v1"
LIFETIME_S = 8 * 3600  # a working day; sign in again after
MAX_COOKIE_LENGTH = 512  # anything longer is not ours: not parsed

# What a browser may GET before it signs in: the sign-in page, its script and
# style, and signing out. None of them says anything about the cluster.
OPEN_PATHS = frozenset({"/ui/login", "/ui/logout", "/ui/assets/login.js", "/ui/assets/console.css"})
LOGIN_PAGE = "/ui/login"


def _mac(key: bytes, name: str, expiry_s: int) -> str:
    message = f"metaquorum-console|{VERSION}|{name}|{expiry_s}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _name_part(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode("ascii").rstrip("=")


def issue(key: bytes, name: str, now_s: float, lifetime_s: int = LIFETIME_S) -> str:
    """The cookie value for the token named ``name`` (``Principal.token``) whose stored form is ``key``."""
    expiry = int(now_s) + lifetime_s
    return f"{VERSION}.{_name_part(name)}.{expiry}.{_mac(key, name, expiry)}"


def token_name(value: str) -> str | None:
    """The token name a cookie value claims (unchecked), or None if it is not one of ours."""
    if len(value) > MAX_COOKIE_LENGTH:
        return None
    parts = value.split(".")
    if len(parts) != 4 or parts[0] != VERSION or not parts[2].isdigit():
        return None
    try:
        return base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def valid(value: str, key: bytes, name: str, now_s: float) -> bool:
    """Whether ``value`` is an unexpired cookie for ``name`` signed with ``key``."""
    parts = value.split(".")
    expiry = int(parts[2])
    if expiry <= now_s or expiry > now_s + LIFETIME_S + 60:
        return False
    return hmac.compare_digest(parts[3], _mac(key, name, expiry))


def cookie_value(header: str) -> str | None:
    """Our cookie's value from a Cookie header, or None."""
    for part in header.split(";"):
        key, eq, value = part.strip().partition("=")
        if eq and key == COOKIE:
            return value.strip('"')
    return None


def set_cookie(value: str, secure: bool, max_age: int = LIFETIME_S) -> str:
    """The Set-Cookie header: HttpOnly (no script reads it), SameSite=Strict,
    Secure under TLS, for the whole origin (the console's scripts read /v1/)."""
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{flags}"
