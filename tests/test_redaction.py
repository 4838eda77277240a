"""No secret leaves the controller (issue 40): what each role is shown of a
sensitive config on every surface that shows config values, against a real
single-voter node and the real app (docs/security.md "Who sees what").

Sensitive: a PASSWORD, or a config whose type this service does not know
(metadata_records.config_schema.is_sensitive). DescribeConfigs shows every
role null; the log, its long-poll and the snapshot show the value to admins
and brokers and ``(redacted)`` to the read role; the export writes the marker
unless an admin asks for the values."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from api import create_app
from brokers.client import MetaquorumClient
from brokers.metadata_cache import LogFollower
from metadata_records.records import ConfigRecord, NoOpRecord
from metadata_records.redaction import REDACTED, is_sensitive_record, redacted
from metaquorum.export import run_export
from pipeline.replay_audit import read_rows

TOKENS = """\
admin-token admin
broker-token broker
broker-token-1 broker 1
read-token read
"""
ROLES = ("admin-token", "broker-token", "broker-token-1", "read-token")
SEES = {"admin-token": True, "broker-token": True, "broker-token-1": True, "read-token": False}

# Every value set here holds SECRET; each is sensitive but num.io.threads.
SECRET = "hunter2"
BROKER_ONE = {
    "ssl.keystore.password": f"{SECRET}-keystore",
    "listener.name.internal.sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
        f'password="{SECRET}-jaas";'
    ),
    "listener.name.internal.ssl.key.password": f"{SECRET}-key",
    "my.plugin.token": f"{SECRET}-plugin",  # unknown type
    "num.io.threads": "16",
}
CLUSTER = {"ssl.truststore.password": f"{SECRET}-truststore"}


@pytest.fixture(scope="module")
def secured(local, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return create_app(local.node, tokens=str(path))


@pytest.fixture(scope="module")
def secrets(local, secured):
    """The configs above, set by an admin: the offsets of their records."""
    start = local.node.image.next_offset
    body = {
        "resources": [
            {
                "resourceType": 4,
                "resourceName": name,
                "configs": [{"name": n, "configOperation": 0, "value": v} for n, v in set_.items()],
            }
            for name, set_ in (("1", BROKER_ONE), ("", CLUSTER))
        ]
    }
    r = local.request(secured, "POST", "/v1/configs", token="admin-token", json=body)
    assert [x["errorName"] for x in r.json()["responses"]] == ["NONE", "NONE"], r.text
    return start


def config_values(records) -> dict[tuple[str, str], str | None]:
    return {
        (r["data"]["resourceName"], r["data"]["name"]): r["data"]["value"]
        for r in records
        if r["type"] == "CONFIG_RECORD" and r["data"]["resourceType"] == 4
    }


def expected(sees: bool) -> dict[tuple[str, str], str]:
    out = {}
    for resource, configs in (("1", BROKER_ONE), ("", CLUSTER)):
        for name, value in configs.items():
            sensitive = name != "num.io.threads"
            out[(resource, name)] = value if sees or not sensitive else REDACTED
    return out


def ndjson(body: bytes) -> list[dict]:
    return [orjson.loads(line) for line in body.splitlines() if line]


# ---------------------------------------------------------------- the finding


def test_issue_40_the_finding_no_longer_reproduces(local, secured, secrets, tmp_path):
    """Before: a read or broker token got ssl.keystore.password back from
    DescribeConfigs with isSensitive false; a read token read it in clear in
    the log; the export held it."""
    for token in ("read-token", "broker-token-1"):
        r = local.request(secured, "GET", "/v1/configs/brokers/1", token=token)
        entry = {c["name"]: c for c in r.json()["configs"]}["ssl.keystore.password"]
        assert (entry["value"], entry["isSensitive"]) == (None, True), token
        assert SECRET not in r.text
    r = local.request(secured, "GET", "/v1/log", token="read-token", params={"fromOffset": secrets})
    assert r.status_code == 200 and SECRET not in r.text
    assert config_values(r.json()["records"])[("1", "ssl.keystore.password")] == REDACTED
    out = tmp_path / "export"
    run_export(str(out), data_dir=local.config.data_dir, fmt="jsonl", quiet=True,
               include_uncommitted=True)  # fmt: skip
    assert SECRET not in "".join(p.read_text() for p in out.rglob("*.jsonl"))


# ---------------------------------------------------------------- DescribeConfigs


@pytest.mark.parametrize("token", ROLES)
def test_describe_configs_shows_no_role_a_sensitive_value(local, secured, secrets, token):
    """Kafka's ConfigHelper: value null, isSensitive true, to every role,
    synonyms included."""
    for path in ("brokers/1", "cluster"):
        r = local.request(
            secured, "GET", f"/v1/configs/{path}", token=token, params={"includeSynonyms": "true"}
        )
        assert r.status_code == 200, r.text
        assert SECRET not in r.text, (token, path)
        configs = {c["name"]: c for c in r.json()["configs"]}
        for name in CLUSTER if path == "cluster" else {**BROKER_ONE, **CLUSTER}:
            c = configs[name]
            if name == "num.io.threads":
                assert (c["value"], c["isSensitive"]) == ("16", False)
                continue
            assert (c["value"], c["isSensitive"]) == (None, True), (path, name)
            assert c["synonyms"] and all(s["value"] is None for s in c["synonyms"])
    types = {c["name"]: c["configTypeName"] for c in r.json()["configs"]}
    assert types["ssl.truststore.password"] == "PASSWORD"


def test_describe_configs_with_auth_off_shows_null_too(local, secrets):
    r = local.request(create_app(local.node), "GET", "/v1/configs/brokers/1")
    configs = {c["name"]: c for c in r.json()["configs"]}
    assert configs["listener.name.internal.sasl.jaas.config"]["configTypeName"] == "PASSWORD"
    assert SECRET not in r.text


# ---------------------------------------------------------------- the log and the snapshot


@pytest.mark.parametrize("token", ROLES)
def test_the_log_shows_the_values_to_admins_and_brokers_and_the_marker_to_readers(
    local, secured, secrets, token
):
    params = {"fromOffset": secrets}
    r = local.request(secured, "GET", "/v1/log", token=token, params=params)
    assert r.status_code == 200, r.text
    assert config_values(r.json()["records"]) == expected(SEES[token])
    lines = local.request(
        secured, "GET", "/v1/log", token=token, params=params,
        headers={"Accept": "application/x-ndjson"},
    )  # fmt: skip
    assert ndjson(lines.content) == r.json()["records"]
    assert (SECRET in r.text) is SEES[token]


@pytest.mark.parametrize("token", ROLES)
def test_the_snapshot_shows_what_the_log_shows(local, secured, secrets, token):
    r = local.request(secured, "GET", "/v1/snapshot", token=token)
    assert r.status_code == 200, r.text
    assert config_values(r.json()["records"]) == expected(SEES[token])
    lines = local.request(
        secured, "GET", "/v1/snapshot", token=token, headers={"Accept": "application/x-ndjson"}
    )
    assert ndjson(lines.content) == r.json()["records"]


def test_the_long_poll_redacts_what_arrives_while_it_waits(local, secured, secrets):
    """A read caller waiting at the log's end is woken by a password set
    again and shown the marker; a broker waiting with it is shown the value."""
    app = secured
    at = local.node.image.next_offset
    name = "listener.name.internal.ssl.key.password"  # the same value: the others' checks hold

    async def scenario():
        async def wait(token):
            async with local.client(app, token) as c:
                return await c.get("/v1/log", params={"fromOffset": at, "waitMs": 10_000})

        readers = [asyncio.create_task(wait(t)) for t in ("read-token", "broker-token-1")]
        await asyncio.sleep(0.1)
        async with local.client(app, "admin-token") as c:
            body = {"resources": [{"resourceType": 4, "resourceName": "1", "configs": [
                {"name": name, "configOperation": 0, "value": BROKER_ONE[name]}]}]}  # fmt: skip
            assert (await c.post("/v1/configs", json=body)).status_code == 200
        return await asyncio.gather(*readers)

    read, broker = local.run(scenario())
    assert config_values(read.json()["records"]) == {("1", name): REDACTED}
    assert config_values(broker.json()["records"]) == {("1", name): BROKER_ONE[name]}


def test_auth_off_every_caller_is_an_admin_and_sees_the_values(local, secrets):
    app = create_app(local.node)
    r = local.request(app, "GET", "/v1/log", params={"fromOffset": secrets})
    assert config_values(r.json()["records"]) == expected(True)
    r = local.request(
        app, "GET", "/v1/log", params={"fromOffset": secrets, "includeSensitive": "false"}
    )
    assert config_values(r.json()["records"]) == expected(False)


@pytest.mark.parametrize("path", ["/v1/log", "/v1/snapshot"])
def test_include_sensitive_true_is_for_admins_and_false_is_for_anyone(
    local, secured, secrets, path
):
    params = {"fromOffset": secrets}
    for token in ROLES:
        shown = local.request(secured, "GET", path, token=token,
                              params={**params, "includeSensitive": "false"})  # fmt: skip
        assert config_values(shown.json()["records"]) == expected(False), token
        asked = local.request(secured, "GET", path, token=token,
                              params={**params, "includeSensitive": "true"})  # fmt: skip
        if token == "admin-token":
            assert config_values(asked.json()["records"]) == expected(True)
        else:
            assert asked.status_code == 403, (token, asked.text)
            assert "includeSensitive=true needs the admin role" in asked.json()["errorMessage"]


# ---------------------------------------------------------------- a broker's cache


@pytest.mark.parametrize("token, value", [("broker-token-1", BROKER_ONE["ssl.keystore.password"]),
                                          ("read-token", REDACTED)])  # fmt: skip
def test_a_broker_cache_following_the_log_holds_what_its_token_sees(
    local, secured, secrets, token, value
):
    """A broker applies its keystore password from the log (brokers/metadata_cache.py),
    through its broker token; a read token's cache holds the marker."""

    async def follow():
        async with local.client(secured, token) as http:
            follower = LogFollower(MetaquorumClient([str(http.base_url)], http=http), wait_ms=0)
            while follower.cache.next_offset < local.node.image.next_offset:
                await follower.poll_once()
            return follower.cache.image

    image = local.run(follow())
    assert image.broker_configs["1"]["ssl.keystore.password"] == value
    assert image.broker_configs["1"]["num.io.threads"] == "16"


# ---------------------------------------------------------------- writes and the export


def test_a_refused_write_does_not_echo_a_sensitive_value(local, secured):
    for value in (12345678, "hunter2" * 1000):
        body = {"resources": [{"resourceType": 4, "resourceName": "1", "configs": [
            {"name": "ssl.keystore.password", "configOperation": 0, "value": value}]}]}  # fmt: skip
        r = local.request(secured, "POST", "/v1/configs", token="admin-token", json=body)
        assert r.status_code == 400, r.text
        assert "resources[0].configs[0].value" in r.json()["errorMessage"]
        assert "12345678" not in r.text and SECRET not in r.text


def test_a_data_dir_export_writes_the_marker_unless_asked(local, secrets, tmp_path):
    def exported(**kw):
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        run_export(str(out), data_dir=local.config.data_dir, fmt="jsonl", quiet=True,
                   include_uncommitted=True, **kw)  # fmt: skip
        return list(read_rows(str(out))), "".join(p.read_text() for p in out.rglob("*.jsonl"))

    plain, text = exported()
    assert SECRET not in text and REDACTED in text
    full, text = exported(include_sensitive=True)
    assert BROKER_ONE["ssl.keystore.password"] in text
    assert len(plain) == len(full)


def test_redaction_keeps_deletions_and_other_records():
    password = ConfigRecord(resource_type=4, resource_name="1", name="ssl.key.password", value="x")
    assert redacted(password).value == REDACTED and password.value == "x"
    gone = ConfigRecord(resource_type=4, resource_name="1", name="ssl.key.password", value=None)
    threads = ConfigRecord(resource_type=4, resource_name="1", name="num.io.threads", value="8")
    topic = ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1")
    for kept in (gone, threads, topic, NoOpRecord()):
        assert redacted(kept) is kept and not is_sensitive_record(kept)


def test_scram_secrets_are_hidden_from_everyone():
    """A UserScramCredentialRecord keeps its user, mechanism and iterations;
    its salt and keys are empty whether or not the reader sees config values
    (Kafka's RecordRedactor), and the record still decodes and replays."""
    from metadata_records.codec import decode_record, encode_record
    from metadata_records.records import UserScramCredentialRecord

    record = UserScramCredentialRecord(
        name="alice", mechanism=1, salt=b"s", stored_key=b"k" * 32, server_key=b"v" * 32,
        iterations=8192,
    )  # fmt: skip
    for config_values in (False, True):
        shown = redacted(record, config_values)
        assert (shown.salt, shown.stored_key, shown.server_key) == (b"", b"", b"")
        assert (shown.name, shown.mechanism, shown.iterations) == ("alice", 1, 8192)
        assert decode_record(encode_record(shown)) == shown
    assert record.stored_key == b"k" * 32  # the original is untouched
