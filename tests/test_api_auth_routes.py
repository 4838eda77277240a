"""Auth over the app's whole route table, so an endpoint added later cannot slip
through: with a tokens file, every route but the public probes refuses a
missing, unknown or malformed token (401), every write refuses the read role
(403), every write except the three broker endpoints refuses the broker role
(403), and none of these refusals writes anything."""

import pytest
from fastapi.routing import APIRoute

from api import create_app

from .local_node import registration_body

TOKENS = """\
admin-token admin
broker-token-5 broker 5
broker-token-any broker
read-token read
"""

PUBLIC = {"/livez", "/readyz", "/metrics"}
# The web console's sign-in page and sign-out (api/console_session.OPEN_PATHS):
# they say nothing about the cluster. POST /ui/login takes any role's token
# and writes nothing: it answers the read-only session cookie.
CONSOLE_OPEN = {"/ui/login", "/ui/logout"}
DOCS = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}  # public with public_docs
BROKER_WRITES = {
    "/v1/brokers/register",
    "/v1/brokers/heartbeat",
    "/v1/alter-partition",
    "/v1/brokers/allocate-producer-ids",
}
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@pytest.fixture(scope="module")
def secured(local, tmp_path_factory):
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(TOKENS)
    return create_app(local.node, tokens=str(path))


def endpoints(app) -> list[tuple[str, str]]:
    """(method, concrete path) for every route the app serves."""
    found = []
    for route in app.routes:
        methods = getattr(route, "methods", None) or {"GET"}
        path = route.path.replace("{name}", "t").replace("{broker_id}", "1").replace("{id}", "1")
        path = (
            path.replace("{page:path}", "brokers")
            .replace("{topic}", "t")
            .replace("{partition}", "0")
        )
        assert "{" not in path, f"fill the path parameter of {route.path} in this test"
        found += [(m, path) for m in sorted(methods - {"HEAD", "OPTIONS"})]
    return found


def test_the_route_table_is_what_this_test_knows(secured):
    routes = {r.path for r in secured.routes if isinstance(r, APIRoute)}
    writes = {
        r.path for r in secured.routes if isinstance(r, APIRoute) and r.methods & WRITE_METHODS
    }
    assert BROKER_WRITES <= writes
    assert len(writes) >= 9, writes  # register, heartbeat, alter-partition + 6 admin writes
    assert routes - PUBLIC - DOCS, routes


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic YWRtaW4="},
     {"Authorization": "Bearer "}, {"Authorization": "admin-token"}],
)  # fmt: skip
def test_every_non_public_route_refuses_a_missing_or_bad_token(local, secured, headers):
    before = local.node.image.next_offset
    checked = 0
    for method, path in endpoints(secured):
        if path in PUBLIC or (method == "GET" and path in CONSOLE_OPEN):
            continue
        r = local.request(secured, method, path, headers=headers, json={})
        assert r.status_code == 401, (method, path, r.status_code, r.text)
        assert r.json()["errorName"] == "CLUSTER_AUTHORIZATION_FAILED"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        checked += 1
    assert checked >= 15
    assert local.node.image.next_offset == before


def test_every_write_needs_its_role(local, secured):
    before = local.node.image.next_offset
    writes = [(m, p) for m, p in endpoints(secured) if m in WRITE_METHODS and p not in CONSOLE_OPEN]
    for method, path in writes:
        tokens = ["read-token"] + ([] if path in BROKER_WRITES else ["broker-token-any"])
        for token in tokens:
            r = local.request(secured, method, path, token=token, json={})
            assert r.status_code == 403, (token, method, path, r.status_code, r.text)
            assert "may not call this endpoint" in r.json()["errorMessage"]
    assert local.node.image.next_offset == before


def test_public_routes_need_no_token(local, secured):
    for method, path in endpoints(secured):
        if path in PUBLIC:
            assert local.request(secured, method, path).status_code == 200, path


def test_the_docs_need_a_token_unless_public_docs(local, secured, tmp_path):
    """docs/api.md: only the probes and /metrics are open; the OpenAPI pages need
    any token (read is enough), or ``public_docs`` (serve --public-docs)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKENS)
    public = create_app(local.node, tokens=str(tokens), public_docs=True)
    for path in DOCS - {"/docs/oauth2-redirect"}:
        assert local.request(secured, "GET", path).status_code == 401, path
        assert local.request(secured, "GET", path, token="read-token").status_code == 200, path
        assert local.request(public, "GET", path).status_code == 200, path


def test_a_bound_broker_token_cannot_act_for_another_broker_on_any_broker_route(local, secured):
    """Whatever the body: the token for broker 5 is refused for broker 6, on
    every broker write, and nothing is written."""
    own = local.request(
        secured,
        "POST",
        "/v1/brokers/register",
        token="broker-token-5",
        json=registration_body(local.cluster_id, 5),
    )
    assert own.status_code == 200 and own.json()["errorName"] == "NONE", own.text
    epoch = own.json()["brokerEpoch"]
    before = local.node.image.next_offset
    bodies = {
        "/v1/brokers/register": registration_body(local.cluster_id, 6),
        "/v1/brokers/heartbeat": {"brokerId": 6, "brokerEpoch": epoch, "currentMetadataOffset": 0},
        "/v1/alter-partition": {"brokerId": 6, "brokerEpoch": epoch, "topics": []},
        "/v1/brokers/allocate-producer-ids": {"brokerId": 6, "brokerEpoch": epoch},
    }
    assert set(bodies) == BROKER_WRITES
    for path, body in bodies.items():
        r = local.request(secured, "POST", path, token="broker-token-5", json=body)
        assert r.status_code == 403, (path, r.text)
        assert "may not act for broker 6" in r.json()["errorMessage"]
    assert local.node.image.next_offset == before
    # The same token for its own broker works on each broker route.
    hb = {"brokerId": 5, "brokerEpoch": epoch, "currentMetadataOffset": 0}
    r = local.request(secured, "POST", "/v1/brokers/heartbeat", token="broker-token-5", json=hb)
    assert r.status_code == 200 and r.json()["errorName"] == "NONE", r.text
