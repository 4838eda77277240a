"""Delegation tokens (Kafka's ``DelegationTokenControlManager``, KIP-48).

Create, Renew and Expire are decided here, in Kafka's order of checks,
each refusal under its rule id (controller/rules.py):

1. the caller authenticated (Kafka's ``ControllerApis.allowTokenRequests``:
   no token over an unauthenticated listener): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
2. a secret key is configured: DELEGATION_TOKEN_AUTH_DISABLED;
3. metadata.version supports tokens: UNSUPPORTED_VERSION;
4. Create: every renewer is a ``User``: INVALID_PRINCIPAL_TYPE.
   Renew and Expire: a token has this HMAC (DELEGATION_TOKEN_NOT_FOUND), it
   has not expired (DELEGATION_TOKEN_EXPIRED), and the caller is its owner
   or a renewer (DELEGATION_TOKEN_OWNER_MISMATCH).

Kafka's DELEGATION_TOKEN_AUTHORIZATION_FAILED (creating a token for another
owner without CREATE_TOKENS on that user) cannot happen here: only the admin
role writes, and an admin may do anything, as Kafka's super users.

Time: every token time is wall-clock milliseconds since the epoch, as
Kafka's, because they are absolute times in the records that every node
compares with its own clock. The shell reads the wall clock for each
request (``now_wall_ms``) and for each sweep; nothing here reads a clock.
When the sweep runs is measured on the monotonic clock (``now_ms``), so a
step of the wall clock neither runs the sweep early nor holds it back; what
the sweep removes is decided on the wall clock, as Kafka's
(decisions.md 159: a step forward expires tokens early, a step back keeps
them longer, by the step).

The HMAC is computed, never stored (metadata_records/delegation_tokens.py):
a Renew or Expire finds its token by HMAC among the view's tokens, each
token's HMAC computed once per controller and kept with the id it is of
(a removed token's until they are mostly removed ones).

Expiry is enforced twice, as Kafka: a Renew or Expire of an expired token is
refused, and the controller's sweep (``sweep_expired``, every
delegation.token.expiry.check.interval.ms while tokens exist) writes a
RemoveDelegationTokenRecord for each token past its expiry or max time.
"""

from __future__ import annotations

from collections.abc import Callable

from metadata_records.delegation_tokens import (
    USER_TYPE,
    DelegationToken,
    record_of,
    split_principal,
    token_hmac,
)
from metadata_records.delta import ImageDelta
from metadata_records.errors import ApiError, Errors
from metadata_records.features import DELEGATION_TOKEN_MIN_METADATA_VERSION
from metadata_records.records import RemoveDelegationTokenRecord

from .config import ControllerConfig
from .messages import (
    ControllerResult,
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DelegationTokenExpiryResponse,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)

# The most tokens one sweep removes; a sweep that reaches it runs again
# shortly (as the unclean-election sweep), so no batch grows without bound.
MAX_TOKENS_PER_SWEEP = 1_000


def _not_allowed(what: str) -> ApiError:
    return ApiError(
        Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        f"{what} needs an authenticated caller: this node runs without --tokens-file "
        "or client certificates, so callers are anonymous",
        "delegation-token.request-not-allowed",
    )


_DISABLED = ApiError(
    Errors.DELEGATION_TOKEN_AUTH_DISABLED,
    "Delegation tokens are disabled: the voters run without --delegation-token-secret-file",
    "delegation-token.auth-disabled",
)
_UNSUPPORTED = ApiError(
    Errors.UNSUPPORTED_VERSION,
    "The current metadata.version does not support delegation tokens",
    "delegation-token.metadata-version-too-low",
)
_NOT_FOUND = ApiError(
    Errors.DELEGATION_TOKEN_NOT_FOUND,
    "No delegation token has this HMAC",
    "delegation-token.not-found",
)


class DelegationTokenControlManager:
    def __init__(
        self,
        view: Callable[[], ImageDelta],
        config: ControllerConfig,
        new_token_id: Callable[[], str],
    ) -> None:
        self._view = view  # the controller's view (committed image + pending records)
        self._new_id = new_token_id  # Kafka's Uuid.randomUuid (the controller's source)
        self._secret = config.delegation_token_secret
        self._max_lifetime_ms = config.delegation_token_max_lifetime_ms
        self._expiry_time_ms = config.delegation_token_expiry_time_ms
        self._hmacs: dict[str, bytes] = {}  # token id -> its HMAC, once computed
        self._by_hmac: dict[bytes, str] = {}  # and back

    @property
    def enabled(self) -> bool:
        """Kafka's ``isEnabled``: a secret key is configured."""
        return self._secret is not None

    def _common_problem(self, requester: str | None, what: str) -> ApiError | None:
        if requester is None:
            return _not_allowed(what)
        if self._secret is None:
            return _DISABLED
        if self._view().image.metadata_version < DELEGATION_TOKEN_MIN_METADATA_VERSION:
            return _UNSUPPORTED
        return None

    def hmac_of(self, token_id: str) -> bytes:
        found = self._hmacs.get(token_id)
        if found is None:
            assert self._secret is not None
            found = self._hmacs[token_id] = token_hmac(self._secret, token_id)
            self._by_hmac[found] = token_id
        return found

    def _find(self, hmac: bytes) -> tuple[str, DelegationToken] | None:
        """Kafka's ``getToken``: the token whose HMAC this is. HMACs are
        computed once per controller and looked up by value (Kafka's
        ``tokenForHmac`` map); a miss computes those of tokens not yet seen."""
        view = self._view()
        token_id = self._by_hmac.get(hmac)
        if token_id is None:
            tokens = view.delegation_tokens()
            if len(self._hmacs) > 2 * len(tokens) + 1000:
                # Mostly removed tokens' HMACs: keep the live ones only.
                live = {t: self._hmacs[t] for t in tokens if t in self._hmacs}
                self._hmacs, self._by_hmac = live, {h: t for t, h in live.items()}
            for other in tokens:
                if other not in self._hmacs:
                    self.hmac_of(other)
            token_id = self._by_hmac.get(hmac)
        if token_id is None:
            return None
        token = view.delegation_token(token_id)
        return None if token is None else (token_id, token)

    # ------------------------------------------------------------ Create

    def create_delegation_token(
        self, req: CreateDelegationTokenRequest, now_ms: int
    ) -> ControllerResult:
        """Kafka's ``createDelegationToken``."""
        now = req.now_wall_ms
        requester = req.requester
        req_type, req_name = split_principal(requester or "") or ("", "")
        if req.owner_principal_name:
            owner_type, owner_name = req.owner_principal_type or USER_TYPE, req.owner_principal_name
        else:
            owner_type, owner_name = req_type, req_name
        response = CreateDelegationTokenResponse(
            principal_type=owner_type,
            principal_name=owner_name,
            token_requester_principal_type=req_type,
            token_requester_principal_name=req_name,
        )
        problem = self._common_problem(requester, "Creating a delegation token")
        if problem is None:
            for renewer_type, renewer_name in req.renewers:
                if renewer_type != USER_TYPE:
                    problem = ApiError(
                        Errors.INVALID_PRINCIPAL_TYPE,
                        f"Renewer {renewer_type}:{renewer_name} is not a {USER_TYPE} principal",
                        "delegation-token.renewer-not-user",
                    )
                    break
        if problem is not None:
            response.error, response.error_message = problem.error, problem.message
            response.rule = problem.rule
            return ControllerResult((), response)
        assert requester is not None
        max_lifetime = self._max_lifetime_ms
        if req.max_lifetime_ms > 0:
            max_lifetime = min(max_lifetime, req.max_lifetime_ms)
        max_timestamp = now + max_lifetime
        expiry = min(max_timestamp, now + self._expiry_time_ms)
        token_id = self._new_token_id()
        token = DelegationToken(
            owner=f"{owner_type}:{owner_name}",
            requester=requester,
            renewers=tuple(f"{t}:{n}" for t, n in req.renewers),
            issue_timestamp=now,
            max_timestamp=max_timestamp,
            expiration_timestamp=expiry,
        )
        response.issue_timestamp_ms = now
        response.expiry_timestamp_ms = expiry
        response.max_timestamp_ms = max_timestamp
        response.token_id = token_id
        response.hmac = self.hmac_of(token_id)
        return ControllerResult((record_of(token_id, token),), response)

    def _new_token_id(self) -> str:
        # Kafka's Uuid.randomUuid().toString(); a clash with a live token
        # (2^-122) is drawn again rather than overwriting it.
        while True:
            token_id = self._new_id()
            if self._view().delegation_token(token_id) is None:
                return token_id

    # ------------------------------------------------------------ Renew, Expire

    def _checked(
        self, requester: str | None, hmac: bytes, now: int, what: str
    ) -> tuple[str, DelegationToken] | ApiError:
        problem = self._common_problem(requester, what)
        if problem is not None:
            return problem
        found = self._find(hmac)
        if found is None:
            return _NOT_FOUND
        token_id, token = found
        if token.expired(now):
            return ApiError(
                Errors.DELEGATION_TOKEN_EXPIRED,
                f"Delegation token {token_id} expired at "
                f"{min(token.expiration_timestamp, token.max_timestamp)}",
                "delegation-token.expired",
            )
        assert requester is not None
        if not token.owner_or_renewer(requester):
            return ApiError(
                Errors.DELEGATION_TOKEN_OWNER_MISMATCH,
                f"{requester} is neither the owner of delegation token {token_id} nor a renewer",
                "delegation-token.owner-mismatch",
            )
        return found

    def renew_delegation_token(
        self, req: RenewDelegationTokenRequest, now_ms: int
    ) -> ControllerResult:
        """Kafka's ``renewDelegationToken``."""
        now = req.now_wall_ms
        found = self._checked(req.requester, req.hmac, now, "Renewing a delegation token")
        if isinstance(found, ApiError):
            return ControllerResult((), _refused(found))
        token_id, token = found
        renew_lifetime = self._expiry_time_ms
        if req.renew_period_ms > 0:
            renew_lifetime = min(renew_lifetime, req.renew_period_ms)
        expiry = min(token.max_timestamp, now + renew_lifetime)
        record = record_of(token_id, token, expiration_timestamp=expiry)
        return ControllerResult(
            (record,), DelegationTokenExpiryResponse(expiry_timestamp_ms=expiry)
        )

    def expire_delegation_token(
        self, req: ExpireDelegationTokenRequest, now_ms: int
    ) -> ControllerResult:
        """Kafka's ``expireDelegationToken``: a negative period removes the
        token now (the answer's expiry is that period, as Kafka's); any other
        moves its expiry to now + period, never past its max time."""
        now = req.now_wall_ms
        found = self._checked(req.requester, req.hmac, now, "Expiring a delegation token")
        if isinstance(found, ApiError):
            return ControllerResult((), _refused(found))
        token_id, token = found
        period = req.expiry_time_period_ms
        if period < 0:
            return ControllerResult(
                (RemoveDelegationTokenRecord(token_id=token_id),),
                DelegationTokenExpiryResponse(expiry_timestamp_ms=period),
            )
        expiry = min(token.max_timestamp, now + period)
        record = record_of(token_id, token, expiration_timestamp=expiry)
        return ControllerResult(
            (record,), DelegationTokenExpiryResponse(expiry_timestamp_ms=expiry)
        )

    # ------------------------------------------------------------ the sweep

    def sweep_expired(self, now_wall_ms: int) -> ControllerResult:
        """Kafka's ``sweepExpiredDelegationTokens``: a RemoveDelegationTokenRecord
        for each token past its expiry or max time (at most
        MAX_TOKENS_PER_SWEEP; the response is True when more are left)."""
        expired = sorted(
            token_id
            for token_id, token in self._view().delegation_tokens().items()
            if token.expired(now_wall_ms)
        )
        records = tuple(
            RemoveDelegationTokenRecord(token_id=token_id)
            for token_id in expired[:MAX_TOKENS_PER_SWEEP]
        )
        return ControllerResult(records, len(expired) > MAX_TOKENS_PER_SWEEP)


def _refused(problem: ApiError) -> DelegationTokenExpiryResponse:
    return DelegationTokenExpiryResponse(problem.error, problem.message, problem.rule)
