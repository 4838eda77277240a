"""An answer sent before the request's body is whole (a 401 to a caller
without a token, before its upload is read) reaches the client, over plain
HTTP and over TLS, while the client is still sending the body: the server
says ``Connection: close`` and drops the rest of the body for a moment
before it closes (api/connections.py). Closing at once, with the client's
bytes unread, reset the connection and the client lost its 401 (over TLS,
about 1 request in 10,000 of the fuzz run, tests/test_api_fuzz.py)."""

import re
import select
import socket
import ssl
import time

import pytest

from .cluster import Cluster
from .conftest import running
from .tls_files import TlsFiles

pytestmark = pytest.mark.slow

DECLARED = 16 << 20  # the body limit: the 401 comes before the body is read
# What the client sends before it waits for the answer: a little, or more than
# uvicorn buffers before it stops reading (64 KiB), which the server must undo.
FIRST = (8 << 10, 192 << 10)
THEN = 8 << 20  # past what the sockets buffer: sent only if the server reads it
ROUNDS = 5


def _readable(sock, timeout_s: float) -> bool:
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    return bool(select.select([sock], [], [], timeout_s)[0])


def _unauthenticated_upload(connect, first: int) -> bytes:
    """Sends a head and part of a body, waits until the answer has come, sends
    more of the body, then reads until the server closes."""
    sock = connect()
    try:
        head = (
            "POST /v1/brokers/register HTTP/1.1\r\nHost: metaquorum\r\n"
            f"Content-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n"
        )
        sock.sendall(head.encode() + b" " * first)
        assert _readable(sock, 20), "no answer within 20 s"
        sock.sendall(b" " * THEN)  # still uploading: the server must not reset now
        answer = b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not whole_answer(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        # As an HTTP client does on "Connection: close": it closes its side
        # (over TLS with a close_notify) and the server, now reading again,
        # closes at once instead of holding the connection open.
        if isinstance(sock, ssl.SSLSocket):
            sock.settimeout(5)
            try:
                sock.unwrap()
            except OSError:
                pass  # the server closed first: fine, its answer is in hand
        return answer
    finally:
        sock.close()


def whole_answer(answer: bytes) -> bool:
    """Whether ``answer`` holds an HTTP answer's head and its whole body."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
    return length is not None and len(body) >= int(length.group(1))


def _open_connections(c: Cluster) -> int:
    text = c.get(0, "/metrics").text
    return int(float(re.search(r"^metaquorum_http_open_connections (\S+)$", text, re.M).group(1)))


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_401_sent_before_the_body_is_whole_reaches_a_client_still_uploading(tmp_path, scheme):
    tls = TlsFiles(tmp_path / "tls") if scheme == "https" else None
    tokens = tmp_path / "tokens"
    tokens.write_text("admin-token admin\n")
    extra = ["--tokens-file", str(tokens)]
    c = Cluster(tmp_path, voters=1, tls=tls, extra=extra)
    c.client.headers["Authorization"] = "Bearer admin-token"
    with running(c):
        port = c.http[0]

        def connect():
            raw = socket.create_connection(("127.0.0.1", port), timeout=20)
            if tls is None:
                return raw
            return tls.context().wrap_socket(raw, server_hostname="127.0.0.1")

        baseline = _open_connections(c)  # this client's own keep-alive connection
        for first in FIRST * ROUNDS:
            answer = _unauthenticated_upload(connect, first)
            head = answer.split(b"\r\n\r\n", 1)[0].lower()
            assert head.startswith(b"http/1.1 401"), answer[:300]
            assert b"connection: close" in head, answer[:300]
            assert b"CLUSTER_AUTHORIZATION_FAILED" in answer, answer[:300]
            # Closed once the client closed, well before the server's own
            # deadlines (a TLS shutdown waits 30 s for a peer it cannot read).
            c.wait(
                lambda: _open_connections(c) <= baseline,
                5,
                "the server closing the connection the client closed",
            )
