"""Create, Renew and Expire of delegation tokens in the pure controller, and
the controller's sweep of expired tokens, following the paths of Kafka's
``DelegationTokenControlManager`` (create with default and capped lifetimes,
an owner other than the requester, a non-User renewer; renew and expire by
the owner, by a renewer, by a stranger, of an expired or unknown token; expire
at once; disabled; a metadata.version too low) and ``QuorumController``'s
``sweepExpiredDelegationTokens``; the image after a failover, a snapshot and
a replay; the HMAC in no record."""

import hashlib
import hmac

import orjson
import pytest

from controller.config import (
    DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS,
    DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS,
    DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS,
)
from controller.delegation_token_control import MAX_TOKENS_PER_SWEEP
from controller.messages import (
    CreateDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from metadata_records.codec import DecodeError, encode_record
from metadata_records.delegation_tokens import token_hmac
from metadata_records.delta import apply_records
from metadata_records.errors import Errors
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import DelegationTokenRecord, RemoveDelegationTokenRecord
from metadata_records.snapshot import decode_image, encode_image
from tests.harness import ControllerHarness

SECRET = "delegation-token-secret-0123456789"
OWNER = "User:token/ops"
DAY = DEFAULT_DELEGATION_TOKEN_EXPIRY_TIME_MS
WEEK = DEFAULT_DELEGATION_TOKEN_MAX_LIFETIME_MS
CHECK = DEFAULT_DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS


def harness(secret=SECRET, **kw) -> ControllerHarness:
    return ControllerHarness(config_options={"delegation_token_secret": secret}, **kw)


@pytest.fixture
def h():
    return harness()


def create(h, requester=OWNER, renewers=(), max_lifetime_ms=-1, owner=None):
    owner_type, owner_name = owner.split(":", 1) if owner else (None, None)
    return h.run(
        CreateDelegationTokenRequest(
            requester, h.wall_ms, tuple(renewers), max_lifetime_ms, owner_type, owner_name
        )
    )


def renew(h, hmac_, requester=OWNER, period=-1):
    return h.run(RenewDelegationTokenRequest(requester, h.wall_ms, hmac_, period))


def expire(h, hmac_, requester=OWNER, period=-1):
    return h.run(ExpireDelegationTokenRequest(requester, h.wall_ms, hmac_, period))


def test_create_uses_kafkas_defaults_and_hmac(h):
    now = h.wall_ms
    r = create(h, renewers=[("User", "bob")])
    assert r.error is Errors.NONE, r
    assert (r.issue_timestamp_ms, r.expiry_timestamp_ms, r.max_timestamp_ms) == (
        now,
        now + DAY,
        now + WEEK,
    )
    assert (r.principal_type, r.principal_name) == ("User", "token/ops")
    assert (r.token_requester_principal_type, r.token_requester_principal_name) == (
        "User",
        "token/ops",
    )
    # Kafka's createHmac: HmacSHA512 of the token id under the secret.
    expected = hmac.new(SECRET.encode(), r.token_id.encode(), hashlib.sha512).digest()
    assert r.hmac == expected == token_hmac(SECRET, r.token_id)
    token = h.image.delegation_tokens[r.token_id]
    assert token.owner == OWNER and token.requester == OWNER and token.renewers == ("User:bob",)
    assert (token.issue_timestamp, token.expiration_timestamp, token.max_timestamp) == (
        now,
        now + DAY,
        now + WEEK,
    )
    # The HMAC is in no record (nor any encoding of one), nor the response's repr.
    (record,) = h.last.records
    assert type(record) is DelegationTokenRecord
    assert r.hmac not in encode_record(record) and r.hmac.hex() not in repr(r)


def test_a_max_lifetime_below_the_default_caps_both_times(h):
    now = h.wall_ms
    r = create(h, max_lifetime_ms=3600_000)
    assert (r.expiry_timestamp_ms, r.max_timestamp_ms) == (now + 3600_000, now + 3600_000)
    r = create(h, max_lifetime_ms=2 * WEEK)  # above the default: the default
    assert r.max_timestamp_ms == now + WEEK


def test_an_owner_other_than_the_requester(h):
    r = create(h, owner="User:alice")
    assert (r.principal_type, r.principal_name) == ("User", "alice")
    assert r.token_requester_principal_name == "token/ops"
    token = h.image.delegation_tokens[r.token_id]
    assert (token.owner, token.requester) == ("User:alice", OWNER)


def test_a_renewer_that_is_not_a_user_is_refused_and_nothing_written(h):
    r = create(h, renewers=[("User", "bob"), ("Group", "admins")])
    assert (r.error, r.rule) == (Errors.INVALID_PRINCIPAL_TYPE, "delegation-token.renewer-not-user")
    assert h.last.records == () and not h.image.delegation_tokens


def test_disabled_without_a_secret():
    h = harness(secret=None)
    r = create(h)
    assert (r.error, r.rule) == (
        Errors.DELEGATION_TOKEN_AUTH_DISABLED,
        "delegation-token.auth-disabled",
    )
    for answer in (renew(h, b"x" * 64), expire(h, b"x" * 64)):
        assert answer.error is Errors.DELEGATION_TOKEN_AUTH_DISABLED
    assert h.controller.next_token_sweep_ms() is None


def test_an_unauthenticated_caller_may_not_use_tokens(h):
    r = create(h, requester=None)
    assert (r.error, r.rule) == (
        Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        "delegation-token.request-not-allowed",
    )
    made = create(h)
    for answer in (renew(h, made.hmac, requester=None), expire(h, made.hmac, requester=None)):
        assert answer.error is Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_a_metadata_version_below_the_highest_is_unsupported():
    h = harness(metadata_version=11)
    r = create(h)
    assert (r.error, r.rule) == (
        Errors.UNSUPPORTED_VERSION,
        "delegation-token.metadata-version-too-low",
    )


def test_renew_by_the_owner_and_by_a_renewer(h):
    made = create(h, renewers=[("User", "bob")])
    h.advance(1000)
    r = renew(h, made.hmac)
    assert (r.error, r.expiry_timestamp_ms) == (Errors.NONE, h.wall_ms + DAY)
    assert h.image.delegation_tokens[made.token_id].expiration_timestamp == h.wall_ms + DAY
    h.advance(1000)
    r = renew(h, made.hmac, requester="User:bob", period=60_000)  # below the default
    assert r.expiry_timestamp_ms == h.wall_ms + 60_000
    # The other fields are restated unchanged (Kafka's toRecord of the token).
    token = h.image.delegation_tokens[made.token_id]
    assert token.issue_timestamp == made.issue_timestamp_ms and token.renewers == ("User:bob",)


def test_renewal_never_passes_the_max_time(h):
    made = create(h, max_lifetime_ms=DAY + 5000)
    h.advance(10_000)
    r = renew(h, made.hmac)
    assert r.expiry_timestamp_ms == made.max_timestamp_ms


def test_a_stranger_may_neither_renew_nor_expire(h):
    made = create(h, renewers=[("User", "bob")])
    for answer in (renew(h, made.hmac, "User:eve"), expire(h, made.hmac, "User:eve")):
        assert (answer.error, answer.rule) == (
            Errors.DELEGATION_TOKEN_OWNER_MISMATCH,
            "delegation-token.owner-mismatch",
        )
    assert h.last.records == ()


def test_an_unknown_hmac_is_not_found(h):
    create(h)
    wrong = token_hmac("another secret entirely", "nope")
    for answer in (renew(h, wrong), expire(h, wrong), renew(h, b"")):
        assert (answer.error, answer.rule) == (
            Errors.DELEGATION_TOKEN_NOT_FOUND,
            "delegation-token.not-found",
        )


def test_an_expired_token_can_be_neither_renewed_nor_expired(h):
    made = create(h, max_lifetime_ms=5000)
    h.advance(5000)
    assert renew(h, made.hmac).error is Errors.NONE  # at its max time: not yet expired
    h.advance(1)
    for answer in (renew(h, made.hmac), expire(h, made.hmac)):
        assert (answer.error, answer.rule) == (
            Errors.DELEGATION_TOKEN_EXPIRED,
            "delegation-token.expired",
        )


def test_expire_at_once_removes_the_token(h):
    made = create(h)
    r = expire(h, made.hmac, period=-1)
    assert (r.error, r.expiry_timestamp_ms) == (Errors.NONE, -1)  # Kafka answers the period
    assert h.last.records == (RemoveDelegationTokenRecord(token_id=made.token_id),)
    assert made.token_id not in h.image.delegation_tokens
    assert renew(h, made.hmac).error is Errors.DELEGATION_TOKEN_NOT_FOUND


def test_expire_with_a_period_moves_the_expiry_capped_at_max(h):
    made = create(h, max_lifetime_ms=DAY)
    r = expire(h, made.hmac, period=0)
    assert r.expiry_timestamp_ms == h.wall_ms
    assert h.image.delegation_tokens[made.token_id].expiration_timestamp == h.wall_ms
    r = expire(h, made.hmac, period=2 * DAY)
    assert r.expiry_timestamp_ms == made.max_timestamp_ms


def test_the_sweep_removes_expired_tokens_every_interval(h):
    assert h.controller.next_token_sweep_ms() is None  # no token, no sweep
    short = create(h, max_lifetime_ms=1000)
    long = create(h)
    due = h.controller.next_token_sweep_ms()
    assert due == h.now_ms + CHECK
    assert h.controller.maybe_sweep_delegation_tokens(due - 1, h.wall_ms) is None
    h.advance(CHECK)
    result = h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)
    assert result.records == (RemoveDelegationTokenRecord(token_id=short.token_id),)
    h.commit(result.records)
    assert set(h.image.delegation_tokens) == {long.token_id}
    # The next sweep an interval on; the long token goes once past its expiry.
    assert h.controller.next_token_sweep_ms() == h.now_ms + CHECK
    h.advance(DAY)
    result = h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)
    h.commit(result.records)
    assert not h.image.delegation_tokens
    assert h.controller.next_token_sweep_ms() is None


def test_the_sweep_follows_the_monotonic_clock_and_judges_by_the_wall_clock(h):
    made = create(h)
    # An NTP step forward of two days: the sweep is not due any sooner ...
    h.step_wall_clock(2 * DAY)
    assert h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms) is None
    # ... and when it runs, the token is past its expiry by the wall clock.
    h.now_ms += CHECK
    result = h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)
    assert result.records == (RemoveDelegationTokenRecord(token_id=made.token_id),)


def test_the_sweep_stops_at_its_bound_and_runs_again_shortly():
    h = harness()
    for _ in range(MAX_TOKENS_PER_SWEEP + 3):
        create(h, max_lifetime_ms=1)
    h.advance(CHECK)
    first = h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)
    assert len(first.records) == MAX_TOKENS_PER_SWEEP and first.response is True
    h.commit(first.records)
    h.advance(10)
    second = h.controller.maybe_sweep_delegation_tokens(h.now_ms, h.wall_ms)
    assert len(second.records) == 3 and second.response is False


def test_tokens_survive_a_failover_a_snapshot_and_a_replay(h):
    made = create(h, renewers=[("User", "bob")])
    renew(h, made.hmac, "User:bob")
    gone = create(h)
    expire(h, gone.hmac)
    h.new_leader()
    # The new leader finds the token by its HMAC (it derives it from the id).
    assert renew(h, made.hmac).error is Errors.NONE
    assert decode_image(encode_image(h.image)) == h.image
    assert h.replayed().delegation_tokens == h.image.delegation_tokens
    assert set(h.image.delegation_tokens) == {made.token_id}
    assert made.hmac not in encode_image(h.image)


def test_a_leader_with_another_secret_finds_no_token(h):
    made = create(h)
    other = harness(secret="a different secret, on a misconfigured voter", image=h.image)
    assert renew(other, made.hmac).error is Errors.DELEGATION_TOKEN_NOT_FOUND


def _token(token_id="t", owner="User:a", expiry=2, max_ts=3):
    return DelegationTokenRecord(
        owner=owner, requester="User:a", renewers=(), issue_timestamp=1,
        max_timestamp=max_ts, expiration_timestamp=expiry, token_id=token_id,
    )  # fmt: skip


def test_replay_ignores_what_the_controller_never_writes():
    image = apply_records(
        EMPTY_IMAGE,
        [
            RemoveDelegationTokenRecord(token_id="ghost"),
            _token(token_id=""),
            _token(owner="alice"),
            _token(expiry=4, max_ts=3),
            _token(token_id="kept"),
        ],
    )
    assert set(image.delegation_tokens) == {"kept"} and image.ignored_records == 4
    assert "does not exist" in image.ignored_reasons[0]
    assert "after its max time" in image.ignored_reasons[3]


@pytest.mark.parametrize(
    "rows",
    [
        "not an array",
        [["t", "User:a", "User:a", ["User:b"], 1, 3]],  # a field short
        [["", "User:a", "User:a", [], 1, 3, 2]],  # no id
        [["t", "alice", "User:a", [], 1, 3, 2]],  # an owner that is no principal
        [["t", "User:a", "User:a", [], 1, 3, 2], ["t", "User:a", "User:a", [], 1, 3, 2]],
        [["t", "User:a", "User:a", [5], 1, 3, 2]],  # a renewer that is no string
    ],
)
def test_a_malformed_snapshot_of_tokens_is_refused(h, rows):
    create(h)
    obj = orjson.loads(encode_image(h.image))
    obj["delegationTokens"] = rows
    with pytest.raises(DecodeError):
        decode_image(orjson.dumps(obj))


def test_a_token_of_the_last_leader_is_found_after_removals_on_this_one(h):
    """The HMACs of tokens this controller did not make are computed when a
    lookup misses, however many removed tokens' HMACs it keeps."""
    old = create(h)
    h.new_leader()
    for _ in range(3):
        expire(h, create(h).hmac)
    assert renew(h, old.hmac).error is Errors.NONE
    assert renew(h, token_hmac(SECRET, "never made")).error is Errors.DELEGATION_TOKEN_NOT_FOUND
