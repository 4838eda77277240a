"""metadata_records.codec: records and batches <-> docs/api.md's JSON; garbage -> DecodeError only."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import MISSING

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata_records.codec import (
    BATCH_FORMAT,
    DecodeError,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
    log_record_to_obj,
    record_data,
    record_from_obj,
    record_to_obj,
)
from metadata_records.records import (
    RECORD_TYPES,
    AccessControlEntryRecord,
    Batch,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    Endpoint,
    EntityData,
    FeatureLevelRecord,
    FeatureRange,
    Kind,
    LeaderChangeRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    Voter,
    VotersRecord,
    Who,
)
from metadata_records.uuids import to_standard, uuid_from_bytes

# ------------------------------------------------------------------ strategies

int8 = st.integers(-(2**7), 2**7 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.binary(min_size=16, max_size=16).map(uuid_from_bytes)
texts = st.text(st.characters(codec="utf-8"), max_size=16)
int32_lists = st.lists(int32, max_size=5).map(tuple)
nullable_int32_lists = st.none() | int32_lists
endpoints = st.lists(
    st.builds(Endpoint, texts, texts, st.integers(0, 65535), int16), max_size=3
).map(tuple)
feature_ranges = st.lists(st.builds(FeatureRange, texts, int16, int16), max_size=3).map(tuple)


def _register_broker(version: int):
    return st.builds(
        RegisterBrokerRecord,
        broker_id=int32,
        incarnation_id=uuids,
        broker_epoch=int64,
        end_points=endpoints,
        features=feature_ranges,
        rack=st.none() | texts,
        fenced=st.booleans(),
        # Not on the wire before v1: must keep its default to survive a round trip.
        in_controlled_shutdown=st.booleans() if version >= 1 else st.just(False),
        version=st.just(version),
    )


def _broker_change(version: int):
    return st.builds(
        BrokerRegistrationChangeRecord,
        broker_id=int32,
        broker_epoch=int64,
        fenced=int8,
        in_controlled_shutdown=int8 if version >= 1 else st.just(0),
        version=st.just(version),
    )


RECORD_STRATEGIES = {
    "REGISTER_BROKER_RECORD": st.integers(0, 1).flatmap(_register_broker),
    "BROKER_REGISTRATION_CHANGE_RECORD": st.integers(0, 1).flatmap(_broker_change),
    "UNREGISTER_BROKER_RECORD": st.builds(
        UnregisterBrokerRecord, broker_id=int32, broker_epoch=int64
    ),
    "PRODUCER_IDS_RECORD": st.builds(
        ProducerIdsRecord, broker_id=int32, broker_epoch=int64, next_producer_id=int64
    ),
    "CLIENT_QUOTA_RECORD": st.builds(
        ClientQuotaRecord,
        entity=st.lists(st.builds(EntityData, texts, st.none() | texts), max_size=3).map(tuple),
        key=texts,
        value=st.floats(allow_nan=False, allow_infinity=False),
        remove=st.booleans(),
    ),
    "ACCESS_CONTROL_ENTRY_RECORD": st.builds(
        AccessControlEntryRecord,
        id=uuids,
        resource_type=int8,
        resource_name=texts,
        pattern_type=int8,
        principal=texts,
        host=texts,
        operation=int8,
        permission_type=int8,
    ),
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": st.builds(RemoveAccessControlEntryRecord, id=uuids),
    "USER_SCRAM_CREDENTIAL_RECORD": st.builds(
        UserScramCredentialRecord,
        name=texts,
        mechanism=int8,
        salt=st.binary(max_size=40),
        stored_key=st.binary(max_size=64),
        server_key=st.binary(max_size=64),
        iterations=int32,
    ),
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": st.builds(
        RemoveUserScramCredentialRecord, name=texts, mechanism=int8
    ),
    "DELEGATION_TOKEN_RECORD": st.builds(
        DelegationTokenRecord,
        owner=texts,
        requester=texts,
        renewers=st.lists(texts, max_size=3).map(tuple),
        issue_timestamp=int64,
        max_timestamp=int64,
        expiration_timestamp=int64,
        token_id=texts,
    ),
    "REMOVE_DELEGATION_TOKEN_RECORD": st.builds(RemoveDelegationTokenRecord, token_id=texts),
    "TOPIC_RECORD": st.builds(TopicRecord, name=texts, topic_id=uuids),
    "PARTITION_RECORD": st.builds(
        PartitionRecord,
        partition_id=int32,
        topic_id=uuids,
        replicas=int32_lists,
        isr=int32_lists,
        removing_replicas=int32_lists,
        adding_replicas=int32_lists,
        leader=int32,
        leader_recovery_state=int8,
        leader_epoch=int32,
        partition_epoch=int32,
    ),
    "CONFIG_RECORD": st.builds(
        ConfigRecord,
        resource_type=int8,
        resource_name=texts,
        name=texts,
        value=st.none() | texts,
    ),
    "PARTITION_CHANGE_RECORD": st.builds(
        PartitionChangeRecord,
        partition_id=int32,
        topic_id=uuids,
        isr=nullable_int32_lists,
        leader=int32,
        replicas=nullable_int32_lists,
        removing_replicas=nullable_int32_lists,
        adding_replicas=nullable_int32_lists,
        leader_recovery_state=int8,
    ),
    "REMOVE_TOPIC_RECORD": st.builds(RemoveTopicRecord, topic_id=uuids),
    "FEATURE_LEVEL_RECORD": st.builds(FeatureLevelRecord, name=texts, feature_level=int16),
    "NO_OP_RECORD": st.just(NoOpRecord()),
    "LEADER_CHANGE": st.builds(
        LeaderChangeRecord, controller_epoch=int32, leader_id=int32, leader_url=texts
    ),
    "KRAFT_VOTERS": st.lists(
        st.builds(Voter, st.integers(0, 2**31 - 1), uuids, texts, st.integers(1, 65535)),
        min_size=1,
        max_size=5,
        unique_by=lambda v: v.voter_id,
    ).map(lambda voters: VotersRecord(voters=tuple(voters))),
}
any_record = st.one_of(*RECORD_STRATEGIES.values())


def _who(count: int) -> st.SearchStrategy[Who]:
    return st.builds(
        Who,
        st.just(count),
        st.sampled_from(["admin:token/ops", "broker:cert/CN=kafka-3", "controller", "ü:x"]),
        st.sampled_from(["AlterPartition", "CreateTopics", "FenceExpiredSessions"]),
        st.sampled_from(["", "127.0.0.1:50312", "[::1]:8080"]),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=64),
        st.sampled_from(["", "kip-631.session-expired"]),
    )


@st.composite
def _batch(draw: st.DrawFn) -> Batch:
    """A batch, with or without a who: runs that cover its records."""
    records = tuple(draw(st.lists(any_record, max_size=6)))
    who: list[Who] = []
    if records and draw(st.booleans()):
        left = len(records)
        while left:
            count = draw(st.integers(1, left))
            who.append(draw(_who(count)))
            left -= count
    return Batch(draw(int32), draw(int64), records, -1, tuple(who))


batches = _batch()

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


def _dumps(obj) -> bytes:
    # json, not orjson: it can also write integers beyond 64 bits.
    return json.dumps(obj).encode()


def decode_or_decode_error(fn, data):
    """Calls ``fn(data)``; the only exception allowed to escape the codec is DecodeError."""
    try:
        return fn(data)
    except DecodeError as e:
        assert str(e)
        return None
    except Exception as e:  # pragma: no cover - reported as a failure
        pytest.fail(f"{fn.__name__} raised {type(e).__name__}, not DecodeError: {e}")


# ------------------------------------------------------------------ round trips


def test_every_type_has_a_strategy():
    assert set(RECORD_STRATEGIES) == set(RECORD_TYPES)


@pytest.mark.parametrize("type_name", sorted(RECORD_STRATEGIES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_record_round_trip_per_type(type_name, data):
    record = data.draw(RECORD_STRATEGIES[type_name])
    encoded = encode_record(record)
    decoded = decode_record(encoded)
    assert decoded == record
    assert type(decoded) is type(record)
    assert decoded.version == record.version
    assert encode_record(decoded) == encoded
    assert record_from_obj(orjson.loads(encoded)) == record


@settings(max_examples=60, deadline=None)
@given(batches)
def test_batch_round_trip(batch):
    encoded = encode_batch(batch)
    decoded = decode_batch(encoded)
    assert decoded == batch
    assert encode_batch(decoded) == encoded
    # bytearray, memoryview and str inputs decode the same.
    assert decode_batch(bytearray(encoded)) == batch
    assert decode_batch(memoryview(encoded)) == batch
    assert decode_batch(encoded.decode()) == batch


@settings(max_examples=60, deadline=None)
@given(any_record)
def test_record_to_obj_has_exactly_the_versions_fields(record):
    obj = record_to_obj(record)
    assert set(obj) == {"type", "version", "data"}
    assert obj["type"] == record.TYPE
    assert obj["version"] == record.version
    keys = [s.key for s in record.FIELDS if s.since <= record.version]
    assert list(obj["data"]) == keys
    assert obj["data"] == record_data(record)


def test_batch_envelope_shape():
    batch = Batch(3, 1763800000000, (NoOpRecord(),))
    obj = orjson.loads(encode_batch(batch))
    assert obj == {
        "format": BATCH_FORMAT,
        "controllerEpoch": 3,
        "timestampMs": 1763800000000,
        "baseOffset": -1,
        "records": [{"type": "NO_OP_RECORD", "version": 0, "data": {}}],
    }
    decoded = decode_batch(encode_batch(Batch(3, 0, (), base_offset=42)))
    assert decoded.base_offset == 42


def test_field_beyond_version_is_not_written():
    v0 = RegisterBrokerRecord(
        broker_id=1, incarnation_id=uuid_from_bytes(bytes(16)), broker_epoch=0, version=0
    )
    assert "inControlledShutdown" not in record_data(v0)
    v1 = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=uuid_from_bytes(bytes(16)),
        broker_epoch=0,
        in_controlled_shutdown=True,
        version=1,
    )
    assert record_data(v1)["inControlledShutdown"] is True
    change0 = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=-1, version=0)
    assert record_data(change0) == {"brokerId": 1, "brokerEpoch": 0, "fenced": -1}


# ------------------------------------------------------------------ docs/api.md shape

INC = "fPZv1VBsRFmnlRvmGcOW9w"


def _api_md_register():
    return RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=INC,
        broker_epoch=17,
        end_points=(Endpoint("PLAINTEXT", "localhost", 9092, 0),),
        features=(FeatureRange("metadata.version", 6, 12),),
        rack=None,
        fenced=True,
        in_controlled_shutdown=False,
        version=1,
    )


def test_log_record_to_obj_matches_api_md():
    obj = log_record_to_obj(17, 1763800000000, 3, _api_md_register(), 16)
    assert list(obj) == [
        "offset", "type", "version", "timestampMs", "controllerEpoch", "batchOffset", "data"
    ]  # fmt: skip
    assert obj == {
        "offset": 17,
        "type": "REGISTER_BROKER_RECORD",
        "version": 1,
        "timestampMs": 1763800000000,
        "controllerEpoch": 3,
        "batchOffset": 16,
        "data": {
            "brokerId": 1,
            "incarnationId": INC,
            "brokerEpoch": 17,
            "endPoints": [
                {"name": "PLAINTEXT", "host": "localhost", "port": 9092, "securityProtocol": 0}
            ],
            "features": [
                {"name": "metadata.version", "minSupportedVersion": 6, "maxSupportedVersion": 12}
            ],
            "rack": None,
            "fenced": True,
            "inControlledShutdown": False,
        },
    }
    # It is JSON as it stands (tuples become arrays).
    assert orjson.loads(orjson.dumps(obj)) == obj


def test_log_record_obj_decodes_back_ignoring_envelope_keys():
    record = _api_md_register()
    obj = log_record_to_obj(17, 1763800000000, 3, record, 17)
    assert record_from_obj(obj) == record
    assert decode_record(orjson.dumps(obj)) == record


def test_partition_change_obj_keeps_nulls_and_minus_two():
    r = PartitionChangeRecord(partition_id=0, topic_id=INC, isr=(1, 2))
    assert record_data(r) == {
        "partitionId": 0,
        "topicId": INC,
        "isr": (1, 2),
        "leader": -2,
        "replicas": None,
        "removingReplicas": None,
        "addingReplicas": None,
        "leaderRecoveryState": -1,
    }
    assert orjson.loads(encode_record(r))["data"]["isr"] == [1, 2]


def test_optional_fields_may_be_omitted_on_input():
    rec = decode_record(
        orjson.dumps(
            {
                "type": "PARTITION_RECORD",
                "version": 0,
                "data": {"partitionId": 0, "topicId": INC, "replicas": [1], "isr": [1]},
            }
        )
    )
    assert rec == PartitionRecord(partition_id=0, topic_id=INC, replicas=(1,), isr=(1,))
    assert rec.leader == -1 and rec.leader_recovery_state == 0


# ------------------------------------------------------------------ UUIDs on input


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.booleans())
def test_36_char_uuids_accepted_and_canonicalised(raw, upper):
    canonical = uuid_from_bytes(raw)
    standard = to_standard(canonical)
    if upper:
        standard = standard.upper()
    for type_name, field in [
        ("TOPIC_RECORD", "topicId"),
        ("REGISTER_BROKER_RECORD", "incarnationId"),
        ("REMOVE_TOPIC_RECORD", "topicId"),
    ]:
        data = {"name": "t", "brokerId": 1, "brokerEpoch": 2, field: standard}
        keys = {s.key for s in RECORD_TYPES[type_name].FIELDS}
        data = {k: v for k, v in data.items() if k in keys}
        decoded = decode_record(orjson.dumps({"type": type_name, "version": 0, "data": data}))
        value = decoded.topic_id if field == "topicId" else decoded.incarnation_id
        assert value == canonical
        assert orjson.loads(encode_record(decoded))["data"][field] == canonical


def test_36_char_uuid_in_batch():
    std = to_standard(INC)
    raw = orjson.dumps(
        {
            "format": 1,
            "controllerEpoch": 1,
            "timestampMs": 0,
            "records": [{"type": "REMOVE_TOPIC_RECORD", "version": 0, "data": {"topicId": std}}],
        }
    )
    assert decode_batch(raw).records == (RemoveTopicRecord(topic_id=INC),)


# ------------------------------------------------------------------ targeted mutations


def _valid_obj(type_name: str) -> dict:
    """A valid record of ``type_name`` at its highest version, every field present."""
    examples = {
        "REGISTER_BROKER_RECORD": msgspec.structs.replace(_api_md_register(), version=2),
        "BROKER_REGISTRATION_CHANGE_RECORD": BrokerRegistrationChangeRecord(
            broker_id=1, broker_epoch=17, fenced=-1, in_controlled_shutdown=1, version=1
        ),
        "TOPIC_RECORD": TopicRecord(name="t", topic_id=INC),
        "PARTITION_RECORD": PartitionRecord(
            partition_id=0,
            topic_id=INC,
            replicas=(1, 2),
            isr=(1,),
            leader=1,
            eligible_leader_replicas=(2,),
            last_known_elr=(),
            version=2,
        ),
        "CONFIG_RECORD": ConfigRecord(
            resource_type=2, resource_name="t", name="retention.ms", value="1"
        ),
        "PARTITION_CHANGE_RECORD": PartitionChangeRecord(
            partition_id=0,
            topic_id=INC,
            isr=(1,),
            leader=1,
            replicas=(1, 2),
            removing_replicas=(),
            adding_replicas=(),
            leader_recovery_state=0,
            eligible_leader_replicas=(2,),
            last_known_elr=(1,),
            version=2,
        ),
        "REMOVE_TOPIC_RECORD": RemoveTopicRecord(topic_id=INC),
        "UNREGISTER_BROKER_RECORD": UnregisterBrokerRecord(broker_id=1, broker_epoch=17),
        "PRODUCER_IDS_RECORD": ProducerIdsRecord(
            broker_id=1, broker_epoch=17, next_producer_id=2000
        ),
        "ACCESS_CONTROL_ENTRY_RECORD": AccessControlEntryRecord(
            id=INC,
            resource_type=2,
            resource_name="t",
            pattern_type=3,
            principal="User:a",
            host="*",
            operation=3,
            permission_type=3,
        ),  # fmt: skip
        "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": RemoveAccessControlEntryRecord(id=INC),
        "FEATURE_LEVEL_RECORD": FeatureLevelRecord(name="metadata.version", feature_level=12),
        "CLIENT_QUOTA_RECORD": ClientQuotaRecord(
            entity=(EntityData("user", "alice"), EntityData("client-id", None)),
            key="producer_byte_rate",
            value=1024.0,
            remove=False,
        ),
        "USER_SCRAM_CREDENTIAL_RECORD": UserScramCredentialRecord(
            name="alice",
            mechanism=1,
            salt=b"salt",
            stored_key=bytes(range(32)),
            server_key=bytes(range(32, 64)),
            iterations=4096,
        ),
        "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": RemoveUserScramCredentialRecord(
            name="alice", mechanism=1
        ),
        "DELEGATION_TOKEN_RECORD": DelegationTokenRecord(
            owner="User:alice",
            requester="User:token/ops",
            renewers=("User:bob",),
            issue_timestamp=1_700_000_000_000,
            max_timestamp=1_700_604_800_000,
            expiration_timestamp=1_700_086_400_000,
            token_id="zLJkZ2xSSWqYdGEIUzo0zA",
        ),
        "REMOVE_DELEGATION_TOKEN_RECORD": RemoveDelegationTokenRecord(
            token_id="zLJkZ2xSSWqYdGEIUzo0zA"
        ),
        "NO_OP_RECORD": NoOpRecord(),
        "LEADER_CHANGE": LeaderChangeRecord(
            controller_epoch=3, leader_id=0, leader_url="http://n0:8080"
        ),
        "KRAFT_VOTERS": VotersRecord(voters=(Voter(0, INC, "n0", 7071), Voter(1, INC, "n1", 7071))),
    }
    obj = orjson.loads(encode_record(examples[type_name]))
    assert obj["version"] == RECORD_TYPES[type_name].MAX_VERSION
    return obj


def _expect_error(obj, *needles):
    """decode_record(obj) raises DecodeError whose message contains every needle."""
    with pytest.raises(DecodeError) as info:
        decode_record(_dumps(obj))
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


def test_valid_examples_decode():
    for type_name in RECORD_TYPES:
        decode_record(orjson.dumps(_valid_obj(type_name)))


ALL_FIELDS = [(t, s) for t, cls in sorted(RECORD_TYPES.items()) for s in cls.FIELDS]


def _required():
    return [(t, s.key) for t, s in ALL_FIELDS if s.default is MISSING]


@pytest.mark.parametrize(("type_name", "key"), _required())
def test_missing_required_field_is_named(type_name, key):
    obj = _valid_obj(type_name)
    del obj["data"][key]
    _expect_error(obj, repr(key), type_name)


def _optional():
    return [(t, s.key) for t, s in ALL_FIELDS if s.default is not MISSING]


@pytest.mark.parametrize(("type_name", "key"), _optional())
def test_missing_optional_field_takes_default(type_name, key):
    obj = _valid_obj(type_name)
    del obj["data"][key]
    decoded = decode_record(orjson.dumps(obj))
    spec = next(s for s in RECORD_TYPES[type_name].FIELDS if s.key == key)
    assert getattr(decoded, spec.attr) == spec.default


_INT_BOUNDS = {
    Kind.INT8: (-(2**7), 2**7 - 1),
    Kind.INT16: (-(2**15), 2**15 - 1),
    Kind.INT32: (-(2**31), 2**31 - 1),
    Kind.INT64: (-(2**63), 2**63 - 1),
}

# Values that are wrong for each kind (each must be rejected, naming the field).
BAD_VALUES = {
    Kind.INT8: [True, False, 1.0, "1", None, [1], {}, 128, -129, 2**40],
    Kind.INT16: [True, 1.5, "1", None, [], 2**15, -(2**15) - 1],
    Kind.INT32: [True, False, 0.0, "0", None, [0], {"a": 1}, 2**31, -(2**31) - 1, 2**63],
    Kind.INT64: [True, 1e3, "17", None, 2**63, -(2**63) - 1, 2**80],
    Kind.BOOL: [0, 1, "true", None, [], 1.0],
    Kind.STRING: [None, 1, True, [], {}, ["t"]],
    Kind.NULLABLE_STRING: [1, True, [], {}, ["r"]],
    Kind.UUID: [None, 1, True, [], "", "not-a-uuid", "AAAAAAAAAAAAAAAAAAAAAB", "!" * 22, "x" * 36],
    Kind.INT32_LIST: [None, 1, "1,2", {}, [True], [1.0], ["1"], [2**31], [None], [[1]]],
    Kind.NULLABLE_INT32_LIST: [1, "1", {}, [True], [2**31], [-(2**31) - 1], [None], [[]]],
    Kind.ENDPOINTS: [
        None,
        {},
        [1],
        [None],
        [[]],
        [{}],
        [{"name": "P", "host": "h", "port": 1}],
        [{"name": "P", "host": "h", "port": 1, "securityProtocol": 0, "extra": 1}],
        [{"name": 1, "host": "h", "port": 1, "securityProtocol": 0}],
        [{"name": "P", "host": None, "port": 1, "securityProtocol": 0}],
        [{"name": "P", "host": "h", "port": 65536, "securityProtocol": 0}],
        [{"name": "P", "host": "h", "port": -1, "securityProtocol": 0}],
        [{"name": "P", "host": "h", "port": True, "securityProtocol": 0}],
        [{"name": "P", "host": "h", "port": 2**31, "securityProtocol": 0}],
        [{"name": "P", "host": "h", "port": 1, "securityProtocol": 2**15}],
        [{"name": "P", "host": "h", "port": 1, "securityProtocol": False}],
    ],
    Kind.FEATURES: [
        None,
        "x",
        [1],
        [{}],
        [{"name": "f", "minSupportedVersion": 1}],
        [{"name": "f", "minSupportedVersion": 6, "maxSupportedVersion": 12, "x": 0}],
        [{"name": None, "minSupportedVersion": 6, "maxSupportedVersion": 12}],
        [{"name": "f", "minSupportedVersion": 2**15, "maxSupportedVersion": 2}],
        [{"name": "f", "minSupportedVersion": 1, "maxSupportedVersion": True}],
        [{"name": "f", "minSupportedVersion": 1.0, "maxSupportedVersion": 2}],
    ],
    Kind.FLOAT64: [True, False, None, "1.5", [], {}, [1.0]],
    Kind.QUOTA_ENTITY: [
        None,
        "user",
        [None],
        [{}],
        [{"entityType": "user"}],
        [{"entityType": 1, "entityName": "a"}],
        [{"entityType": "user", "entityName": 5}],
        [{"entityType": "user", "entityName": "a", "x": 1}],
    ],
    Kind.BYTES: [None, 1, True, [], {}, "not base64!", "YQ", "YR==", "YQ==\n"],
    Kind.STRING_LIST: [None, "User:a", [None], [1], [["User:a"]], {}],
    Kind.VOTERS: [
        None,
        [{}],
        [{"voterId": 0, "voterDirectoryId": INC, "host": "h"}],
        [{"voterId": -1, "voterDirectoryId": INC, "host": "h", "port": 1}],
        [{"voterId": 0, "voterDirectoryId": "nope", "host": "h", "port": 1}],
        [{"voterId": 0, "voterDirectoryId": INC, "host": "h", "port": 0}],
        [{"voterId": 0, "voterDirectoryId": INC, "host": 5, "port": 1}],
        [
            {"voterId": 0, "voterDirectoryId": INC, "host": "h", "port": 1},
            {"voterId": 0, "voterDirectoryId": INC, "host": "g", "port": 2},
        ],
    ],
}


def test_every_kind_has_bad_values():
    assert set(BAD_VALUES) == set(Kind)


@pytest.mark.parametrize(("type_name", "spec"), ALL_FIELDS, ids=lambda x: getattr(x, "key", x))
def test_wrong_value_for_every_field_is_named(type_name, spec):
    for bad in BAD_VALUES[spec.kind]:
        obj = _valid_obj(type_name)
        obj["data"][spec.key] = bad
        _expect_error(obj, spec.key)


@pytest.mark.parametrize(("type_name", "spec"), ALL_FIELDS, ids=lambda x: getattr(x, "key", x))
def test_integer_range_edges(type_name, spec):
    if spec.kind not in _INT_BOUNDS:
        return
    low, high = _INT_BOUNDS[spec.kind]
    for ok in (low, high, 0):
        obj = _valid_obj(type_name)
        obj["data"][spec.key] = ok
        decoded = decode_record(_dumps(obj))
        assert getattr(decoded, spec.attr) == ok
    for bad in (low - 1, high + 1):
        obj = _valid_obj(type_name)
        obj["data"][spec.key] = bad
        msg = _expect_error(obj, spec.key)
        assert spec.kind.value in msg
        if -(2**63) <= bad < 2**64:
            # orjson reads anything wider than 64 bits as a float, losing the value;
            # otherwise the message names the rejected value too.
            assert str(bad) in msg


@pytest.mark.parametrize("port", [65536, 70000, -1, 2**31 - 1])
def test_port_out_of_uint16_range(port):
    obj = _valid_obj("REGISTER_BROKER_RECORD")
    obj["data"]["endPoints"][0]["port"] = port
    _expect_error(obj, "port", str(port), "65535")


@pytest.mark.parametrize("port", [0, 65535])
def test_port_edges_accepted(port):
    obj = _valid_obj("REGISTER_BROKER_RECORD")
    obj["data"]["endPoints"][0]["port"] = port
    assert decode_record(orjson.dumps(obj)).end_points[0].port == port


@pytest.mark.parametrize("type_name", sorted(RECORD_TYPES))
def test_unknown_field_is_named(type_name):
    obj = _valid_obj(type_name)
    obj["data"]["surpriseField"] = 1
    _expect_error(obj, "surpriseField")


@pytest.mark.parametrize(
    ("type_name", "key"),
    [
        ("REGISTER_BROKER_RECORD", "inControlledShutdown"),
        ("REGISTER_BROKER_RECORD", "isMigratingZkBroker"),
        ("BROKER_REGISTRATION_CHANGE_RECORD", "inControlledShutdown"),
    ],
)
def test_field_of_a_later_version_is_rejected(type_name, key):
    fields = RECORD_TYPES[type_name].FIELDS
    below = _since(fields, key) - 1
    obj = _valid_obj(type_name)
    obj["version"] = below
    obj["data"] = {k: v for k, v in obj["data"].items() if k == key or _since(fields, k) <= below}
    _expect_error(obj, key, f"v{below}")
    del obj["data"][key]
    decoded = decode_record(orjson.dumps(obj))
    assert decoded.version == below


def _since(fields, key: str) -> int:
    return next(s.since for s in fields if s.key == key)


@pytest.mark.parametrize(
    "type_value",
    ["NOPE", "register_broker_record", "", "FENCE_BROKER_RECORD", 0, None, True, [], {}],
)
def test_unknown_type_is_named(type_value):
    obj = _valid_obj("NO_OP_RECORD")
    obj["type"] = type_value
    msg = _expect_error(obj, "unknown record type")
    if not isinstance(type_value, list | dict):
        assert str(type_value) in msg


def test_missing_type():
    obj = _valid_obj("NO_OP_RECORD")
    del obj["type"]
    _expect_error(obj, "unknown record type")


@pytest.mark.parametrize("type_name", sorted(RECORD_TYPES))
def test_unsupported_versions_are_named(type_name):
    max_version = RECORD_TYPES[type_name].MAX_VERSION
    for bad in (max_version + 1, 99, -1, 2**40, "0", True, False, 0.0, None, [0]):
        obj = _valid_obj(type_name)
        obj["version"] = bad
        _expect_error(obj, type_name, "version", "not supported")
    obj = _valid_obj(type_name)
    del obj["version"]
    _expect_error(obj, "version")


@pytest.mark.parametrize("data", [None, [], "x", 1, True])
def test_data_must_be_an_object(data):
    obj = _valid_obj("NO_OP_RECORD")
    obj["data"] = data
    _expect_error(obj, "data")


def test_missing_data():
    obj = _valid_obj("NO_OP_RECORD")
    del obj["data"]
    _expect_error(obj, "data")


@pytest.mark.parametrize("record_json", [b"[]", b"1", b'"x"', b"null", b"true", b"3.5"])
def test_record_must_be_an_object(record_json):
    with pytest.raises(DecodeError, match="expected object"):
        decode_record(record_json)


# ------------------------------------------------------------------ batch mutations


def _valid_batch_obj() -> dict:
    return orjson.loads(
        encode_batch(Batch(2, 1000, (TopicRecord(name="t", topic_id=INC), NoOpRecord())))
    )


def _expect_batch_error(obj, *needles):
    with pytest.raises(DecodeError) as info:
        decode_batch(_dumps(obj))
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


@pytest.mark.parametrize("fmt", [0, 2, -1, "1", True, 1.0, None, [1]])
def test_batch_unsupported_format(fmt):
    obj = _valid_batch_obj()
    obj["format"] = fmt
    _expect_batch_error(obj, "format")


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("controllerEpoch", 2**31),
        ("controllerEpoch", -(2**31) - 1),
        ("controllerEpoch", True),
        ("controllerEpoch", "2"),
        ("controllerEpoch", None),
        ("timestampMs", 2**63),
        ("timestampMs", 1.5),
        ("timestampMs", False),
        ("records", None),
        ("records", {}),
        ("records", "[]"),
    ],
)
def test_batch_bad_envelope_field_is_named(key, bad):
    obj = _valid_batch_obj()
    obj[key] = bad
    _expect_batch_error(obj, key)


@pytest.mark.parametrize("key", ["format", "controllerEpoch", "timestampMs", "records"])
def test_batch_missing_envelope_field_is_named(key):
    obj = _valid_batch_obj()
    del obj[key]
    _expect_batch_error(obj, key)


def test_batch_bad_record_is_located():
    obj = _valid_batch_obj()
    obj["records"][1]["data"]["x"] = 1
    _expect_batch_error(obj, "batch.records[1]", "'x'")
    obj = _valid_batch_obj()
    obj["records"][0]["data"]["topicId"] = "nope"
    _expect_batch_error(obj, "batch.records[0]", "topicId")


@pytest.mark.parametrize(
    ("key", "bad", "needle"),
    [
        ("version", True, "version True"),  # True == 1: no version all the same
        ("version", 0.0, "version 0.0"),
        ("type", ["NO_OP_RECORD"], "unknown record type"),  # unhashable
        ("type", {"t": 1}, "unknown record type"),
        ("type", None, "unknown record type"),
        ("data", [], "'data' must be an object"),
    ],
)
def test_a_batch_record_off_the_usual_shape_is_named_with_its_place(key, bad, needle):
    """decode_batch inlines the usual record; anything else must still get
    record_from_obj's error naming the record's place, never a TypeError."""
    obj = _valid_batch_obj()
    obj["records"][1][key] = bad
    _expect_batch_error(obj, "batch.records[1]", needle)


@pytest.mark.parametrize("top", [b"[]", b"1", b'"s"', b"null"])
def test_batch_must_be_an_object(top):
    with pytest.raises(DecodeError, match="expected object"):
        decode_batch(top)


def test_empty_batch_round_trips():
    assert decode_batch(encode_batch(Batch(0, 0, ()))) == Batch(0, 0, ())


# ------------------------------------------------------------------ garbage


@pytest.mark.parametrize("fn", [decode_record, decode_batch])
@pytest.mark.parametrize("value", [None, 1, 1.5, ["x"], {"type": "NO_OP_RECORD"}, object()])
def test_non_bytes_input_is_decode_error(fn, value):
    with pytest.raises(DecodeError, match="expected bytes"):
        fn(value)


@pytest.mark.parametrize("fn", [decode_record, decode_batch])
@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b'{"a": NaN}',
        b"1e400",
        b'"\\ud800"',
        b"\x00",
        "\ud800",  # str with a lone surrogate
        b'{"type": "NO_OP_RECORD", "version": 0, "data": {}} trailing',
    ],
)
def test_not_json_is_decode_error(fn, raw):
    with pytest.raises(DecodeError):
        fn(raw)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_decode_error(raw):
    decode_or_decode_error(decode_record, raw)
    decode_or_decode_error(decode_batch, raw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_raises_only_decode_error(value):
    raw = _dumps(value)
    decode_or_decode_error(decode_record, raw)
    decode_or_decode_error(decode_batch, raw)
    decode_or_decode_error(record_from_obj, value)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(RECORD_TYPES)),
    st.dictionaries(st.text(max_size=24), json_values, max_size=5),
    json_values,
)
def test_arbitrary_data_for_a_known_type_raises_only_decode_error(type_name, data, version):
    for v in (0, RECORD_TYPES[type_name].MAX_VERSION, version):
        obj = {"type": type_name, "version": v, "data": data}
        decoded = decode_or_decode_error(decode_record, _dumps(obj))
        if decoded is not None:
            assert type(decoded) is RECORD_TYPES[type_name]


def _paths(value, prefix=()):
    """Every path into a JSON value (including the root)."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _replace(value, path, new):
    if not path:
        return new
    out = copy.deepcopy(value)
    cur = out
    for step in path[:-1]:
        cur = cur[step]
    cur[path[-1]] = new
    return out


def _delete(value, path):
    out = copy.deepcopy(value)
    cur = out
    for step in path[:-1]:
        cur = cur[step]
    del cur[path[-1]]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.data())
def test_mutated_batch_encodings_raise_only_decode_error(batch, data):
    obj = orjson.loads(encode_batch(batch))
    paths = list(_paths(obj))
    path = data.draw(st.sampled_from(paths))
    how = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if how == "replace":
        mutated = _replace(obj, path, data.draw(json_values))
    elif how == "delete" and path:
        mutated = _delete(obj, path)
    else:
        target = obj
        for step in path:
            target = target[step]
        if not isinstance(target, dict):
            return
        mutated = _replace(obj, (*path, data.draw(st.text(max_size=8))), data.draw(json_values))
    decoded = decode_or_decode_error(decode_batch, _dumps(mutated))
    if decoded is not None:
        # Whatever is accepted is a well-formed batch that round-trips.
        assert decode_batch(encode_batch(decoded)) == decoded


@settings(max_examples=100, deadline=None)
@given(any_record, st.data())
def test_int_fields_out_of_range_always_rejected(record, data):
    ints = [s for s in record.FIELDS if s.kind in _INT_BOUNDS and s.since <= record.version]
    if not ints:
        return
    spec = data.draw(st.sampled_from(ints))
    low, high = _INT_BOUNDS[spec.kind]
    bad = data.draw(st.integers(high + 1, 2**70) | st.integers(-(2**70), low - 1) | st.booleans())
    obj = orjson.loads(encode_record(record))
    obj["data"][spec.key] = bad
    _expect_error(obj, spec.key)


# ------------------------------------------------------------------ deep nesting

DEPTHS = [50, 1020, 5000, 200_000]


def _nested(depth: int, kind: str = "list") -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize(
    "template",
    [
        "{0}",
        '{{"type":"NO_OP_RECORD","version":0,"data":{0}}}',
        '{{"type":"NO_OP_RECORD","version":0,"data":{{"x":{0}}}}}',
        '{{"type":"TOPIC_RECORD","version":0,"data":{{"name":{0},"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}}}',
        '{{"type":"PARTITION_RECORD","version":0,"data":{{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","replicas":{0},"isr":[]}}}}',
        '{{"type":"REGISTER_BROKER_RECORD","version":1,"data":{{"brokerId":0,"incarnationId":"AAAAAAAAAAAAAAAAAAAAAA","brokerEpoch":0,"endPoints":[{0}]}}}}',
    ],
)
def test_deep_nesting_in_record_values(template, kind, depth):
    raw = template.format(_nested(depth, kind)).encode()
    with pytest.raises(DecodeError):
        decode_record(raw)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize(
    "template",
    [
        '{{"format":1,"controllerEpoch":{0},"timestampMs":0,"records":[]}}',
        '{{"format":1,"controllerEpoch":0,"timestampMs":0,"records":{0}}}',
        '{{"format":1,"controllerEpoch":0,"timestampMs":0,"records":[{0}]}}',
    ],
)
def test_deep_nesting_in_batch_values(template, depth):
    with pytest.raises(DecodeError):
        decode_batch(template.format(_nested(depth)).encode())


@pytest.mark.parametrize(
    ("fn", "template"),
    [
        pytest.param(decode_record, '{{"type":{0},"version":0,"data":{{}}}}', id="record.type"),
        pytest.param(
            decode_record,
            '{{"type":"NO_OP_RECORD","version":{0},"data":{{}}}}',
            id="record.version",
        ),
        pytest.param(
            decode_batch,
            '{{"format":{0},"controllerEpoch":0,"timestampMs":0,"records":[]}}',
            id="batch.format",
        ),
        pytest.param(
            decode_batch,
            '{{"format":1,"controllerEpoch":0,"timestampMs":0,"records":[{{"type":{0}}}]}}',
            id="batch.records.type",
        ),
    ],
)
@pytest.mark.parametrize("depth", [50, 5000])
def test_deep_nesting_in_message_values_shallow_or_too_deep(fn, template, depth):
    # Shallow values and values orjson refuses are both fine.
    with pytest.raises(DecodeError):
        fn(template.format(_nested(depth)).encode())


# Regression: error messages once used str(value)[:N] on the whole value, which raised
# RecursionError for values nested ~1000 deep (orjson accepts up to 1024).
@pytest.mark.parametrize(
    ("fn", "template"),
    [
        pytest.param(decode_record, '{{"type":{0},"version":0,"data":{{}}}}', id="record.type"),
        pytest.param(
            decode_record,
            '{{"type":"NO_OP_RECORD","version":{0},"data":{{}}}}',
            id="record.version",
        ),
        pytest.param(
            decode_batch,
            '{{"format":{0},"controllerEpoch":0,"timestampMs":0,"records":[]}}',
            id="batch.format",
        ),
        pytest.param(
            decode_batch,
            '{{"format":1,"controllerEpoch":0,"timestampMs":0,"records":[{{"type":{0}}}]}}',
            id="batch.records.type",
        ),
    ],
)
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deep_nesting_in_message_values_near_orjson_limit(fn, template, kind):
    with pytest.raises(DecodeError):
        fn(template.format(_nested(1020, kind)).encode())


def test_a_batch_from_before_who_decodes_as_before_and_a_bad_who_is_named():
    """A payload without "who" (every batch written before it) decodes to a
    batch with an empty who; a who whose runs do not cover the records, or
    with a field past its bound, is a DecodeError naming it."""
    old = orjson.dumps(
        {
            "format": 1,
            "controllerEpoch": 2,
            "timestampMs": 5,
            "baseOffset": 9,
            "records": [{"type": "NO_OP_RECORD", "version": 0, "data": {}}],
        }
    )
    assert decode_batch(old) == Batch(2, 5, (NoOpRecord(),), 9)
    assert encode_batch(decode_batch(old)) == old
    who = Who(1, "admin:token/ops", "CreateTopics", "127.0.0.1:1", "req-1")
    batch = Batch(2, 5, (NoOpRecord(),), 9, (who,))
    assert decode_batch(encode_batch(batch)) == batch
    obj = orjson.loads(encode_batch(batch))
    for bad, named in (
        ([{**obj["who"][0], "records": 2}], "cover 2 records, the batch holds 1"),
        ([{**obj["who"][0], "requestId": "x" * 65}], "batch.who[0].requestId: 65 characters"),
        ([{**obj["who"][0], "token": "s3cret"}], "batch.who[0]: unknown field 'token'"),
        ("admin", "batch.who: expected array"),
    ):
        with pytest.raises(DecodeError, match=re.escape(named)):
            decode_batch(orjson.dumps({**obj, "who": bad}))
