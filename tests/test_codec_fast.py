"""The seam between metadata_records/codec_fast.py (generated coders) and
codec.py's field-by-field code: the same inputs, valid and invalid, give the
same records, objects and bytes, or the same DecodeError with the same
message, with ``codec.GENERATED`` on and off; the generated decoder only ever
vouches for what the plain decoder accepts, and takes every record a leader
writes."""

from __future__ import annotations

import copy
from contextlib import contextmanager

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records import codec
from metadata_records.codec import (
    DecodeError,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
    record_from_data,
    record_from_obj,
    record_to_obj,
    record_to_obj_plain,
)
from metadata_records.records import INT_RANGES, RECORD_TYPES, Batch

from .local_node import registration_body
from .test_codec import BAD_VALUES, _dumps, any_record, batches, json_values

GENERATED = codec._GENERATED
BATCHES = codec._BATCHES


@contextmanager
def plain_codec():
    """The one switch turned off: every record coded field by field."""
    assert codec.GENERATED
    codec.GENERATED = False
    try:
        yield
    finally:
        codec.GENERATED = True


def outcome(fn, *args):
    """What ``fn`` gives: ('ok', type, repr) or ('error', class, message).
    repr tells a tuple from a list and a bool from an int."""
    try:
        value = fn(*args)
    except DecodeError as e:
        return ("error", type(e), str(e))
    return ("ok", type(value), repr(value))


def both(fn, *args):
    generated = outcome(fn, *args)
    with plain_codec():
        plain = outcome(fn, *args)
    return generated, plain


# ---------------------------------------------------------------- the switch


def test_the_switch_picks_the_coder():
    record = RECORD_TYPES["NO_OP_RECORD"]()
    assert record_to_obj(record) == GENERATED.to_obj(record)
    with plain_codec():
        assert codec.GENERATED is False
        assert record_to_obj(record) == record_to_obj_plain(record)
    assert codec.GENERATED is True


def test_every_type_and_version_has_a_generated_coder():
    expected = {(n, v) for n, c in RECORD_TYPES.items() for v in range(c.MAX_VERSION + 1)}
    assert set(GENERATED.from_data) == expected
    assert {(c.TYPE, v) for c, v in GENERATED.to_obj_by_class} == expected


# ---------------------------------------------------------------- encoding


@settings(max_examples=200, deadline=None)
@given(any_record)
def test_generated_encoder_gives_the_plain_object_and_bytes(record):
    fast, plain = GENERATED.to_obj(record), record_to_obj_plain(record)
    assert fast == plain
    assert list(fast["data"]) == list(plain["data"])  # the same key order
    assert orjson.dumps(fast) == orjson.dumps(plain)
    generated, plain_out = both(encode_record, record)
    assert generated == plain_out


@settings(max_examples=60, deadline=None)
@given(batches)
def test_encode_batch_gives_the_same_bytes_either_way(batch):
    generated = encode_batch(batch)
    with plain_codec():
        assert encode_batch(batch) == generated


@settings(max_examples=200, deadline=None)
@given(batches, st.integers(-1, 2**40))
def test_the_msgspec_encoder_writes_what_orjson_writes_or_declines(batch, base_offset):
    """codec_fast.BatchEncoder takes every batch but those holding a record
    with a float64 field (ClientQuotaRecord: msgspec writes 1e16 where
    orjson writes 1e+16), and writes the very bytes orjson writes of the
    records' dicts."""
    batch = Batch(batch.controller_epoch, batch.timestamp_ms, batch.records, base_offset, batch.who)
    encoded = codec._ENCODER.encode(batch)
    floats = any(type(r).__name__ == "ClientQuotaRecord" for r in batch.records)
    assert (encoded is None) == floats
    if encoded is not None:
        with plain_codec():
            assert encoded == encode_batch(batch)
        records = [codec.record_to_obj(r) for r in batch.records]
        assert orjson.loads(encoded)["records"] == orjson.loads(orjson.dumps(records))


# ---------------------------------------------------------------- decoding one record


@settings(max_examples=200, deadline=None)
@given(any_record)
def test_the_generated_decoder_takes_every_record_a_leader_writes(record):
    """What encoding writes (every field of the version) decodes on the
    generated path to the same record, endpoint, feature and voter lists too."""
    data = orjson.loads(orjson.dumps(codec.record_data(record)))
    fast = GENERATED.from_data[(record.TYPE, record.version)](data)
    assert repr(fast) == repr(record) and type(fast) is type(record)
    assert record_from_data(type(record), record.version, data) == record


def _mutations(record, data):
    """A record's usual ``data`` and one change to it: a wrong value, an
    integer out of range or at its edge, a missing field, an unknown field,
    an empty list, a duplicated voter or an arbitrary JSON value."""
    obj = orjson.loads(encode_record(record))
    fields = obj["data"]
    specs = [s for s in record.FIELDS if s.since <= record.version]
    how = data.draw(
        st.sampled_from(["none", "bad", "range", "drop", "unknown", "empty", "twice", "any"])
    )
    if not specs and how not in ("unknown", "any"):
        how = "unknown"
    spec = data.draw(st.sampled_from(specs)) if specs else None
    if how == "bad":
        fields[spec.key] = data.draw(st.sampled_from(BAD_VALUES[spec.kind]))
    elif how == "range" and spec.kind in INT_RANGES:
        low, high = INT_RANGES[spec.kind]
        fields[spec.key] = data.draw(st.sampled_from([low - 1, low, high, high + 1, 2**70]))
    elif how == "drop":
        del fields[spec.key]
    elif how == "unknown":
        fields[data.draw(st.text(max_size=12))] = data.draw(json_values)
    elif how == "empty" and isinstance(fields[spec.key], list):
        fields[spec.key] = []
    elif how == "twice" and isinstance(fields[spec.key], list) and fields[spec.key]:
        fields[spec.key] = [*fields[spec.key], copy.deepcopy(fields[spec.key][0])]
    elif how == "any":
        fields[spec.key if spec else "x"] = data.draw(json_values)
    return obj


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_record, st.data())
def test_a_record_decodes_alike_or_fails_alike_either_way(record, data):
    obj = _mutations(record, data)
    fast = GENERATED.from_data[(obj["type"], obj["version"])](obj["data"])
    plain = outcome(record_from_data, type(record), record.version, obj["data"])
    if fast is not None:  # the generated decoder only vouches for what plain accepts
        assert plain == ("ok", type(fast), repr(fast))
    generated, plain_switch = both(record_from_obj, copy.deepcopy(obj))
    assert generated == plain_switch
    # From bytes (orjson reads an integer beyond 64 bits as a float: the same either way).
    from_bytes, from_bytes_plain = both(decode_record, _dumps(obj))
    assert from_bytes == from_bytes_plain


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(RECORD_TYPES)),
    st.dictionaries(st.text(max_size=24), json_values, max_size=5),
)
def test_arbitrary_data_decodes_alike_or_fails_alike(type_name, data):
    cls = RECORD_TYPES[type_name]
    for version in range(cls.MAX_VERSION + 1):
        fast = GENERATED.from_data[(type_name, version)](data)
        plain = outcome(record_from_data, cls, version, data)
        if fast is not None:
            assert plain == ("ok", type(fast), repr(fast))
        obj = {"type": type_name, "version": version, "data": data}
        generated, plain_switch = both(record_from_obj, obj)
        assert generated == plain_switch


# ---------------------------------------------------------------- decoding a batch


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.data())
def test_a_batch_decodes_alike_or_fails_alike_either_way(batch, data):
    obj = orjson.loads(encode_batch(batch))
    if obj["records"] and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(obj["records"]) - 1))
        mutated = _mutations(batch.records[i], data)
        obj["records"][i] = data.draw(st.sampled_from([mutated, mutated["data"], None, []]))
    raw = _dumps(obj)
    generated, plain = both(decode_batch, raw)
    assert generated == plain
    vouched = BATCHES.decode(raw) if isinstance(raw, bytes) else None
    if vouched is not None:  # msgspec's decoder only vouches for what plain accepts
        assert plain == ("ok", Batch, repr(vouched))
    # Compared as JSON text: in Python True == 1, so a brokerId mutated to
    # true would look unmutated as a dict.
    untouched = _dumps(obj["records"]) == _dumps(orjson.loads(encode_batch(batch))["records"])
    if not obj["records"] or untouched:
        assert generated == ("ok", Batch, repr(batch))


@settings(max_examples=200, deadline=None)
@given(batches)
def test_the_batch_decoder_takes_every_batch_a_leader_writes(batch):
    """msgspec's whole-batch decoder (codec_fast.BatchDecoder) vouches for
    every batch the encoder writes, every type and version, and gives the
    very records."""
    vouched = BATCHES.decode(encode_batch(batch))
    assert vouched is not None and repr(vouched) == repr(batch)


@given(batches, st.sampled_from(["extra", "drop", "later", "version"]), st.data())
def test_the_batch_decoder_leaves_what_it_cannot_vouch_for_to_the_plain_decoder(batch, how, data):
    """A record with an unknown field, a field left out (the plain decoder
    takes its default), a field of a later version, a version past the
    type's: msgspec's decoder gives None, decode_batch the plain answer."""
    obj = orjson.loads(encode_batch(batch))
    if not obj["records"]:
        return
    record = data.draw(st.sampled_from(obj["records"]))
    cls = RECORD_TYPES[record["type"]]
    specs = [f for f in cls.FIELDS if f.since <= record["version"]]
    later = [f for f in cls.FIELDS if f.since > record["version"]]
    if how == "extra":
        record["data"]["notAField"] = 1
    elif how == "drop" and specs:
        del record["data"][data.draw(st.sampled_from(specs)).key]
    elif how == "later" and later:
        spec = data.draw(st.sampled_from(later))
        record["data"][spec.key] = orjson.loads(
            orjson.dumps(codec._encode_value(spec.kind, spec.default))
        )
    elif how == "version":
        record["version"] = cls.MAX_VERSION + 1
    else:
        return
    raw = orjson.dumps(obj)
    assert BATCHES.decode(raw) is None
    generated, plain = both(decode_batch, raw)
    assert generated == plain


_WHO_MUTATIONS = [
    lambda w: {**w, "records": w["records"] + 1},  # covers more than the batch
    lambda w: {**w, "records": 0},
    lambda w: {**w, "records": True},
    lambda w: {**w, "principal": ""},
    lambda w: {**w, "principal": 7},
    lambda w: {**w, "api": "x" * 65},
    lambda w: {**w, "requestId": "r" * 65},
    lambda w: {**w, "address": None},
    lambda w: {**w, "rule": "y" * 65},
    lambda w: {**w, "secret": "no"},
    lambda w: {k: v for k, v in w.items() if k != "api"},
    lambda w: [w],
]


@settings(max_examples=150, deadline=None)
@given(batches, st.integers(0, len(_WHO_MUTATIONS) - 1), st.data())
def test_a_batch_who_decodes_alike_or_fails_alike_naming_the_who(batch, which, data):
    """Both decoders take a good who and give the same Who runs; a bad one
    (a count that does not add up, a string past its bound, an unknown key)
    is the plain decoder's DecodeError naming batch.who, either way."""
    obj = orjson.loads(encode_batch(batch))
    if "who" not in obj:
        generated, plain = both(decode_batch, _dumps(obj))
        assert generated == plain == ("ok", Batch, repr(batch))
        return
    i = data.draw(st.integers(0, len(obj["who"]) - 1))
    obj["who"][i] = _WHO_MUTATIONS[which](obj["who"][i])
    raw = orjson.dumps(obj)
    generated, plain = both(decode_batch, raw)
    assert generated == plain
    assert plain[0] == "error" and "batch.who" in plain[2], plain
    assert BATCHES.decode(raw) is None


def test_an_empty_batch_and_a_batch_of_non_objects_agree():
    for records in ([], [None], [1, {}], [{"type": True, "version": 0, "data": {}}]):
        raw = orjson.dumps(
            {"format": 1, "controllerEpoch": 1, "timestampMs": 0, "records": records}
        )
        generated, plain = both(decode_batch, raw)
        assert generated == plain


# ---------------------------------------------------------------- the switch: a real node's log


def test_a_real_nodes_log_reads_alike_with_the_generated_coders_on_and_off(local, app):
    """Brokers registered and unfenced, 80 topics created one request each (a
    batch each), then the whole log read through GET /v1/log twice: the node
    keeps only its last 64 batches decoded, so each read decodes the older
    payloads again with decode_batch, once generated and once field by field."""
    for broker_id in (1, 2, 3):
        body = registration_body(local.cluster_id, broker_id)
        r = local.request(app, "POST", "/v1/brokers/register", json=body)
        assert r.status_code == 200, r.text
        epoch = r.json()["brokerEpoch"]
        heartbeat = {"brokerId": broker_id, "brokerEpoch": epoch, "currentMetadataOffset": 1 << 40}
        r = local.request(app, "POST", "/v1/brokers/heartbeat", json=heartbeat)
        assert r.json()["isFenced"] is False, r.text
    for i in range(80):
        topic = {"name": f"t{i}", "numPartitions": 3, "replicationFactor": 3}
        r = local.request(app, "POST", "/v1/topics", json={"topics": [topic]})
        assert r.json()["topics"][0]["errorName"] == "NONE", r.text

    def read_log():
        r = local.request(app, "GET", "/v1/log?fromOffset=0&maxRecords=1000")
        assert r.status_code == 200, r.text
        return r.content

    generated = read_log()
    with plain_codec():
        plain = read_log()
    assert generated == plain
    records = orjson.loads(generated)["records"]
    assert {"PARTITION_RECORD", "TOPIC_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"} <= {
        r["type"] for r in records
    }
    # Every record read back encodes to the same bytes either way.
    for obj in records:
        record = record_from_obj(obj)
        generated_bytes = encode_record(record)
        with plain_codec():
            assert encode_record(record) == generated_bytes
