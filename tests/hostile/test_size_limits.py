"""Finding 3: nothing unbounded reaches the log or the node's memory. Before:
a broker's own token registered 100,000 listeners (one 10.6 MB record, the
leader's RSS 129 -> 232 MB); a 1 MiB host name, a 1 MB header and 10,000
headers were accepted."""

from __future__ import annotations

import socket

from metadata_records import limits
from tests.local_node import registration_body

from .attackers import client_records, hostile_cluster, status_of

BROKER = {"Authorization": "Bearer broker-1-token"}


def test_oversized_registrations_and_heads_are_refused_naming_the_limit(tmp_path):
    with hostile_cluster(tmp_path) as c:
        url = c.url(0)

        def register(**change):
            body = {**registration_body(c.cluster_id, 1), **change}
            return c.client.post(url + "/v1/brokers/register", json=body, headers=BROKER)

        listener = registration_body(c.cluster_id, 1)["listeners"][0]
        feature = registration_body(c.cluster_id, 1)["features"][0]
        refusals = {
            "listeners": register(listeners=[listener] * 100_000),
            "features": register(features=[feature] * (limits.MAX_FEATURES + 1)),
            "listeners[0].host": register(listeners=[{**listener, "host": "h" * (1 << 20)}]),
            "listeners[0].name": register(listeners=[{**listener, "name": "n" * 256}]),
            "rack": register(rack="r" * (limits.MAX_RACK_LENGTH + 1)),
            "clusterId": register(clusterId="c" * 1000),
        }
        limit_named = {
            "listeners": "at most 64 items",
            "features": "at most 64 items",
            "listeners[0].host": "at most 255 characters",
            "listeners[0].name": "at most 255 characters",
            "rack": "at most 255 characters",
            "clusterId": "at most 64 characters",
        }
        for field, r in refusals.items():
            assert r.status_code == 400, (field, r.status_code, r.text[:300])
            message = r.json()["errorMessage"]
            assert message.startswith(field + ":") and limit_named[field] in message, message
        assert client_records(c) == []  # nothing was written

        # At the limits exactly, the registration is accepted.
        biggest = register(
            listeners=[
                {**listener, "name": f"L{i}".ljust(255, "x"), "host": "h" * 255}
                for i in range(limits.MAX_LISTENERS)
            ],
            rack="r" * 255,
        )
        assert biggest.status_code == 200 and biggest.json()["errorName"] == "NONE", biggest.text

        # Heads: one 1 MB header, 10,000 headers, a 100 KB URL.
        big_header = raw(c.http[0], [("X-Big", "v" * 1_000_000)])
        many_headers = raw(c.http[0], [(f"X-H{i}", "v") for i in range(10_000)])
        long_url = raw(c.http[0], [], path="/v1/brokers?" + "q" * 100_000)
        assert big_header.startswith(b"HTTP/1.1 431"), big_header[:200]
        assert many_headers.startswith(b"HTTP/1.1 431"), many_headers[:200]
        assert b"more than 100 headers" in many_headers
        assert status_of(long_url) in ("414", "431"), long_url[:200]
        not_http = raw_bytes(c.http[0], b"HELLO THERE\r\n\r\n")
        assert not_http.startswith(b"HTTP/1.1 400") and b"not a valid HTTP/1.1" in not_http
        # The node still answers.
        assert c.client.get(url + "/v1/brokers", headers=BROKER).status_code == 200


def raw(port: int, headers: list[tuple[str, str]], path: str = "/v1/brokers") -> bytes:
    """Sends one request head and reads what the server answers before it closes."""
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer read-token\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return raw_bytes(port, head.encode())


def raw_bytes(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it was all sent: the answer is waiting
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer
