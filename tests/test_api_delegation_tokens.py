"""Delegation tokens over HTTP against a real single-voter node with a
secret (docs/api-additions.md "Delegation tokens"): create, renew and
expire by the admin role, each caller its own Kafka principal
(``User:token/line-N``); Describe showing each role what Kafka would; the
400s, the 403s, an unauthenticated node refusing tokens; the HMAC in no
record, snapshot or export."""

from __future__ import annotations

import base64

import pytest

from api import create_app
from metadata_records.delegation_tokens import token_hmac
from metaquorum.export import run_export
from pipeline.replay_audit import read_records
from tests.local_node import LocalNode

SECRET = "delegation-token-secret-for-the-api-tests"
TOKENS = """\
admin-token admin
second-admin admin
read-token read
"""
OPS, SECOND, READER = "token/line-1", "token/line-2", "token/line-3"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    local = LocalNode(str(tmp_path_factory.mktemp("dt")), delegation_token_secret=SECRET)
    try:
        local.wait_active()
        yield local
    finally:
        local.close()


@pytest.fixture(scope="module")
def app(node, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return create_app(node.node, tokens=str(path), delegation_token_secret=SECRET)


def post(node, app, path, body, token="admin-token"):
    r = node.request(app, "POST", f"/v1/delegation-tokens{path}", json=body, token=token)
    assert r.status_code == 200, r.text
    return r.json()


def create(node, app, token="admin-token", **body):
    return post(node, app, "", body, token)


def describe(node, app, token="admin-token", owners=()):
    r = node.request(
        app, "GET", "/v1/delegation-tokens", params=[("owner", o) for o in owners], token=token
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["errorName"] == "NONE", answer
    return {t["tokenId"]: t for t in answer["tokens"]}


def test_create_renew_expire_and_describe(node, app):
    start = node.node.image.next_offset
    made = create(node, app, renewers=[{"principalType": "User", "principalName": READER}])
    assert made["errorName"] == "NONE" and made["rule"] is None, made
    assert (made["principalType"], made["principalName"]) == ("User", OPS)
    assert made["tokenRequesterPrincipalName"] == OPS
    hmac = base64.b64decode(made["hmac"])
    assert hmac == token_hmac(SECRET, made["tokenId"])
    assert made["expiryTimestampMs"] - made["issueTimestampMs"] == 24 * 3600 * 1000
    assert node.node.image.next_offset == start + 1

    renewed = post(node, app, "/renew", {"hmac": made["hmac"], "renewPeriodMs": 60_000})
    assert renewed["errorName"] == "NONE", renewed
    assert renewed["expiryTimestampMs"] < made["expiryTimestampMs"]

    # Another admin is neither owner nor renewer: refused, nothing written.
    before = node.node.image.next_offset
    stranger = post(node, app, "/renew", {"hmac": made["hmac"]}, token="second-admin")
    assert (stranger["errorName"], stranger["rule"]) == (
        "DELEGATION_TOKEN_OWNER_MISMATCH",
        "delegation-token.owner-mismatch",
    )
    assert node.node.image.next_offset == before

    # The admin sees every token; the reader only the one it renews; the other admin all.
    assert made["tokenId"] in describe(node, app)
    seen = describe(node, app, token="read-token")
    assert list(seen) == [made["tokenId"]]
    assert seen[made["tokenId"]]["hmac"] == made["hmac"]
    assert seen[made["tokenId"]]["renewers"] == [{"principalType": "User", "principalName": READER}]
    assert describe(node, app, owners=["User:nobody"]) == {}
    assert made["tokenId"] in describe(node, app, owners=[f"User:{READER}"])

    gone = post(node, app, "/expire", {"hmac": made["hmac"], "expiryTimePeriodMs": -1})
    assert (gone["errorName"], gone["expiryTimestampMs"]) == ("NONE", -1)
    assert made["tokenId"] not in describe(node, app)
    again = post(node, app, "/renew", {"hmac": made["hmac"]})
    assert again["errorName"] == "DELEGATION_TOKEN_NOT_FOUND"


def test_a_reader_sees_no_token_it_neither_owns_nor_renews(node, app):
    made = create(node, app, ownerPrincipalType="User", ownerPrincipalName="alice")
    assert made["principalName"] == "alice"
    assert made["tokenId"] not in describe(node, app, token="read-token")
    assert describe(node, app, token="second-admin")[made["tokenId"]]["principalName"] == "alice"


def test_a_renewer_that_is_not_a_user_is_refused(node, app):
    before = node.node.image.next_offset
    refused = create(node, app, renewers=[{"principalType": "Group", "principalName": "g"}])
    assert (refused["errorName"], refused["rule"], refused["hmac"]) == (
        "INVALID_PRINCIPAL_TYPE",
        "delegation-token.renewer-not-user",
        "",
    )
    assert node.node.image.next_offset == before


@pytest.mark.parametrize("token", ["read-token"])
@pytest.mark.parametrize("path", ["", "/renew", "/expire"])
def test_only_an_admin_writes(node, app, token, path):
    body = {} if not path else {"hmac": base64.b64encode(b"x" * 64).decode()}
    r = node.request(app, "POST", f"/v1/delegation-tokens{path}", json=body, token=token)
    assert r.status_code == 403, r.text


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/renew", {"hmac": "not base64!"}, "hmac"),
        ("/renew", {"hmac": ""}, "hmac"),
        ("/renew", {"hmac": base64.b64encode(b"x" * 200).decode()}, "hmac"),
        ("/expire", {"hmac": "AAAA", "expiryTimePeriodMs": 1.5}, "expiryTimePeriodMs"),
        ("", {"renewers": [{"principalType": "User", "principalName": "a"}] * 101}, "renewers"),
        ("", {"renewers": [{"principalType": "User"}]}, "principalName"),
        ("", {"maxLifetimeMs": "1"}, "maxLifetimeMs"),
        ("", {"renewers": [{"principalType": "Us:er", "principalName": "a"}]}, "principalType"),
        ("", {"ownerPrincipalType": "", "ownerPrincipalName": "a"}, "ownerPrincipalType"),
    ],
)
def test_malformed_bodies_are_400_naming_the_field(node, app, path, body, where):
    before = node.node.image.next_offset
    r = node.request(app, "POST", f"/v1/delegation-tokens{path}", json=body, token="admin-token")
    assert r.status_code == 400 and r.json()["errorName"] == "INVALID_REQUEST", r.text
    assert where in r.json()["errorMessage"]
    assert node.node.image.next_offset == before


def test_a_malformed_owner_filter_is_400(node, app):
    r = node.request(
        app, "GET", "/v1/delegation-tokens", params={"owner": "alice"}, token="read-token"
    )
    assert r.status_code == 400 and "type:name" in r.json()["errorMessage"], r.text


def test_a_node_without_auth_refuses_tokens(node):
    anonymous = create_app(node.node, delegation_token_secret=SECRET)
    before = node.node.image.next_offset
    refused = create(node, anonymous)
    assert (refused["errorName"], refused["rule"]) == (
        "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
        "delegation-token.request-not-allowed",
    )
    r = node.request(anonymous, "GET", "/v1/delegation-tokens")
    assert r.json()["errorName"] == "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    assert node.node.image.next_offset == before


def test_a_node_without_the_secret_cannot_describe(node, tmp_path):
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    plain = create_app(node.node, tokens=str(path))
    r = node.request(plain, "GET", "/v1/delegation-tokens", token="admin-token")
    assert (r.json()["errorName"], r.json()["rule"]) == (
        "DELEGATION_TOKEN_AUTH_DISABLED",
        "delegation-token.auth-disabled",
    )


def test_the_hmac_is_in_no_read_and_no_export(node, app, tmp_path):
    made = create(node, app)
    secrets = [made["hmac"], base64.b64decode(made["hmac"]).hex()]
    start = node.node.image.next_offset - 1
    for path, params in [
        ("/v1/log", {"fromOffset": start, "includeSensitive": "true"}),
        ("/v1/snapshot", {"includeSensitive": "true"}),
        ("/v1/image", {}),
    ]:
        r = node.request(app, "GET", path, params=params, token="admin-token")
        assert r.status_code == 200, (path, r.text)
        assert not any(s in r.text for s in secrets), path
    log = node.request(app, "GET", "/v1/log", params={"fromOffset": start}, token="read-token")
    (record,) = [x["data"] for x in log.json()["records"] if x["type"] == "DELEGATION_TOKEN_RECORD"]
    assert record["tokenId"] == made["tokenId"] and record["owner"] == f"User:{OPS}"
    out = tmp_path / "export"
    run_export(
        str(out), data_dir=node.config.data_dir, fmt="jsonl", quiet=True,
        include_uncommitted=True, include_sensitive=True,
    )  # fmt: skip
    rows = [r for r in read_records(str(out)) if r["type"] == "DELEGATION_TOKEN_RECORD"]
    assert made["tokenId"] in {r["token_id"] for r in rows}
    raw = base64.b64decode(made["hmac"])
    for path in out.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert raw not in content and made["hmac"].encode() not in content


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_the_spark_audit_reads_an_export_with_token_records(spark, node, app, tmp_path, fmt):
    """An export holding token records (renewers: a string array), in both
    formats, audits clean."""
    from pipeline.run import audit_export

    made = create(node, app, renewers=[{"principalType": "User", "principalName": READER}])
    post(node, app, "/expire", {"hmac": made["hmac"]})
    out = tmp_path / "export"
    run_export(
        str(out), data_dir=node.config.data_dir, fmt=fmt, quiet=True, include_uncommitted=True
    )
    result = audit_export(spark, str(out), str(tmp_path / "audit"), echo=lambda _: None)
    assert result.violations == 0, result.counts
