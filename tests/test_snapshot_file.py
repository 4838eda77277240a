"""The snapshot *file* loader (``MetadataStateMachine.read_snapshot``), fuzzed:
a damaged file, header or image, is refused with the one documented error
(``SnapshotError`` or ``OSError``, ``fatal`` set, the file named); it is never
loaded with other contents, never crashes with another exception, never hangs.
"""

import os

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records.snapshot import image_digest
from quorum.state_machine import MetadataStateMachine, SnapshotError, write_snapshot_file

from .test_snapshot import sample_image

IMAGE = sample_image()
LAST = (b"\x01last-entry", 42, 3)
PREV = (b"\x01prev-entry", 41, 3)
CLUSTER = ["127.0.0.1:7071", "127.0.0.1:7073"]


@pytest.fixture(scope="module")
def snapshot_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("snap") / "raft.snapshot"
    write_snapshot_file(str(path), IMAGE, LAST, PREV, CLUSTER)
    return path.read_bytes()


def load(path) -> tuple[MetadataStateMachine, object]:
    sm = MetadataStateMachine()
    try:
        return sm, sm.read_snapshot(str(path))
    except (SnapshotError, OSError) as e:
        assert sm.fatal is not None and str(path) in sm.fatal
        return sm, e


def test_a_snapshot_file_round_trips(tmp_path, snapshot_bytes):
    path = tmp_path / "raft.snapshot"
    path.write_bytes(snapshot_bytes)
    sm, result = load(path)
    assert result == (LAST, PREV, CLUSTER)
    assert image_digest(sm.image) == image_digest(IMAGE) and sm.fatal is None


def test_a_changed_header_field_is_refused(tmp_path, snapshot_bytes):
    """The image has its checksum; the header (Raft index, term, voters) has its own."""
    head, _, image = snapshot_bytes.partition(b"\n")
    header = orjson.loads(head)
    header["raft"]["last"][1] = 43
    path = tmp_path / "raft.snapshot"
    path.write_bytes(orjson.dumps(header) + b"\n" + image)
    sm, result = load(path)
    assert isinstance(result, SnapshotError)
    assert "header does not match its checksum" in sm.fatal


def test_format_1_snapshots_are_still_read(tmp_path, snapshot_bytes):
    head, _, image = snapshot_bytes.partition(b"\n")
    header = orjson.loads(head)
    header["format"] = 1
    del header["headerSha256"]
    path = tmp_path / "raft.snapshot"
    path.write_bytes(orjson.dumps(header) + b"\n" + image)
    sm, result = load(path)
    assert result == (LAST, PREV, CLUSTER) and sm.fatal is None


def test_a_missing_or_empty_file_is_refused(tmp_path):
    for content in (None, b""):
        path = tmp_path / "raft.snapshot"
        if content is not None:
            path.write_bytes(content)
        sm, result = load(path)
        assert isinstance(result, SnapshotError | OSError) and sm.fatal


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzz_damaged_snapshots_are_refused_or_identical(tmp_path, snapshot_bytes, data):
    blob = bytearray(snapshot_bytes)
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["flip", "overwrite", "truncate", "insert"]))
        at = data.draw(st.integers(0, max(0, len(blob) - 1)))
        if kind == "flip" and at < len(blob):
            blob[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "overwrite":
            junk = data.draw(st.binary(min_size=1, max_size=32))
            blob[at : at + len(junk)] = junk
        elif kind == "truncate":
            del blob[at:]
        else:
            blob[at:at] = data.draw(st.binary(min_size=1, max_size=32))
    path = tmp_path / f"fuzz-{os.getpid()}.snapshot"
    path.write_bytes(bytes(blob))
    sm, result = load(path)
    if isinstance(result, Exception):
        return
    # Accepted: then it must be exactly what was written (a no-op mutation).
    assert result == (LAST, PREV, CLUSTER)
    assert image_digest(sm.image) == image_digest(IMAGE)


JSON_LEAVES = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzz_header_values_replaced_are_refused(tmp_path, snapshot_bytes, data):
    """Any field of a valid header (at any depth) replaced by any other JSON value."""
    head, _, image = snapshot_bytes.partition(b"\n")
    header = orjson.loads(head)
    node = header
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = data.draw(st.sampled_from(keys))
        if not isinstance(node[key], dict | list) or not node[key] or data.draw(st.booleans()):
            break
        node = node[key]
    value = data.draw(JSON)
    if value == node[key]:
        return
    node[key] = value
    path = tmp_path / "raft.snapshot"
    path.write_bytes(orjson.dumps(header) + b"\n" + image)
    sm, result = load(path)
    assert isinstance(result, SnapshotError | OSError), (header, result)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    header=JSON,
    image=st.binary(max_size=64),
)
def test_fuzz_arbitrary_headers_are_refused(tmp_path, header, image):
    path = tmp_path / "raft.snapshot"
    path.write_bytes(orjson.dumps(header) + b"\n" + image)
    sm, result = load(path)
    assert isinstance(result, SnapshotError | OSError), result


@pytest.mark.parametrize("fmt", [True, 1.0, "2", None])
def test_a_format_that_only_looks_like_a_number_is_refused(tmp_path, snapshot_bytes, fmt):
    """Found by the fuzzer: ``True in (1, 2)`` is true in Python."""
    head, _, image = snapshot_bytes.partition(b"\n")
    header = orjson.loads(head)
    header["format"] = fmt
    path = tmp_path / "raft.snapshot"
    path.write_bytes(orjson.dumps(header) + b"\n" + image)
    sm, result = load(path)
    assert isinstance(result, SnapshotError) and "format" in sm.fatal
