"""Finding 5: the public surface is what docs/api.md says. Before: /docs, /redoc
and /openapi.json answered without a token, and a 403 named the token's line
in the tokens file."""

from __future__ import annotations

import httpx

from .attackers import hostile_cluster

DOCS = ("/docs", "/redoc", "/openapi.json")
OPEN = ("/livez", "/readyz", "/metrics")


def test_only_the_probes_and_metrics_are_open_and_refusals_say_nothing_internal(tmp_path):
    with hostile_cluster(tmp_path) as c:
        url = c.url(0)
        with httpx.Client(timeout=10) as anonymous:
            for path in OPEN:
                assert anonymous.get(url + path).status_code == 200, path
            for path in (*DOCS, "/v1/brokers", "/v1/no-such-route"):
                r = anonymous.get(url + path)
                assert r.status_code == 401, (path, r.status_code)
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
            for path in DOCS:
                r = anonymous.get(url + path, headers={"Authorization": "Bearer read-token"})
                assert r.status_code == 200, path

            # A 403 names the role and the binding, never where the token is defined.
            r = anonymous.post(
                url + "/v1/brokers/heartbeat",
                json={"brokerId": 1, "currentMetadataOffset": 0},
                headers={"Authorization": "Bearer broker-2-token"},
            )
            assert r.status_code == 403
            message = r.json()["errorMessage"]
            assert message == "the broker token for broker 2 may not act for broker 1", message
            r = anonymous.post(
                url + "/v1/topics",
                json={"topics": []},
                headers={"Authorization": "Bearer read-token"},
            )
            assert r.status_code == 403 and "line" not in r.json()["errorMessage"], r.text
            assert "tokens" not in r.json()["errorMessage"], r.text


def test_public_docs_opens_the_openapi_pages_only(tmp_path):
    with hostile_cluster(tmp_path, extra=["--public-docs"]) as c:
        with httpx.Client(timeout=10) as anonymous:
            for path in DOCS:
                assert anonymous.get(c.url(0) + path).status_code == 200, path
            assert anonymous.get(c.url(0) + "/v1/brokers").status_code == 401
