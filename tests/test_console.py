"""The web console's server side (api/routes/console.py, api/console_session.py)
on the real app: signing in gives a read-only cookie that GETs and never
writes, nothing about the cluster without a credential, a strict CSP on every
page, the assets are package files, the data pages page and count. The
browser side is tests/test_console_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api import console_session, create_app
from api.auth import parse_tokens
from api.routes import console

from .local_node import registration_body

TOKENS = """\
ops.admin-secret admin
read-token read
"""


@pytest.fixture(scope="module")
def secured(local):
    return create_app(local.node, tokens=parse_tokens(TOKENS))


def sign_in(local, app, token: str) -> str:
    r = local.request(app, "POST", "/ui/login", token=token)
    assert r.status_code == 200, r.text
    set_cookie = r.headers["set-cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie, set_cookie
    assert "Secure" not in set_cookie  # plain HTTP here; Secure under TLS
    return set_cookie.split(";", 1)[0]  # "mq_console=..."


def test_a_session_reads_as_the_read_role_and_never_writes(local, secured):
    cookie = sign_in(local, secured, "ops.admin-secret")
    assert "admin-secret" not in cookie  # the cookie holds no secret
    r = local.request(secured, "GET", "/v1/brokers", headers={"Cookie": cookie})
    assert r.status_code == 200, r.text
    r = local.request(secured, "GET", "/ui/brokers", headers={"Cookie": cookie})
    assert r.status_code == 200 and "<main" in r.text
    # An admin's cookie is a reader: sensitive values stay hidden, and any
    # write is as if no credential came (a cross-site form gains nothing).
    before = local.node.image.next_offset
    body = {"topics": [{"name": "by-cookie", "numPartitions": 1, "replicationFactor": 1}]}
    r = local.request(secured, "POST", "/v1/topics", headers={"Cookie": cookie}, json=body)
    assert r.status_code == 401, r.text
    assert local.node.image.next_offset == before
    r = local.request(secured, "GET", "/v1/log?includeSensitive=true", headers={"Cookie": cookie})
    assert r.status_code == 403, r.text


def test_a_forged_expired_or_revoked_cookie_is_no_credential(local, secured):
    cookie = sign_in(local, secured, "read-token").split("=", 1)[1]
    name, now = console_session.token_name(cookie), 1e12
    assert name is not None
    v, part, expiry, mac = cookie.split(".")
    forged = [
        f"{v}.{part}.{int(expiry) + 3600}.{mac}",  # a later expiry, same MAC
        f"{v}.{part}.{expiry}.{mac[:-2]}AA",
        console_session.issue(b"not the stored key", name, now / 1000),
        "v1.x.1.y",
        "garbage",
    ]
    for value in forged:
        r = local.request(secured, "GET", "/v1/brokers", headers={"Cookie": f"mq_console={value}"})
        assert r.status_code == 401, (value, r.text)
    # Expired: a cookie issued a lifetime ago.
    table = parse_tokens(TOKENS)
    key, _ = table.session_key(name)
    old = console_session.issue(key, name, 0)
    r = local.request(secured, "GET", "/v1/brokers", headers={"Cookie": f"mq_console={old}"})
    assert r.status_code == 401
    # Revoked: the same cookie against a tokens file without that token.
    revoked = create_app(local.node, tokens=parse_tokens("ops.admin-secret admin\n"))
    r = local.request(revoked, "GET", "/v1/brokers", headers={"Cookie": f"mq_console={cookie}"})
    assert r.status_code == 401
    # And a wrong token cannot sign in.
    r = local.request(secured, "POST", "/ui/login", token="wrong")
    assert r.status_code == 401 and "set-cookie" not in r.headers


def test_nothing_about_the_cluster_without_a_credential(local, secured):
    for path in ("/ui", "/ui/brokers", "/ui/assets/app.js", "/ui/data/brokers"):
        r = local.request(secured, "GET", path)
        assert r.status_code == 401, (path, r.status_code)
    # A browser (it accepts HTML) is sent to the sign-in page instead.
    r = local.request(secured, "GET", "/ui/brokers", headers={"Accept": "text/html"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    for path in ("/ui/login", "/ui/assets/login.js", "/ui/assets/console.css"):
        r = local.request(secured, "GET", path)
        assert r.status_code == 200, path
        assert local.cluster_id not in r.text


def test_every_page_has_a_strict_csp_and_no_inline_script(local, app):
    r = local.request(app, "GET", "/ui")
    assert r.status_code == 200
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    for path in ("/ui/assets/nope.js", "/ui/assets/index.html"):
        r = local.request(app, "GET", path)
        assert r.status_code == 404 and "no such console asset" in r.json()["errorMessage"]
    for name in ("index.html", "login.html"):
        html = console.ASSETS[name][0].decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), name  # every script is a file
        assert "http://" not in html and "https://" not in html  # nothing from a network
    for name, (content, _) in console.ASSETS.items():
        text = content.decode()
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text, name
        assert not re.search(r"(?:src|href)=\"(?:https?:)?//", text), name


def test_the_assets_ship_in_the_package():
    folder = Path(console.__file__).parent.parent / "console"
    names = {p.name for p in folder.iterdir() if p.suffix in (".html", ".js", ".css")}
    assert names == set(console.ASSETS)
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert 'api = ["console/*.html", "console/*.js", "console/*.css"]' in pyproject
    assert sum(len(c) for c, _ in console.ASSETS.values()) < 64_000  # small


def test_the_data_pages_page_and_count(local, app):
    epochs = {}
    for broker_id in (11, 12, 13):
        body = registration_body(local.cluster_id, broker_id)
        r = local.request(app, "POST", "/v1/brokers/register", json=body)
        assert r.status_code == 200, r.text
        epochs[broker_id] = r.json()["brokerEpoch"]
        beat = {"brokerId": broker_id, "brokerEpoch": epochs[broker_id]}
        r = local.request(
            app, "POST", "/v1/brokers/heartbeat", json={**beat, "currentMetadataOffset": 10**9}
        )
        assert r.status_code == 200, r.text
    body = {"topics": [{"name": "paged", "numPartitions": 7, "replicationFactor": 1}]}
    r = local.request(app, "POST", "/v1/topics", json=body)
    assert r.json()["topics"][0]["errorCode"] == 0, r.text
    beat = {"brokerId": 11, "brokerEpoch": epochs[11], "currentMetadataOffset": 10**9}
    r = local.request(app, "POST", "/v1/brokers/heartbeat", json={**beat, "wantFence": True})
    assert r.status_code == 200, r.text
    d = local.request(app, "GET", "/ui/data/brokers?state=active&limit=1").json()
    assert d["counts"]["active"] == d["total"] >= 2 and len(d["brokers"]) == 1
    d = local.request(app, "GET", "/ui/data/brokers?state=fenced").json()
    assert 11 in [b["brokerId"] for b in d["brokers"]]
    seen = []
    start = 0
    while True:
        d = local.request(
            app, "GET", f"/ui/data/partitions?topic=paged&from={start}&limit=3"
        ).json()
        seen += [p["partition"] for p in d["partitions"]]
        start += 3
        if start >= d["total"]:
            break
    assert seen == list(range(7))
    # Broker 11 fenced: the partitions it alone held are offline, and only they.
    topic = local.request(app, "GET", "/v1/topics/paged").json()
    on_11 = sorted(p["partitionIndex"] for p in topic["partitions"] if p["replicas"] == [11])
    d = local.request(app, "GET", "/ui/data/partitions?only=problems&topic=paged").json()
    assert [p["partition"] for p in d["partitions"]] == on_11 and on_11
    assert all(p["status"] == ["offline"] for p in d["partitions"])
    everything = local.request(app, "GET", "/ui/data/partitions?limit=1000").json()
    assert (
        everything["total"]
        == everything["counts"]["partitions"]
        == local.node.image.partition_count
    )
    assert len(everything["partitions"]) == min(1000, everything["total"])


def test_the_console_is_not_in_the_openapi_document(local, app):
    paths = local.request(app, "GET", "/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]
