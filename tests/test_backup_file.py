"""metadata_records/backup_file.py and GET /v1/backup in process: the streamed
image is encode_image byte for byte, a backup reads back to its image, and
every damaged or foreign file is refused with what is wrong."""

from __future__ import annotations

import hashlib
import os

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.app import create_app
from api.auth import parse_tokens
from metadata_records.backup_file import (
    MAGIC,
    BackupCheck,
    BackupError,
    backup_header,
    backup_pieces,
    load_backup,
    trailer_line,
)
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import Voter
from metadata_records.snapshot import (
    encode_image,
    encode_image_chunks,
    image_digest,
    image_to_obj,
)
from tests.test_delta import record_lists
from tests.test_snapshot import sample_image


def _image_with_voters():
    return sample_image()._replace(
        voters=(
            Voter(0, "b4Qu2DxXQvWv1CK6Rnh0Zw", "h0", 9093),
            Voter(1, "AAAAAAAAAAAAAAAAAAAAAA", "h1", 9093),
        )
    )


def _file(image, cluster_id="c1") -> bytes:
    header = backup_header(image, cluster_id=cluster_id, source_node_id=2, created_at_ms=1234)
    return b"".join(backup_pieces(header, image))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.integers(1, 5))
def test_chunks_are_encode_image_byte_for_byte(recs, per_chunk):
    """The pieces are the whole object's encoding (image_to_obj), which
    encode_image joins them into."""
    image = apply_records(EMPTY_IMAGE, recs)
    pieces = list(encode_image_chunks(image, per_chunk))
    assert b"".join(pieces) == orjson.dumps(image_to_obj(image)) == encode_image(image)
    # A piece holds about per_chunk partitions (and topics), never the whole of a big image.
    assert len(pieces) >= 1 + image.partition_count // (per_chunk + 1)


@pytest.mark.parametrize("per_chunk", [1, 2, 3, 1000])
def test_chunks_of_an_image_with_everything(per_chunk):
    for image in (EMPTY_IMAGE, sample_image(), _image_with_voters()):
        whole = orjson.dumps(image_to_obj(image))
        assert b"".join(encode_image_chunks(image, per_chunk)) == whole == encode_image(image)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.data())
def test_a_backup_reads_back_to_its_image_however_it_is_cut(recs, data):
    image = apply_records(EMPTY_IMAGE, recs)
    blob = _file(image)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=6)))
    pieces = [blob[a:b] for a, b in zip([0, *cuts], [*cuts, len(blob)], strict=True)]
    summary, back = load_backup(pieces)
    assert back == image
    assert summary.image_sha256 == image_digest(image)
    assert summary.header["nextOffset"] == image.next_offset
    assert summary.file_bytes == len(blob)


def test_the_file_is_a_header_the_image_and_a_trailer():
    image = _image_with_voters()
    blob = _file(image)
    header, body, trailer, end = blob.split(b"\n")
    assert end == b""
    assert body == encode_image(image)
    assert header.startswith(b'{"magic":"metaquorum-backup","format":1,')
    h = orjson.loads(header)
    assert (h["clusterId"], h["lastOffset"], h["partitions"], h["sourceNodeId"]) == ("c1", 9, 2, 2)
    assert [v["voterId"] for v in h["voters"]] == [0, 1]
    assert orjson.loads(trailer) == {
        "headerSha256": hashlib.sha256(header).hexdigest(),
        "imageBytes": len(body),
        "imageSha256": image_digest(image),
    }


def _refusal(blob: bytes) -> str:
    with pytest.raises(BackupError) as e:
        load_backup([blob])
    return str(e.value)


def test_every_truncation_is_named_with_its_byte():
    blob = _file(sample_image())
    for n in range(len(blob)):
        message = _refusal(blob[:n])
        assert f"truncated at byte {n}" in message or (n == 0 and "empty" in message), (n, message)


def test_every_bit_flip_is_refused():
    blob = _file(sample_image())
    for i in range(len(blob)):
        for bit in (0, 3, 6):
            damaged = bytearray(blob)
            damaged[i] ^= 1 << bit
            _refusal(bytes(damaged))


@pytest.mark.parametrize(
    "foreign, says",
    [
        (os.urandom(4096), "not a metaquorum backup"),
        (b'{"hello": "world"}\n', "not a metaquorum backup"),
        (encode_image(sample_image()), "not a metaquorum backup"),
        (b'{"offset":9,"nextOffset":10,"records":[]}', "not a metaquorum backup"),
        (b"", "empty"),
    ],
)
def test_foreign_files_are_refused(foreign, says):
    assert says in _refusal(foreign)


def _rewritten(blob: bytes, **changes) -> bytes:
    """The file with its header changed and the trailer's header digest made to match."""
    header, body, trailer, _ = blob.split(b"\n")
    new_header = orjson.dumps({**orjson.loads(header), **changes})
    t = orjson.loads(trailer)
    return (
        b"\n".join(
            [new_header, body, trailer_line(new_header, t["imageBytes"], t["imageSha256"]).rstrip()]
        )
        + b"\n"
    )


def test_a_newer_format_and_a_header_that_lies_are_named():
    blob = _file(sample_image())
    assert "newer backup format (2" in _refusal(_rewritten(blob, format=2))
    assert "partitions 7 in the header, 2 in the image" in _refusal(_rewritten(blob, partitions=7))
    header, rest = blob.split(b"\n", 1)
    changed = orjson.dumps({**orjson.loads(header), "clusterId": "other"}) + b"\n" + rest
    assert "header digest mismatch" in _refusal(changed)
    assert f'"magic":"{MAGIC}"' in header.decode()


def test_bytes_after_the_trailer_are_refused():
    blob = _file(sample_image())
    assert "not a whole backup" in _refusal(blob + blob)
    check = BackupCheck()
    check.feed(blob + b"x")
    with pytest.raises(
        BackupError, match=f"1 bytes follow its trailer, which ends at byte {len(blob)}"
    ):
        check.finish()


# ---------------------------------------------------------------- GET /v1/backup


def test_get_backup_is_the_nodes_image_after_a_barrier(local, app):
    r = local.request(app, "GET", "/v1/backup")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/octet-stream")
    summary, image = load_backup([r.content])
    assert summary.header["clusterId"] == local.cluster_id
    assert summary.header["sourceNodeId"] == 0
    assert int(r.headers["X-Metadata-Offset"]) == image.last_offset
    assert int(r.headers["X-Next-Offset"]) == image.next_offset
    # The barrier committed before the image was taken: the node holds it too.
    assert image.next_offset <= local.node.image.next_offset
    assert image_digest(image) == summary.image_sha256


def test_get_backup_needs_the_admin_role(local):
    tokens = parse_tokens("admin-token admin\nread-token read\nbroker-token broker 1\n")
    app = create_app(local.node, tokens=tokens)
    for token in ("read-token", "broker-token"):
        r = local.request(app, "GET", "/v1/backup", token=token)
        assert r.status_code == 403, r.text
        assert "admin role" in r.json()["errorMessage"]
    assert local.request(app, "GET", "/v1/backup").status_code == 401
    r = local.request(app, "GET", "/v1/backup", token="admin-token")
    assert r.status_code == 200
    load_backup([r.content])
