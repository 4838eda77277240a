"""AlterUserScramCredentials and DescribeUserScramCredentials over HTTP
against a real single-voter node (docs/api-additions.md "SCRAM credentials"):
Kafka's AlterUserScramCredentialsRequestTest and
DescribeUserScramCredentialsRequestTest scenarios, the roles, the 400s, and
the secrets (salt, storedKey, serverKey, the salted password) shown by no
read, no role, no export; only the backup holds them."""

from __future__ import annotations

import base64

import pytest

from api import create_app
from metadata_records.scram import derived_keys, salted_password
from metaquorum.export import run_export
from pipeline.replay_audit import read_records
from pipeline.schema import record_from_row

TOKENS = """\
admin-token admin
broker-token broker
read-token read
"""
ROLES = ("admin-token", "broker-token", "read-token")
SALT = b"1ebac3p7v8fsqkz3p9vps4dcl4"
SALTED = salted_password(b"alice-secret", SALT, 8192, 1)
STORED, SERVER = derived_keys(1, SALTED)
# Every secret, as bytes and as the base64 a JSON answer would carry.
SECRETS = [
    form
    for raw in (SALT, SALTED, STORED, SERVER)
    for form in (base64.b64encode(raw).decode(), raw.hex())
] + [SALT.decode(), "alice-secret"]


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def upsertion(name, mechanism=1, iterations=8192, salt=SALT, salted=SALTED):
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": b64(salt),
        "saltedPassword": b64(salted),
    }


@pytest.fixture(scope="module")
def secured(local, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return create_app(local.node, tokens=str(path))


def alter(local, app, deletions=(), upsertions=(), token="admin-token"):
    body = {"deletions": list(deletions), "upsertions": list(upsertions)}
    r = local.request(app, "POST", "/v1/scram-credentials", json=body, token=token)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["errorCode"], answer["throttleTimeMs"]) == (0, 0)
    return [(x["user"], x["errorName"], x["rule"]) for x in answer["results"]]


def describe(local, app, *users, token="read-token"):
    r = local.request(
        app, "GET", "/v1/scram-credentials", params=[("user", u) for u in users], token=token
    )
    assert r.status_code == 200, r.text
    assert int(r.headers["X-Metadata-Offset"]) >= 0
    return {
        x["user"]: x["errorName"]
        if x["errorCode"]
        else {i["mechanism"]: i["iterations"] for i in x["credentialInfos"]}
        for x in r.json()["results"]
    }


@pytest.fixture(scope="module")
def credentials(local, secured):
    """alice with SCRAM-SHA-256 and SHA-512, bob with SHA-512: the offset before."""
    start = local.node.image.next_offset
    assert alter(local, secured, upsertions=[upsertion("alice")]) == [("alice", "NONE", None)]
    results = alter(
        local, secured, upsertions=[upsertion("alice", 2, 4096), upsertion("bob", 2, 16384)]
    )
    assert results == [("alice", "NONE", None), ("bob", "NONE", None)]
    return start


def test_alter_and_describe(local, secured, credentials):
    assert describe(local, secured) == {"alice": {1: 8192, 2: 4096}, "bob": {2: 16384}}
    assert describe(local, secured, "alice") == {"alice": {1: 8192, 2: 4096}}
    assert describe(local, secured, "alice", "nobody") == {
        "alice": {1: 8192, 2: 4096},
        "nobody": "RESOURCE_NOT_FOUND",
    }
    assert describe(local, secured, "alice", "bob", "bob") == {
        "alice": {1: 8192, 2: 4096},
        "bob": "DUPLICATE_RESOURCE",
    }
    c = local.node.image.scram["alice"][1]
    assert (c.salt, c.stored_key, c.server_key) == (SALT, STORED, SERVER)


def test_refusals_carry_kafka_codes_and_rules(local, secured, credentials):
    results = alter(
        local,
        secured,
        deletions=[{"name": "nobody", "mechanism": 1}, {"name": "x", "mechanism": 9}],
        upsertions=[upsertion("few", iterations=100), upsertion(""), upsertion("x")],
    )
    assert results == [
        ("nobody", "RESOURCE_NOT_FOUND", "scram.credential-not-found"),
        ("x", "UNSUPPORTED_SASL_MECHANISM", "scram.mechanism-unknown"),
        ("few", "UNACCEPTABLE_CREDENTIAL", "scram.iterations-too-few"),
        ("", "UNACCEPTABLE_CREDENTIAL", "scram.user-empty"),
    ]


def test_delete_then_describe(local, secured, credentials):
    alter(local, secured, upsertions=[upsertion("carol")])
    assert alter(local, secured, deletions=[{"name": "carol", "mechanism": 1}]) == [
        ("carol", "NONE", None)
    ]
    assert describe(local, secured, "carol") == {"carol": "RESOURCE_NOT_FOUND"}


@pytest.mark.parametrize("token", ["read-token", "broker-token"])
def test_only_an_admin_alters(local, secured, token):
    r = local.request(
        secured, "POST", "/v1/scram-credentials", json={"upsertions": [upsertion("z")]},
        token=token,
    )  # fmt: skip
    assert r.status_code == 403, r.text
    assert "z" not in local.node.image.scram


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"upsertions": [{**upsertion("a"), "salt": "not base64!"}]}, "upsertions[0].salt"),
        ({"upsertions": [{**upsertion("a"), "mechanism": 300}]}, "upsertions[0].mechanism"),
        ({"upsertions": [{**upsertion("a"), "saltedPassword": 5}]}, "saltedPassword"),
        ({"upsertions": [{**upsertion("a"), "salt": b64(b"s" * 2000)}]}, "upsertions[0].salt"),
        ({"deletions": [{"name": "a", "mechanism": 1}] * 1001}, "deletions"),
        ({"deletions": [{"name": "a" * 2000, "mechanism": 1}]}, "deletions[0].name"),
    ],
)
def test_malformed_bodies_are_400_naming_the_field(local, secured, body, where):
    before = local.node.image.next_offset
    r = local.request(secured, "POST", "/v1/scram-credentials", json=body, token="admin-token")
    assert r.status_code == 400 and r.json()["errorName"] == "INVALID_REQUEST", r.text
    assert where in r.json()["errorMessage"]
    assert local.node.image.next_offset == before


def test_too_many_users_in_one_describe_is_400(local, secured):
    params = [("user", str(i)) for i in range(1001)]
    r = local.request(secured, "GET", "/v1/scram-credentials", params=params, token="read-token")
    assert r.status_code == 400 and "1001 users" in r.json()["errorMessage"], r.text


# ---------------------------------------------------------------- the secrets


def _shown_nowhere(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, secret


@pytest.mark.parametrize("token", ROLES)
def test_no_read_shows_a_secret_to_any_role(local, secured, credentials, token):
    reads = [
        ("/v1/log", {"fromOffset": credentials}),
        ("/v1/snapshot", {}),
        ("/v1/image", {}),
        ("/v1/image/diff", {"from": credentials - 1, "to": local.node.image.last_offset}),
        ("/v1/scram-credentials", {}),
    ]
    if token == "admin-token":
        reads.append(("/v1/log", {"fromOffset": credentials, "includeSensitive": "true"}))
    for path, params in reads:
        r = local.request(secured, "GET", path, params=params, token=token)
        assert r.status_code == 200, (path, r.text)
        _shown_nowhere(r.text)
    log = local.request(
        secured, "GET", "/v1/log", params={"fromOffset": credentials}, token=token
    ).json()["records"]
    scram = [x["data"] for x in log if x["type"] == "USER_SCRAM_CREDENTIAL_RECORD"]
    assert scram and all((d["salt"], d["storedKey"], d["serverKey"]) == ("", "", "") for d in scram)
    assert {(d["name"], d["mechanism"], d["iterations"]) for d in scram} >= {("alice", 1, 8192)}
    image = local.request(secured, "GET", "/v1/image", params={"only": "scram"}, token=token)
    assert {u["user"] for u in image.json()["scram"]} >= {"alice", "bob"}


def test_only_the_backup_holds_them(local, secured, credentials):
    r = local.request(secured, "GET", "/v1/backup", token="admin-token")
    assert r.status_code == 200, r.text
    assert b64(STORED).encode() in r.content and b64(SERVER).encode() in r.content
    assert b64(SALTED).encode() not in r.content  # the controller never kept it


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("include_sensitive", [False, True])
def test_an_export_holds_no_secret(local, credentials, tmp_path, include_sensitive, fmt):
    out = tmp_path / "export"
    run_export(
        str(out), data_dir=local.config.data_dir, fmt=fmt, quiet=True,
        include_uncommitted=True, include_sensitive=include_sensitive,
    )  # fmt: skip
    rows = [r for r in read_records(str(out)) if r["type"] == "USER_SCRAM_CREDENTIAL_RECORD"]
    records = [record_from_row(r) for r in rows]
    assert {(r.name, r.mechanism, r.iterations) for r in records} >= {("alice", 1, 8192)}
    assert all((r.salt, r.stored_key, r.server_key) == (b"", b"", b"") for r in records)
    for path in out.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            for raw in (SALT, SALTED, STORED, SERVER):
                assert raw not in content and b64(raw).encode() not in content


def test_the_spark_schema_reads_the_binary_columns():
    """The audit reads an export through pipeline/spark.py's schema: the
    SCRAM records' binary columns are Spark binaries (base64 in JSONL, as
    Spark's JSON reader takes them)."""
    from pyspark.sql import types as T

    from pipeline.spark import spark_schema

    fields = {f.name: f.dataType for f in spark_schema().fields}
    for column in ("salt", "stored_key", "server_key"):
        assert fields[column] == T.BinaryType()
    assert fields["mechanism"] == T.ByteType() and fields["iterations"] == T.IntegerType()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_the_spark_audit_reads_an_export_with_scram_records(
    spark, local, credentials, tmp_path, fmt
):
    """An export holding SCRAM records, in both formats, audits clean."""
    from pipeline.run import audit_export

    out = tmp_path / "export"
    run_export(
        str(out), data_dir=local.config.data_dir, fmt=fmt, quiet=True, include_uncommitted=True
    )
    result = audit_export(spark, str(out), str(tmp_path / "audit"), echo=lambda _: None)
    assert result.violations == 0, result.counts
