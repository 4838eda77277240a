"""metadata_records.snapshot: the canonical image encoding, its digest, and decoding."""

from __future__ import annotations

import copy
import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records import partition_states
from metadata_records.acls import StandardAcl
from metadata_records.codec import DecodeError
from metadata_records.delta import apply_records
from metadata_records.image import (
    EMPTY_IMAGE,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from metadata_records.records import (
    ConfigRecord,
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    LeaderChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata_records.snapshot import (
    SNAPSHOT_FORMAT,
    decode_image,
    encode_image,
    image_digest,
    image_to_obj,
)
from metadata_records.uuids import to_standard, uuid_from_bytes
from tests.test_delta import record_lists

T1 = uuid_from_bytes(b"\x01" * 16)
T2 = uuid_from_bytes(b"\x02" * 16)
INC = uuid_from_bytes(b"\xaa" * 16)
EP = (Endpoint("PLAINTEXT", "h", 9092, 0),)
MV = (FeatureRange("metadata.version", 6, 12),)


def sample_image() -> MetadataImage:
    return apply_records(
        EMPTY_IMAGE,
        [
            LeaderChangeRecord(controller_epoch=2, leader_id=1, leader_url="http://n1:8080"),
            FeatureLevelRecord(name="metadata.version", feature_level=12),
            RegisterBrokerRecord(
                broker_id=2,
                incarnation_id=INC,
                broker_epoch=2,
                end_points=EP,
                features=MV,
                rack="r",
            ),
            RegisterBrokerRecord(broker_id=1, incarnation_id=INC, broker_epoch=3, fenced=False),
            TopicRecord(name="b", topic_id=T2),
            TopicRecord(name="a", topic_id=T1),
            PartitionRecord(partition_id=1, topic_id=T1, replicas=(1, 2), isr=(1,), leader=1),
            PartitionRecord(partition_id=0, topic_id=T1, replicas=(2, 1), isr=(2, 1), leader=2),
            ConfigRecord(resource_type=2, resource_name="a", name="z", value="1"),
            ConfigRecord(resource_type=2, resource_name="a", name="k", value="2"),
        ],
    )


def test_encoding_shape():
    obj = orjson.loads(encode_image(sample_image()))
    assert list(obj) == [
        "format",
        "nextOffset",
        "controllerEpoch",
        "leaderId",
        "leaderUrl",
        "ignoredRecords",
        "features",
        "brokers",
        "topics",
    ]
    assert obj["format"] == SNAPSHOT_FORMAT
    assert obj["nextOffset"] == 10
    assert (obj["controllerEpoch"], obj["leaderId"], obj["leaderUrl"]) == (2, 1, "http://n1:8080")
    assert obj["ignoredRecords"] == 0
    assert obj["features"] == {"metadata.version": 12}
    # Brokers sorted by id, as arrays in BrokerRegistration's order.
    assert obj["brokers"] == [
        [1, INC, 3, [], [], None, False, False, 3],
        [
            2,
            INC,
            2,
            [{"name": "PLAINTEXT", "host": "h", "port": 9092, "securityProtocol": 0}],
            [{"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}],
            "r",
            True,
            False,
            2,
        ],
    ]
    # Topics sorted by id; configs by name; partitions by id: [pid, replicas, isr, ...].
    assert [t["topicId"] for t in obj["topics"]] == [T1, T2]
    a = obj["topics"][0]
    assert a["name"] == "a"
    assert list(a["configs"].items()) == [("k", "2"), ("z", "1")]
    assert a["partitions"] == [
        [0, [2, 1], [2, 1], [], [], 2, 0, 0, 0],
        [1, [1, 2], [1], [], [], 1, 0, 0, 0],
    ]
    # image_to_obj is the same object before serialisation (tuples become arrays).
    assert orjson.loads(orjson.dumps(image_to_obj(sample_image()))) == obj


def test_round_trip_sample():
    img = sample_image()
    back = decode_image(encode_image(img))
    assert back == img
    assert back.partition_count == 2
    assert back.topic_ids == {"a": T1, "b": T2}
    assert image_digest(back) == image_digest(img)


def test_empty_image_round_trip():
    assert decode_image(encode_image(EMPTY_IMAGE)) == EMPTY_IMAGE


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists)
def test_round_trip_of_images_built_by_apply(recs):
    img = apply_records(EMPTY_IMAGE, recs)
    encoded = encode_image(img)
    back = decode_image(encoded)
    assert back == img
    assert encode_image(back) == encoded
    assert image_digest(back) == image_digest(img)
    # str, bytearray and memoryview inputs too.
    assert decode_image(encoded.decode()) == img
    assert decode_image(bytearray(encoded)) == img
    assert decode_image(memoryview(encoded)) == img


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, record_lists)
def test_digest_equal_iff_images_equal(a_recs, b_recs):
    a = apply_records(EMPTY_IMAGE, a_recs)
    b = apply_records(EMPTY_IMAGE, b_recs)
    assert (image_digest(a) == image_digest(b)) == (a == b)
    assert image_digest(a) == image_digest(apply_records(EMPTY_IMAGE, list(a_recs)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.randoms(use_true_random=False))
def test_digest_ignores_dict_insertion_order(recs, rnd):
    img = apply_records(EMPTY_IMAGE, recs)

    def shuffled(d):
        items = list(d.items())
        rnd.shuffle(items)
        return dict(items)

    scrambled = MetadataImage(
        brokers=shuffled(img.brokers),
        topics=shuffled(
            {
                tid: t._replace(partitions=shuffled(t.partitions), configs=shuffled(t.configs))
                for tid, t in img.topics.items()
            }
        ),
        topic_ids=shuffled(img.topic_ids),
        features=shuffled(img.features),
        next_offset=img.next_offset,
        controller_epoch=img.controller_epoch,
        leader_id=img.leader_id,
        leader_url=img.leader_url,
        partition_count=img.partition_count,
        ignored_records=img.ignored_records,
        voters=img.voters,
        broker_configs=shuffled({n: shuffled(c) for n, c in img.broker_configs.items()}),
        next_producer_id=img.next_producer_id,
        client_quotas=shuffled({e: shuffled(q) for e, q in img.client_quotas.items()}),
        acls=shuffled(img.acls),
    )
    assert scrambled == img
    assert encode_image(scrambled) == encode_image(img)
    assert image_digest(scrambled) == image_digest(img)


def test_digest_ignores_insertion_order_reversed():
    img = sample_image()
    rev = MetadataImage(
        brokers=dict(reversed(list(img.brokers.items()))),
        topics={
            tid: t._replace(
                partitions=dict(reversed(list(t.partitions.items()))),
                configs=dict(reversed(list(t.configs.items()))),
            )
            for tid, t in reversed(list(img.topics.items()))
        },
        topic_ids=dict(reversed(list(img.topic_ids.items()))),
        features={"x": 1, **img.features},
        next_offset=img.next_offset,
        controller_epoch=img.controller_epoch,
        leader_id=img.leader_id,
        leader_url=img.leader_url,
        partition_count=img.partition_count,
    )
    fwd = MetadataImage(**{**_fields(img), "features": {**img.features, "x": 1}})
    assert list(rev.brokers) != list(fwd.brokers)
    assert list(rev.features) != list(fwd.features)
    assert rev == fwd
    assert encode_image(rev) == encode_image(fwd)
    assert image_digest(rev) == image_digest(fwd)


def _fields(img):
    return img._asdict()


def _with_broker(img, **kw):
    b = img.brokers[1]._replace(**kw)
    return MetadataImage(**{**_fields(img), "brokers": {**img.brokers, 1: b}})


def _with_partition(img, **kw):
    t = img.topics[T1]
    p = t.partitions[0]._replace(**kw)
    topic = t._replace(partitions={**t.partitions, 0: p})
    return MetadataImage(**{**_fields(img), "topics": {**img.topics, T1: topic}})


@pytest.mark.parametrize(
    "change",
    [
        lambda i: _with_broker(i, epoch=99),
        lambda i: _with_broker(i, fenced=True),
        lambda i: _with_broker(i, in_controlled_shutdown=True),
        lambda i: _with_broker(i, rack="x"),
        lambda i: _with_broker(i, registration_offset=7),
        lambda i: _with_broker(i, listeners=EP),
        lambda i: _with_broker(i, incarnation_id=T2),
        lambda i: _with_partition(i, isr=(2,)),
        lambda i: _with_partition(i, leader=1),
        lambda i: _with_partition(i, leader_epoch=1),
        lambda i: _with_partition(i, partition_epoch=1),
        lambda i: _with_partition(i, leader_recovery_state=1),
        lambda i: _with_partition(i, adding_replicas=(3,)),
        lambda i: _with_partition(i, removing_replicas=(3,)),
        lambda i: MetadataImage(**{**_fields(i), "next_offset": 11}),
        lambda i: MetadataImage(**{**_fields(i), "controller_epoch": 3}),
        lambda i: MetadataImage(**{**_fields(i), "leader_id": 0}),
        lambda i: MetadataImage(**{**_fields(i), "leader_url": None}),
        lambda i: MetadataImage(**{**_fields(i), "ignored_records": 1}),
        lambda i: MetadataImage(**{**_fields(i), "features": {}}),
        lambda i: apply_records(
            i, [ConfigRecord(resource_type=2, resource_name="a", name="k", value="3")]
        ),
        lambda i: apply_records(
            i, [ConfigRecord(resource_type=4, resource_name="", name="k", value="3")]
        ),
        lambda i: MetadataImage(**{**_fields(i), "next_producer_id": 1000}),
        lambda i: MetadataImage(
            **{**_fields(i), "client_quotas": {(("user", None),): {"producer_byte_rate": 1.0}}}
        ),
        lambda i: apply_records(i, [ACL.to_record(T2)]),
        lambda i: MetadataImage(
            **{
                **_fields(apply_records(i, [ACL.to_record(T2)])),
                "acls": {T2: ACL._replace(host="h")},
            }
        ),
    ],
)
def test_every_field_changes_the_digest(change):
    img = sample_image()
    other = change(img)
    assert other != img
    assert image_digest(other) != image_digest(img)
    assert len(image_digest(img)) == 64


ACL = StandardAcl(2, "orders", 3, "User:alice", "*", 3, 3)


def test_acls_round_trip_and_a_repeated_id_is_refused():
    img = apply_records(sample_image(), [ACL.to_record(T2), ACL._replace(host="h").to_record(T1)])
    assert decode_image(encode_image(img)) == img
    obj = orjson.loads(encode_image(img))
    obj["acls"].append(obj["acls"][0])
    with pytest.raises(DecodeError, match=r"snapshot.acls\[2\]: ACL .* appears twice"):
        decode_image(orjson.dumps(obj))
    obj["acls"] = [["x", 2]]
    with pytest.raises(DecodeError, match=r"snapshot.acls\[0\]: expected an array of 8 fields"):
        decode_image(orjson.dumps(obj))


def test_36_char_uuids_in_snapshot_are_canonicalised():
    obj = orjson.loads(encode_image(sample_image()))
    obj["topics"][0]["topicId"] = to_standard(T1).upper()
    obj["brokers"][0][1] = to_standard(INC)
    assert decode_image(orjson.dumps(obj)) == sample_image()


# ------------------------------------------------------------------ garbage and mutations


def _dumps(obj) -> bytes:
    return json.dumps(obj).encode()


def decode_or_decode_error(data):
    try:
        return decode_image(data)
    except DecodeError as e:
        assert str(e)
        return None
    except Exception as e:  # pragma: no cover - reported as a failure
        pytest.fail(f"decode_image raised {type(e).__name__}, not DecodeError: {e}")


def _expect(obj, *needles):
    with pytest.raises(DecodeError) as info:
        decode_image(_dumps(obj))
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def _obj():
    return orjson.loads(encode_image(sample_image()))


@pytest.mark.parametrize(
    "key",
    [
        "format",
        "nextOffset",
        "controllerEpoch",
        "leaderId",
        "leaderUrl",
        "ignoredRecords",
        "features",
        "brokers",
        "topics",
    ],
)
def test_missing_top_level_key_is_named(key):
    obj = _obj()
    del obj[key]
    _expect(obj, repr(key))


def test_unknown_top_level_key_is_named():
    obj = _obj()
    obj["partitionCount"] = 2
    _expect(obj, "partitionCount")


@pytest.mark.parametrize(
    ("path", "bad", "needle"),
    [
        (("format",), 2, "format"),
        (("format",), True, "format"),
        (("format",), "1", "format"),
        (("nextOffset",), 2**63, "nextOffset"),
        (("nextOffset",), True, "nextOffset"),
        (("controllerEpoch",), 2**31, "controllerEpoch"),
        (("leaderId",), None, "leaderId"),
        (("leaderUrl",), 5, "leaderUrl"),
        (("leaderUrl",), [], "leaderUrl"),
        (("ignoredRecords",), 1.5, "ignoredRecords"),
        (("features",), [], "features"),
        (("features",), {"metadata.version": 2**15}, "metadata.version"),
        (("features",), {"metadata.version": "2"}, "metadata.version"),
        (("features",), {"x": True}, "features.x"),
        (("brokers",), {}, "brokers"),
        (("brokers", 0), [1, INC], "brokers[0]"),
        (("brokers", 0), {}, "brokers[0]"),
        (("brokers", 0, 0), "1", "brokerId"),
        (("brokers", 0, 1), "nope", "incarnationId"),
        (("brokers", 0, 2), 2**63, "brokerEpoch"),
        (
            ("brokers", 0, 3),
            [{"name": "P", "host": "h", "port": 70000, "securityProtocol": 0}],
            "port",
        ),
        (("brokers", 0, 4), [{"name": "f"}], "features"),
        (("brokers", 0, 5), 1, "rack"),
        (("brokers", 0, 6), 0, "fenced"),
        (("brokers", 0, 7), None, "inControlledShutdown"),
        (("brokers", 0, 8), "3", "registrationOffset"),
        (("topics",), None, "topics"),
        (("topics", 0), [], "topics[0]"),
        (("topics", 0, "name"), None, "name"),
        (("topics", 0, "topicId"), "AAAA", "topicId"),
        (("topics", 0, "configs"), [], "configs"),
        (("topics", 0, "configs"), {"k": 1}, "configs"),
        (("topics", 0, "configs"), {"k": None}, "configs"),
        (("topics", 0, "partitions"), {}, "partitions"),
        (("topics", 0, "partitions", 0), [0, [1]], "partitions[0]"),
        (("topics", 0, "partitions", 0, 0), 2**31, "partitionId"),
        (("topics", 0, "partitions", 0, 1), [True], "replicas"),
        (("topics", 0, "partitions", 0, 2), None, "isr"),
        (("topics", 0, "partitions", 0, 6), 128, "leaderRecoveryState"),
        (("topics", 0, "partitions", 0, 8), -(2**31) - 1, "partitionEpoch"),
    ],
)
def test_bad_values_are_named(path, bad, needle):
    obj = _obj()
    cur = obj
    for step in path[:-1]:
        cur = cur[step]
    cur[path[-1]] = bad
    _expect(obj, needle)


@pytest.mark.parametrize("key", ["name", "topicId", "configs", "partitions"])
def test_topic_missing_key_is_named(key):
    obj = _obj()
    del obj["topics"][0][key]
    _expect(obj, repr(key))


def test_topic_unknown_key_is_named():
    obj = _obj()
    obj["topics"][0]["extra"] = 1
    _expect(obj, "extra")


def test_duplicate_broker_rejected():
    obj = _obj()
    obj["brokers"].append(copy.deepcopy(obj["brokers"][0]))
    _expect(obj, "appears twice")


@pytest.mark.parametrize("dup", ["name", "topicId"])
def test_duplicate_topic_name_or_id_rejected(dup):
    obj = _obj()
    extra = copy.deepcopy(obj["topics"][1])
    extra[dup] = obj["topics"][0][dup]
    obj["topics"].append(extra)
    _expect(obj, "appears twice")


# Regression: decode_image once kept the last of two rows with the same partition id.
# Either way partitions are kept (COMPACT_PARTITIONS), and on either path of
# a topic's rows: checked by msgspec, or by the checks that explain.
@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("checked_by_msgspec", [True, False])
def test_duplicate_partition_rejected(monkeypatch, compact, checked_by_msgspec):
    monkeypatch.setattr(partition_states, "COMPACT_PARTITIONS", compact)
    obj = _obj()
    parts = obj["topics"][0]["partitions"]
    dup = copy.deepcopy(parts[0])
    dup[5] = 1  # same partition id, different leader
    parts.append(dup)
    if not checked_by_msgspec:
        parts[1] = [*parts[1], [], []]  # a row with ELR fields: the explaining path
    at = len(parts) - 1
    with pytest.raises(DecodeError, match=rf"partitions\[{at}\]: partition 0 appears twice"):
        decode_image(_dumps(obj))


def test_decoded_isr_is_shared_with_equal_replicas():
    img = decode_image(encode_image(sample_image()))
    p0 = img.partition(T1, 0)  # isr == replicas
    p1 = img.partition(T1, 1)  # isr != replicas
    assert p0.isr == p0.replicas and p0.isr is p0.replicas
    assert p1.isr == (1,) and p1.isr is not p1.replicas


@pytest.mark.parametrize("value", [None, 1, [], {}, object()])
def test_non_bytes_rejected(value):
    with pytest.raises(DecodeError, match="expected bytes"):
        decode_image(value)


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"[]", b"null", b"1", b"\xff", b'"snapshot"', b'{"format":1}', "\ud800"]
)
def test_not_a_snapshot(raw):
    with pytest.raises(DecodeError):
        decode_image(raw)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8"), max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_decode_error(raw):
    decode_or_decode_error(raw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_raises_only_decode_error(value):
    decode_or_decode_error(_dumps(value))


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists, st.data())
def test_mutated_snapshots_raise_only_decode_error(recs, data):
    img = apply_records(EMPTY_IMAGE, recs)
    obj = orjson.loads(encode_image(img))
    path = data.draw(st.sampled_from(list(_paths(obj))))
    how = data.draw(st.sampled_from(["replace", "delete", "add"]))
    mutated = copy.deepcopy(obj)
    if not path:
        mutated = data.draw(json_values)
    else:
        parent = mutated
        for step in path[:-1]:
            parent = parent[step]
        if how == "replace":
            parent[path[-1]] = data.draw(json_values)
        elif how == "delete":
            del parent[path[-1]]
        else:
            target = parent[path[-1]]
            if isinstance(target, dict):
                target[data.draw(st.text(max_size=8))] = data.draw(json_values)
            elif isinstance(target, list):
                target.append(data.draw(json_values))
    decoded = decode_or_decode_error(_dumps(mutated))
    if decoded is not None:
        # Anything accepted is a consistent image that re-encodes.
        assert decoded.partition_count == sum(len(t.partitions) for t in decoded.topics.values())
        assert {t.name: i for i, t in decoded.topics.items()} == decoded.topic_ids
        assert decode_image(encode_image(decoded)) == decoded


# ------------------------------------------------------------------ deep nesting


def _nested(depth, kind="list"):
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def _template_at(key: str) -> str:
    enc = encode_image(sample_image()).decode()
    obj = json.loads(enc)
    obj[key] = "@@NEST@@"
    return json.dumps(obj)


@pytest.mark.parametrize("depth", [50, 1020, 5000, 200_000])
@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize(
    "key", ["nextOffset", "leaderUrl", "features", "brokers", "topics", "controllerEpoch"]
)
def test_deep_nesting_is_decode_error(key, kind, depth):
    raw = _template_at(key).replace('"@@NEST@@"', _nested(depth, kind))
    with pytest.raises(DecodeError):
        decode_image(raw.encode())


@pytest.mark.parametrize("depth", [50, 5000])
def test_deep_nesting_in_format_shallow_or_too_deep(depth):
    raw = _template_at("format").replace('"@@NEST@@"', _nested(depth))
    with pytest.raises(DecodeError):
        decode_image(raw.encode())


# Regression: the 'unsupported format' message once used str(value)[:20], which raised
# RecursionError for a format value nested ~1000 deep.
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deep_nesting_in_format_near_orjson_limit(kind):
    raw = _template_at("format").replace('"@@NEST@@"', _nested(1020, kind))
    with pytest.raises(DecodeError):
        decode_image(raw.encode())


def test_decoded_image_is_independent_of_registration_classes():
    img = decode_image(encode_image(sample_image()))
    assert all(type(b) is BrokerRegistration for b in img.brokers.values())
    assert all(type(t) is TopicImage for t in img.topics.values())
    assert all(
        type(p) is PartitionRegistration for t in img.topics.values() for p in t.partitions.values()
    )
    assert all(type(e) is Endpoint for b in img.brokers.values() for e in b.listeners)
    assert all(type(f) is FeatureRange for b in img.brokers.values() for f in b.features)
    assert all(
        type(p.replicas) is tuple for t in img.topics.values() for p in t.partitions.values()
    )
