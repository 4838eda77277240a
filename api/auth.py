"""Bearer-token authentication and roles (docs/api.md "Auth").

The tokens file has one ``token role [brokerId]`` per line; ``#`` starts a
comment, blank lines are skipped. Roles:

* ``admin``: every endpoint;
* ``broker``: the broker endpoints and every GET. Bound to a ``brokerId``, it
  may act only for that broker (the ``brokerId`` of the request body);
* ``read``: the GETs.

Without a tokens file auth is off (``/v1/quorum/status`` says ``"auth": "off"``).
The web console's sign-in cookie (api/console_session.py) stands for a token
on GET and HEAD only, as the ``read`` role whatever the token's.
``/livez``, ``/readyz`` and ``/metrics`` need no token; the OpenAPI pages
(``/docs``, ``/redoc``, ``/openapi.json``) need one unless the app is built with
``public_docs`` (``serve --public-docs``).
Answers never name where a token is defined (the tokens file's line), only its
role and binding: the file's layout is the operator's, not the caller's.
Tokens are kept as SHA-256 digests and looked up by digest, so a lookup's
timing says nothing about the stored tokens. A token field starting with
``$scrypt$`` is a salted hash of an ``ID.SECRET`` token (api/token_hashes.py,
``metaquorum hash-token``): the file then holds nothing a caller could present.
Any other field starting with ``$`` refuses the file (a plain token may not
start with ``$``): a hash of a kind this server does not check
(``$argon2id$...``) must never become a token that its own text matches.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from metadata_records.errors import Errors
from metadata_records.limits import MAX_WHO_PRINCIPAL_LENGTH

from . import console_session
from .errors import ApiProblem
from .failure_limit import FAILURE_BURST, FAILURES_PER_S, FailureLimit
from .tls import describe_names, peer_certificate
from .token_hashes import HASH_MARK, TokenHash, TokenHashError, parse_hash, token_id

_MAPPED = "metaquorum.principal"  # the connection's certificate principal, once mapped
_SESSION = "metaquorum.session"  # a request's console-cookie principal, once checked


class CertMapper(Protocol):
    """api/cert_principals.CertPrincipals (a Protocol: that module imports this one)."""

    def principal(self, peer: dict) -> Principal | None:
        """None if no rule maps the certificate; AmbiguousCertificate if its
        names are more than one principal."""
        ...

    def describe(self) -> str: ...


class Role(StrEnum):
    ADMIN = "admin"
    BROKER = "broker"
    READ = "read"


# Which token roles may call an endpoint that needs the key role.
ALLOWED: dict[Role, frozenset[Role]] = {
    Role.ADMIN: frozenset({Role.ADMIN}),
    Role.BROKER: frozenset({Role.ADMIN, Role.BROKER}),
    Role.READ: frozenset({Role.ADMIN, Role.BROKER, Role.READ}),
}

# Who is shown the values of sensitive configs (PASSWORDs, configs of unknown
# type: metadata_records.config_schema.is_sensitive) in the records of the log
# and the snapshot: the brokers, which apply them, and admins, who set them.
# Any other role is shown Kafka's marker (metadata_records.redaction).
# DescribeConfigs shows no role a sensitive value (api/reads.configs_obj).
SEES_SENSITIVE = frozenset({Role.ADMIN, Role.BROKER})

INT32_MAX = 2**31 - 1


class AmbiguousCertificate(Exception):
    """A client certificate whose names are more than one principal (403)."""


class TokensFileError(ValueError):
    """A tokens file that cannot be used; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Principal:
    role: Role
    broker_id: int | None = None  # a broker token bound to one broker
    line: int = 0  # where the token or rule is defined: tells them apart, never shown
    certificate: str | None = None  # the client certificate's name that a rule matched
    # A token's name in the log's who (``token/<id>``, ``token/line-<N>``):
    # never any part of its secret. "" for a certificate's or auth off.
    token: str = field(default="", compare=False)  # named by line or id: both compared
    # ``<role>:<identity>``, as the log's who names the caller (docs/security.md
    # "What the who shows"): identity ``token/<id>`` (a hashed token's id, or
    # the id of an ``ID.SECRET`` token), ``token/line-<N>`` (a plain token, by
    # its line in the tokens file), ``cert/<name>`` (the certificate name a
    # rule matched) or ``anonymous`` (auth off). Made once, here: a write
    # reads it on every request. A name past the log's bound is cut, marked
    # with "...".
    name: str = field(default="", compare=False, init=False)

    def __post_init__(self) -> None:
        if self.certificate is not None:
            identity = f"cert/{self.certificate}"
        else:
            identity = self.token or "anonymous"
        name = f"{self.role.value}:{identity}"
        if len(name) > MAX_WHO_PRINCIPAL_LENGTH:
            name = name[: MAX_WHO_PRINCIPAL_LENGTH - 3] + "..."
        object.__setattr__(self, "name", name)

    def describe(self) -> str:
        bound = f" for broker {self.broker_id}" if self.broker_id is not None else ""
        if self.certificate is not None:
            return f"the {self.role.value} certificate {self.certificate}{bound}"
        return f"the {self.role.value} token{bound}"


ANONYMOUS_ADMIN = Principal(Role.ADMIN)  # what every caller is when auth is off


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenTable:
    """Tokens by digest, and hashed tokens by id (api/token_hashes.py). Build
    with ``parse_tokens`` or ``load_tokens``.

    A hashed token costs one scrypt the first time it is seen, then it is
    looked up by digest like a plain one; a wrong secret for a known id is
    remembered as wrong (a bounded set), so repeating it costs nothing. A
    client address whose checks failed too often waits before its next one
    (api/failure_limit.py)."""

    def __init__(
        self,
        principals: dict[bytes, Principal],
        source: str = "<tokens>",
        hashed: dict[str, tuple[TokenHash, Principal]] | None = None,
    ) -> None:
        self._by_digest = principals
        self._hashed = hashed or {}
        self._verified: dict[bytes, Principal] = {}  # at most one token per hashed entry
        self._refused: OrderedDict[bytes, None] = OrderedDict()
        self._checking = 0
        self._slots: asyncio.Semaphore | None = None
        self.failures = FailureLimit()
        self.source = source
        self._session_keys: dict[str, tuple[bytes, Principal]] | None = None

    def session_key(self, name: str) -> tuple[bytes, Principal] | None:
        """What this table stores for the token named ``name`` (its
        ``Principal.token``), and its principal: the key of its console
        sessions (api/console_session.py). A plain token's SHA-256, a hashed
        token's scrypt digest: never the secret itself."""
        if self._session_keys is None:
            keys = {p.token: (digest, p) for digest, p in self._by_digest.items()}
            for hashed, p in self._hashed.values():
                keys[p.token] = (hashed.digest, p)
            self._session_keys = keys
        return self._session_keys.get(name)

    def __len__(self) -> int:
        return len(self._by_digest) + len(self._hashed)

    def lookup(self, token: str) -> Principal | None:
        """The token's principal, or None; runs scrypt inline for a hashed
        token not yet checked (``prepare`` first, on the event loop)."""
        digest = _digest(token)
        found = self._by_digest.get(digest) or self._verified.get(digest)
        if found is not None or not self._hashed:
            return found
        entry = self._unchecked(token, digest)
        return None if entry is None else self._check(entry, token, digest)

    def _unchecked(self, token: str, digest: bytes) -> tuple[TokenHash, Principal] | None:
        if digest in self._refused:
            return None
        ident = token_id(token)
        return None if ident is None else self._hashed.get(ident)

    def _check(
        self, entry: tuple[TokenHash, Principal], token: str, digest: bytes
    ) -> Principal | None:
        hashed, principal = entry
        if hashed.matches(token):
            self._verified[digest] = principal
            return principal
        self._refused[digest] = None
        while len(self._refused) > MAX_REFUSED_REMEMBERED:
            self._refused.popitem(last=False)
        return None

    async def prepare(self, token: str, client: Hashable = None) -> None:
        """Checks a hashed token not yet checked in a thread (scrypt releases
        the GIL), at most CHECK_THREADS at once; TooManyChecks past
        MAX_WAITING_CHECKS waiting, TooManyFailures if ``client`` (the
        caller's address) failed too often (api/failure_limit.py). Then
        ``lookup`` answers from its caches."""
        if not self._hashed:
            return
        digest = _digest(token)
        if digest in self._by_digest or digest in self._verified:
            return
        entry = self._unchecked(token, digest)
        if entry is None:
            return
        wait = self.failures.wait(client)
        if wait:
            raise TooManyFailures(client, wait)
        if self._checking >= MAX_WAITING_CHECKS:
            raise TooManyChecks(self._checking)
        if self._slots is None:
            self._slots = asyncio.Semaphore(CHECK_THREADS)
        self._checking += 1
        try:
            async with self._slots:
                if digest not in self._verified and digest not in self._refused:
                    if await asyncio.to_thread(self._check, entry, token, digest) is None:
                        self.failures.failed(client)
        finally:
            self._checking -= 1


# Hashed-token checks: scrypt runs in at most this many threads at once; past
# this many waiting, a caller with an unchecked token is asked to retry (429),
# so a flood of wrong secrets for a known id cannot queue without bound.
CHECK_THREADS = 2
MAX_WAITING_CHECKS = 64
MAX_REFUSED_REMEMBERED = 4096


class TooManyChecks(Exception):
    """Too many hashed tokens are waiting for their first check."""


class TooManyFailures(Exception):
    """The caller's address failed hashed-token checks too often: (address, seconds to wait)."""


def rule_lines(text: str, source: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, where, fields) of each line of a tokens or principals
    file that holds something ("#" starts a comment); ``where`` names the
    file and line for an error."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line:
            yield number, f"{source} line {number}", line.split()


def parse_tokens(text: str, source: str = "<tokens>") -> TokenTable:
    principals: dict[bytes, Principal] = {}
    hashed: dict[str, tuple[TokenHash, Principal]] = {}
    for number, where, parts in rule_lines(text, source):
        if len(parts) not in (2, 3):
            raise TokensFileError(
                f"{where}: expected 'token role [brokerId]', got {len(parts)} fields"
            )
        token, role_name = parts[0], parts[1]
        try:
            role = Role(role_name)
        except ValueError:
            raise TokensFileError(
                f"{where}: unknown role {role_name!r} (expected broker, admin or read)"
            ) from None
        broker_id = None
        if len(parts) == 3:
            if role is not Role.BROKER:
                raise TokensFileError(f"{where}: only a broker token can be bound to a brokerId")
            text_id = parts[2]
            if not text_id.isascii() or not text_id.isdigit() or int(text_id) > INT32_MAX:
                raise TokensFileError(
                    f"{where}: brokerId {text_id!r} is not an integer in [0, {INT32_MAX}]"
                )
            broker_id = int(text_id)
        if token.startswith(HASH_MARK):
            try:
                entry = parse_hash(token)
            except TokenHashError as e:
                raise TokensFileError(f"{where}: {e}") from None
            if entry.id in hashed:
                raise TokensFileError(
                    f"{where}: a hashed token with id {entry.id} is already defined on line "
                    f"{hashed[entry.id][1].line}"
                )
            hashed[entry.id] = (
                entry,
                Principal(role, broker_id, number, token=f"token/{entry.id}"),
            )
            continue
        digest = _digest(token)
        if digest in principals:
            raise TokensFileError(
                f"{where}: this token is already defined on line {principals[digest].line}"
            )
        principals[digest] = Principal(role, broker_id, number, token=token_id(token) or "")
    if not principals and not hashed:
        raise TokensFileError(
            f"{source}: no tokens (a tokens file with none would refuse everyone)"
        )
    return TokenTable(_named(principals, hashed), source, hashed)


def _named(
    principals: dict[bytes, Principal], hashed: dict[str, tuple[TokenHash, Principal]]
) -> dict[bytes, Principal]:
    """The plain tokens with their names in the log's who: ``token/<id>`` for
    an ``ID.SECRET`` token whose id no other token of the file has, else
    ``token/line-<N>`` (parse_tokens left the id, or "", in ``token``)."""
    ids = collections.Counter(p.token for p in principals.values() if p.token)
    for ident in hashed:
        ids[ident] += 1
    return {
        digest: dataclasses.replace(
            p,
            token=f"token/{p.token}" if p.token and ids[p.token] == 1 else f"token/line-{p.line}",
        )
        for digest, p in principals.items()
    }


def read_rule_file(path: str | os.PathLike, what: str, error: type[Exception]) -> str:
    """The text of a tokens or principals file; ``error`` names the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read the {what} file ({e})") from None


def load_tokens(path: str | os.PathLike) -> TokenTable:
    """Reads a tokens file; TokensFileError names the file and the bad line."""
    return parse_tokens(read_rule_file(path, "tokens", TokensFileError), str(path))


def _unauthorized(message: str) -> ApiProblem:
    return ApiProblem(
        401,
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        message,
        headers={"WWW-Authenticate": 'Bearer realm="metaquorum"'},
    )


class Authenticator:
    """Who a request's caller is: its bearer token, else its connection's
    client certificate (api/cert_principals.py), else no one.

    A token, when sent, decides, whatever certificate the connection has: it
    is the credential of this request, where the certificate is the
    connection's (an operator's tool may hold an admin token on a connection
    a broker certificate opened). An unknown token is 401 even with a good
    certificate: a wrong credential is never silently replaced by another.
    Auth is on when there is a tokens file or a client CA (``certificates``)."""

    def __init__(
        self,
        tokens: TokenTable | None,
        certificates: CertMapper | None = None,
        on_throttled: Callable[[], None] | None = None,
    ) -> None:
        self.tokens = tokens
        self.certificates = certificates
        self.on_throttled = on_throttled  # a request refused by the failure limit (/metrics)
        self.throttled = 0

    @property
    def enabled(self) -> bool:
        return self.tokens is not None or self.certificates is not None

    async def prepare(self, authorization: str | None, client: Hashable = None) -> None:
        """Checks a hashed token seen for the first time off the event loop,
        so that ``identify`` finds it cached (api/token_hashes.py); 429 if too
        many wait for their check, or if ``client`` (the caller's address)
        failed such checks too often (api/failure_limit.py)."""
        if self.tokens is None or not authorization:
            return
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return
        try:
            await self.tokens.prepare(token.strip(), client)
        except TooManyFailures as e:
            self.throttled += 1
            if self.on_throttled is not None:
                self.on_throttled()
            address, wait = e.args
            seconds = max(1, math.ceil(wait))
            raise ApiProblem(
                429,
                Errors.THROTTLING_QUOTA_EXCEEDED,
                f"too many hashed tokens with a wrong secret came from {address} recently; "
                f"nothing was checked: retry after Retry-After ({FAILURE_BURST} failed checks "
                f"at once, then {FAILURES_PER_S:g} a second, per client address)",
                headers={"Retry-After": str(seconds)},
                extra={"retryAfterMs": seconds * 1000},
            ) from None
        except TooManyChecks as e:
            raise ApiProblem(
                429,
                Errors.THROTTLING_QUOTA_EXCEEDED,
                f"{e.args[0]} tokens are waiting for their first check against their hash; "
                "retry after Retry-After",
                headers={"Retry-After": "1"},
                extra={"retryAfterMs": 1000},
            ) from None

    def authenticate(
        self, authorization: str | None, needs: Role, scope: dict | None = None
    ) -> Principal:
        """The caller, if it may call an endpoint that needs ``needs``; else 401/403."""
        principal = self.identify(authorization, scope)
        if principal.role not in ALLOWED[needs]:
            raise ApiProblem(
                403,
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                f"{principal.describe()} may not call this endpoint (it needs the "
                f"{needs.value} role); use a {self._credential} with that role",
            )
        return principal

    @property
    def _credential(self) -> str:
        if self.tokens is None:
            return "client certificate"
        return "token" if self.certificates is None else "token or client certificate"

    def identify(self, authorization: str | None, scope: dict | None = None) -> Principal:
        """Who the caller is (any role), or 401: what the edge checks before it
        reserves anything for a request."""
        if not self.enabled:
            return ANONYMOUS_ADMIN
        if authorization:
            return self._token(authorization)
        if self.tokens is not None and scope is not None:
            session = self.session(scope)
            if session is not None:
                return session
        if self.certificates is not None and scope is not None:
            peer = peer_certificate(scope)
            if peer is not None:
                principal = self._certificate(scope, peer)
                if principal is not None:
                    return principal
                raise _unauthorized(
                    f"the client certificate ({describe_names(peer)}) maps to no principal "
                    f"({self.certificates.describe()}); use a certificate a rule maps"
                    + (", or send a bearer token" if self.tokens is not None else "")
                )
        if self.tokens is None:
            raise _unauthorized(
                "no client certificate: this server authenticates callers by their TLS "
                "client certificate (--cert and --key)"
            )
        either = " or a client certificate" if self.certificates is not None else ""
        raise _unauthorized(f"missing bearer token (Authorization: Bearer <token>){either}")

    def session(self, scope: dict) -> Principal | None:
        """The caller of a GET or HEAD by its console cookie
        (api/console_session.py), with the read role whatever its token's:
        a session can never write. None without a valid one."""
        if scope.get("method") not in ("GET", "HEAD") or self.tokens is None:
            return None
        found = scope.get(_SESSION, False)
        if found is not False:
            return found
        found = None
        for key, value in scope.get("headers", ()):
            if key == b"cookie":
                cookie = console_session.cookie_value(value.decode("latin-1"))
                if cookie is not None:
                    found = self._session_principal(cookie)
                    break
        scope[_SESSION] = found
        return found

    def _session_principal(self, cookie: str) -> Principal | None:
        assert self.tokens is not None
        name = console_session.token_name(cookie)
        entry = None if name is None else self.tokens.session_key(name)
        if entry is None or name is None:
            return None
        key, principal = entry
        if not console_session.valid(cookie, key, name, time.time()):
            return None
        return dataclasses.replace(principal, role=Role.READ, broker_id=None)

    def session_cookie(self, principal: Principal) -> str | None:
        """A console cookie for a token's caller, or None (a certificate's,
        or auth off: the browser presents those itself)."""
        if self.tokens is None or principal.certificate is not None or not principal.token:
            return None
        entry = self.tokens.session_key(principal.token)
        if entry is None:
            return None
        return console_session.issue(entry[0], principal.token, time.time())

    def _token(self, authorization: str) -> Principal:
        if self.tokens is None:
            raise _unauthorized(
                "this server has no tokens: authenticate with a TLS client certificate "
                "and send no Authorization header"
            )
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise _unauthorized("the Authorization header must be 'Bearer <token>'")
        principal = self.tokens.lookup(token)
        if principal is None:
            raise _unauthorized("unknown bearer token; use a token from the tokens file")
        return principal

    def _certificate(self, scope: dict, peer: dict) -> Principal | None:
        # Mapped once per connection: the extension dict lives as long as it.
        tls = scope["extensions"]["tls"]
        if _MAPPED not in tls:
            assert self.certificates is not None
            try:
                tls[_MAPPED] = self.certificates.principal(peer)
            except AmbiguousCertificate as e:
                tls[_MAPPED] = e
        mapped = tls[_MAPPED]
        if isinstance(mapped, AmbiguousCertificate):
            raise ApiProblem(
                403,
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                str(mapped) + ("; or send a bearer token" if self.tokens is not None else ""),
            )
        return mapped

    @staticmethod
    def shows_sensitive(principal: Principal, asked: bool | None) -> bool:
        """Whether records shown to ``principal`` keep sensitive config values:
        ``asked`` None, as its role allows (``SEES_SENSITIVE``); False, never;
        True, only to an admin (403 for any other role), so that a caller that
        must not store the marker in their place, the export, knows it has them."""
        if asked is None:
            return principal.role in SEES_SENSITIVE
        if asked and principal.role is not Role.ADMIN:
            raise ApiProblem(
                403,
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                f"{principal.describe()} may not ask for the values of sensitive configs "
                "(includeSensitive=true needs the admin role)",
            )
        return asked

    @staticmethod
    def check_broker(principal: Principal, broker_id: int) -> None:
        """A bound broker token may act only for its own broker (403 otherwise)."""
        if principal.role is Role.BROKER and principal.broker_id not in (None, broker_id):
            raise ApiProblem(
                403,
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                f"{principal.describe()} may not act for broker {broker_id}",
            )
