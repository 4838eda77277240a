"""AlterUserScramCredentials in the pure controller, after Kafka's
AlterUserScramCredentialsRequestTest (nothing, the same user twice, an empty
user, unknown mechanisms, too few / too many iterations, deleting what does
not exist, alter-and-describe, metadata.version too low) and
ScramControlManager's rules; the key derivation against RFC 7677's example;
the image after a failover, a snapshot and a replay."""

import base64
import hashlib
import hmac

import pytest

from controller.messages import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from metadata_records.delta import apply_records
from metadata_records.errors import Errors
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from metadata_records.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    derived_keys,
    random_salt,
    salted_password,
)
from metadata_records.snapshot import decode_image, encode_image
from tests.harness import ControllerHarness

SHA256, SHA512, UNKNOWN = 1, 2, 0
SALTED = b"saltedPassword"  # as Kafka's test sends it: any bytes will do
SALT = b"salt"


@pytest.fixture
def h():
    return ControllerHarness()


def delete(name, mechanism=SHA256):
    return ScramCredentialDeletion(name, mechanism)


def upsert(name, mechanism=SHA256, iterations=4096, salted=SALTED):
    return ScramCredentialUpsertion(name, mechanism, iterations, SALT, salted)


def alter(h, deletions=(), upsertions=()):
    response = h.run(AlterUserScramCredentialsRequest(tuple(deletions), tuple(upsertions)))
    return [(r.user, r.error, r.error_message) for r in response.results]


def described(h):
    """What DescribeUserScramCredentials shows: user -> {mechanism: iterations}."""
    return {
        user: {m: c.iterations for m, c in creds.items()} for user, creds in h.image.scram.items()
    }


def test_alter_nothing(h):
    assert alter(h) == []
    assert h.last.records == ()


def test_alter_same_thing_twice(h):
    assert alter(h, upsertions=[upsert("user1"), upsert("user2")]) == [
        ("user1", Errors.NONE, None),
        ("user2", Errors.NONE, None),
    ]
    twice = "A user credential cannot be altered twice in the same request"
    for deletions, upsertions in (
        ([delete("user1"), delete("user1")], [upsert("user2"), upsert("user2")]),
        ([delete("user1"), delete("user2")], [upsert("user1"), upsert("user2")]),
    ):
        results = alter(h, deletions, upsertions)
        assert sorted(results) == [
            ("user1", Errors.DUPLICATE_RESOURCE, twice),
            ("user2", Errors.DUPLICATE_RESOURCE, twice),
        ]
        assert h.last.records == ()


def test_alter_empty_user(h):
    for deletions, upsertions in (
        ([delete("")], []),
        ([], [upsert("")]),
        ([delete(""), delete("")], [upsert("")]),
    ):
        assert alter(h, deletions, upsertions) == [
            ("", Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        ]


def test_alter_unknown_mechanism(h):
    results = alter(
        h,
        [delete("user1", UNKNOWN), delete("user1"), delete("user2", 10)],
        [
            upsert("user4", UNKNOWN, 8192),
            upsert("user4", SHA256, 8192),
            upsert("user5", 10, 8192),
            upsert("user6", UNKNOWN, 8192),
        ],
    )
    assert len(results) == 5
    assert {user for user, _, _ in results} == {"user1", "user2", "user4", "user5", "user6"}
    assert {(e, m) for _, e, m in results} == {
        (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    }


@pytest.mark.parametrize(
    ("iterations", "message"),
    [(1, "Too few iterations"), (MIN_ITERATIONS - 1, "Too few iterations"),
     (MAX_ITERATIONS + 1, "Too many iterations"), (2**31 - 1, "Too many iterations")],
)  # fmt: skip
def test_iterations_out_of_bounds(h, iterations, message):
    assert alter(h, upsertions=[upsert("user1", iterations=iterations)]) == [
        ("user1", Errors.UNACCEPTABLE_CREDENTIAL, message)
    ]
    assert h.image.scram == {}


@pytest.mark.parametrize("iterations", [MIN_ITERATIONS, MAX_ITERATIONS])
def test_iterations_at_the_bounds(h, iterations):
    assert alter(h, upsertions=[upsert("user1", iterations=iterations)])[0][1] is Errors.NONE


def test_delete_something_that_does_not_exist(h):
    assert alter(h, [delete("user1")]) == [
        (
            "user1",
            Errors.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        )
    ]
    alter(h, upsertions=[upsert("user1", SHA512)])
    assert alter(h, [delete("user1", SHA256)])[0][1] is Errors.RESOURCE_NOT_FOUND


def test_an_empty_salted_password_is_refused_with_a_reason(h):
    [(user, error, message)] = alter(h, upsertions=[upsert("user1", salted=b"")])
    assert (user, error) == ("user1", Errors.UNACCEPTABLE_CREDENTIAL)
    assert "salted password" in message


def test_alter_and_describe(h):
    user1, user2, user3 = "user1", "user2", "user3@user3.com"
    assert alter(h, upsertions=[upsert(user1, SHA256, 4096)]) == [(user1, Errors.NONE, None)]
    results = alter(h, upsertions=[upsert(u, SHA512, 8192) for u in (user1, user2, user3)])
    assert results == [(u, Errors.NONE, None) for u in (user1, user2, user3)]
    assert described(h) == {
        user1: {SHA256: 4096, SHA512: 8192},
        user2: {SHA512: 8192},
        user3: {SHA512: 8192},
    }
    assert alter(h, [delete(user1, SHA256), delete(user2, SHA512)]) == [
        (user1, Errors.NONE, None),
        (user2, Errors.NONE, None),
    ]
    assert described(h) == {user1: {SHA512: 8192}, user3: {SHA512: 8192}}
    alter(h, [delete(user1, SHA512), delete(user3, SHA512)])
    assert described(h) == {}
    assert h.replayed().scram == {}


def test_answers_are_deletions_then_upsertions_then_refusals(h):
    alter(h, upsertions=[upsert("d")])
    results = alter(h, [delete("x"), delete("d")], [upsert("u"), upsert("", SHA256)])
    assert [(u, e) for u, e, _ in results] == [
        ("d", Errors.NONE),
        ("u", Errors.NONE),
        ("x", Errors.RESOURCE_NOT_FOUND),
        ("", Errors.UNACCEPTABLE_CREDENTIAL),
    ]
    assert [type(r) for r in h.last.records] == [
        RemoveUserScramCredentialRecord,
        UserScramCredentialRecord,
    ]


def test_the_controller_stores_the_derived_keys_never_the_salted_password(h):
    salt = random_salt()
    salted = salted_password(b"pencil", salt, 4096, SHA256)
    h.run(
        AlterUserScramCredentialsRequest(
            (), (ScramCredentialUpsertion("alice", SHA256, 4096, salt, salted),)
        )
    )
    [record] = h.last.records
    stored, server = derived_keys(SHA256, salted)
    assert record == UserScramCredentialRecord(
        name="alice", mechanism=SHA256, salt=salt, stored_key=stored, server_key=server,
        iterations=4096,
    )  # fmt: skip
    assert salted not in repr(h.log).encode() and b"pencil" not in repr(h.log).encode()
    assert "redacted" in repr(record) and repr(salt)[2:-1] not in repr(record)


def test_metadata_version_too_low():
    h = ControllerHarness(metadata_version=10)  # 3.5-IV1
    assert alter(h, [delete("user0")], [upsert("user1", SHA256, 8192)]) == [
        (
            "user0",
            Errors.UNSUPPORTED_VERSION,
            "The current metadata.version does not support SCRAM",
        ),
        (
            "user1",
            Errors.UNSUPPORTED_VERSION,
            "The current metadata.version does not support SCRAM",
        ),
    ]
    assert (
        ControllerHarness(metadata_version=11)
        .run(AlterUserScramCredentialsRequest((), (upsert("user1"),)))
        .results[0]
        .error
        is Errors.NONE
    )


def test_a_new_leader_a_snapshot_and_a_replay_hold_the_same_credentials(h):
    alter(h, upsertions=[upsert("alice", SHA256), upsert("bob", SHA512, 8192)])
    h.new_leader()
    assert alter(h, [delete("alice")]) == [("alice", Errors.NONE, None)]
    alter(h, upsertions=[upsert("alice", SHA512, 16384)])
    assert decode_image(encode_image(h.image)) == h.image
    assert h.replayed() == h.image
    assert described(h) == {"alice": {SHA512: 16384}, "bob": {SHA512: 8192}}


def test_replay_ignores_what_the_controller_never_writes():
    image = apply_records(
        EMPTY_IMAGE,
        [
            RemoveUserScramCredentialRecord(name="ghost", mechanism=SHA256),
            UserScramCredentialRecord(
                name="", mechanism=SHA256, salt=b"", stored_key=b"", server_key=b"", iterations=1
            ),
            UserScramCredentialRecord(
                name="a", mechanism=9, salt=b"", stored_key=b"", server_key=b"", iterations=1
            ),
        ],
    )
    assert image.scram == {} and image.ignored_records == 3
    assert "does not exist" in image.ignored_reasons[0]


def test_keys_match_rfc_7677():
    """RFC 7677's SCRAM-SHA-256 exchange (user "user", password "pencil"):
    the client proof and server signature computed from the keys the
    controller derives are the RFC's, so a SCRAM server holding them
    authenticates that client."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = salted_password(b"pencil", salt, 4096, SHA256)
    stored, server = derived_keys(SHA256, salted)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = (
        "n=user,r=rOprNGfwEbeRWgbNEkqO,"
        f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        f"c=biws,r={nonce}"
    ).encode()
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert hashlib.sha256(client_key).digest() == stored
    signature = hmac.new(stored, auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_signature = hmac.new(server, auth, "sha256").digest()
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_snapshot_records_restate_every_credential(h):
    """GET /v1/snapshot's records (api/reads.snapshot_records) rebuild every
    credential, secrets included (shown to a reader only redacted)."""
    from api.reads import snapshot_records

    alter(h, upsertions=[upsert("alice", SHA256), upsert("bob", SHA512, 8192)])
    alter(h, upsertions=[upsert("alice", SHA512, 16384)])
    rebuilt = apply_records(EMPTY_IMAGE, snapshot_records(h.image))
    assert rebuilt.scram == h.image.scram
