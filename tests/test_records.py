"""metadata_records.records: Kafka's record types, names, api keys, fields and versions."""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records import records as rec
from metadata_records.records import (
    INT_RANGES,
    RECORD_TYPES,
    TOPIC_NAME_MAX_LENGTH,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
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
    topic_name_problem,
)

TID = "fPZv1VBsRFmnlRvmGcOW9w"

# Kafka's MetadataRecordType names and api keys (metadata/src/main/resources/common/metadata/*.json),
# plus metaquorum's LEADER_CHANGE control record.
KAFKA_TYPES = {
    "REGISTER_BROKER_RECORD": (RegisterBrokerRecord, 0),
    "UNREGISTER_BROKER_RECORD": (UnregisterBrokerRecord, 1),
    "PRODUCER_IDS_RECORD": (ProducerIdsRecord, 15),
    "CLIENT_QUOTA_RECORD": (ClientQuotaRecord, 14),
    "ACCESS_CONTROL_ENTRY_RECORD": (AccessControlEntryRecord, 18),
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": (RemoveAccessControlEntryRecord, 19),
    "TOPIC_RECORD": (TopicRecord, 2),
    "PARTITION_RECORD": (PartitionRecord, 3),
    "CONFIG_RECORD": (ConfigRecord, 4),
    "PARTITION_CHANGE_RECORD": (PartitionChangeRecord, 5),
    "REMOVE_TOPIC_RECORD": (RemoveTopicRecord, 9),
    "FEATURE_LEVEL_RECORD": (FeatureLevelRecord, 12),
    "BROKER_REGISTRATION_CHANGE_RECORD": (BrokerRegistrationChangeRecord, 17),
    "NO_OP_RECORD": (NoOpRecord, 20),
    "USER_SCRAM_CREDENTIAL_RECORD": (UserScramCredentialRecord, 11),
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": (RemoveUserScramCredentialRecord, 22),
    # DelegationTokenRecord.json (apiKey 10), RemoveDelegationTokenRecord.json (26)
    "DELEGATION_TOKEN_RECORD": (DelegationTokenRecord, 10),
    "REMOVE_DELEGATION_TOKEN_RECORD": (RemoveDelegationTokenRecord, 26),
}

# (camelCase key, kind, since, default) per record type, in wire order.
EXPECTED_FIELDS = {
    "USER_SCRAM_CREDENTIAL_RECORD": [
        ("name", Kind.STRING, 0, MISSING),
        ("mechanism", Kind.INT8, 0, MISSING),
        ("salt", Kind.BYTES, 0, MISSING),
        ("storedKey", Kind.BYTES, 0, MISSING),
        ("serverKey", Kind.BYTES, 0, MISSING),
        ("iterations", Kind.INT32, 0, MISSING),
    ],
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": [
        ("name", Kind.STRING, 0, MISSING),
        ("mechanism", Kind.INT8, 0, MISSING),
    ],
    # Kafka's DelegationTokenRecord.json, its fields in its order.
    "DELEGATION_TOKEN_RECORD": [
        ("owner", Kind.STRING, 0, MISSING),
        ("requester", Kind.STRING, 0, MISSING),
        ("renewers", Kind.STRING_LIST, 0, MISSING),
        ("issueTimestamp", Kind.INT64, 0, MISSING),
        ("maxTimestamp", Kind.INT64, 0, MISSING),
        ("expirationTimestamp", Kind.INT64, 0, MISSING),
        ("tokenId", Kind.STRING, 0, MISSING),
    ],
    "REMOVE_DELEGATION_TOKEN_RECORD": [("tokenId", Kind.STRING, 0, MISSING)],
    "CLIENT_QUOTA_RECORD": [
        ("entity", Kind.QUOTA_ENTITY, 0, MISSING),
        ("key", Kind.STRING, 0, MISSING),
        ("value", Kind.FLOAT64, 0, 0.0),
        ("remove", Kind.BOOL, 0, False),
    ],
    "REGISTER_BROKER_RECORD": [
        ("brokerId", Kind.INT32, 0, MISSING),
        ("incarnationId", Kind.UUID, 0, MISSING),
        ("brokerEpoch", Kind.INT64, 0, MISSING),
        ("endPoints", Kind.ENDPOINTS, 0, ()),
        ("features", Kind.FEATURES, 0, ()),
        ("rack", Kind.NULLABLE_STRING, 0, None),
        ("fenced", Kind.BOOL, 0, True),
        ("inControlledShutdown", Kind.BOOL, 1, False),
        ("isMigratingZkBroker", Kind.BOOL, 2, False),
    ],
    "UNREGISTER_BROKER_RECORD": [
        ("brokerId", Kind.INT32, 0, MISSING),
        ("brokerEpoch", Kind.INT64, 0, MISSING),
    ],
    "PRODUCER_IDS_RECORD": [
        ("brokerId", Kind.INT32, 0, MISSING),
        ("brokerEpoch", Kind.INT64, 0, MISSING),
        ("nextProducerId", Kind.INT64, 0, MISSING),
    ],
    "ACCESS_CONTROL_ENTRY_RECORD": [
        ("id", Kind.UUID, 0, MISSING),
        ("resourceType", Kind.INT8, 0, MISSING),
        ("resourceName", Kind.STRING, 0, MISSING),
        ("patternType", Kind.INT8, 0, MISSING),
        ("principal", Kind.STRING, 0, MISSING),
        ("host", Kind.STRING, 0, MISSING),
        ("operation", Kind.INT8, 0, MISSING),
        ("permissionType", Kind.INT8, 0, MISSING),
    ],
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": [("id", Kind.UUID, 0, MISSING)],
    "TOPIC_RECORD": [
        ("name", Kind.STRING, 0, MISSING),
        ("topicId", Kind.UUID, 0, MISSING),
    ],
    "PARTITION_RECORD": [
        ("partitionId", Kind.INT32, 0, MISSING),
        ("topicId", Kind.UUID, 0, MISSING),
        ("replicas", Kind.INT32_LIST, 0, MISSING),
        ("isr", Kind.INT32_LIST, 0, MISSING),
        ("removingReplicas", Kind.INT32_LIST, 0, ()),
        ("addingReplicas", Kind.INT32_LIST, 0, ()),
        ("leader", Kind.INT32, 0, -1),
        ("leaderRecoveryState", Kind.INT8, 0, 0),
        ("leaderEpoch", Kind.INT32, 0, 0),
        ("partitionEpoch", Kind.INT32, 0, 0),
        ("eligibleLeaderReplicas", Kind.NULLABLE_INT32_LIST, 2, None),
        ("lastKnownElr", Kind.NULLABLE_INT32_LIST, 2, None),
    ],
    "CONFIG_RECORD": [
        ("resourceType", Kind.INT8, 0, MISSING),
        ("resourceName", Kind.STRING, 0, MISSING),
        ("name", Kind.STRING, 0, MISSING),
        ("value", Kind.NULLABLE_STRING, 0, None),
    ],
    "PARTITION_CHANGE_RECORD": [
        ("partitionId", Kind.INT32, 0, MISSING),
        ("topicId", Kind.UUID, 0, MISSING),
        ("isr", Kind.NULLABLE_INT32_LIST, 0, None),
        ("leader", Kind.INT32, 0, -2),
        ("replicas", Kind.NULLABLE_INT32_LIST, 0, None),
        ("removingReplicas", Kind.NULLABLE_INT32_LIST, 0, None),
        ("addingReplicas", Kind.NULLABLE_INT32_LIST, 0, None),
        ("leaderRecoveryState", Kind.INT8, 0, -1),
        ("eligibleLeaderReplicas", Kind.NULLABLE_INT32_LIST, 2, None),
        ("lastKnownElr", Kind.NULLABLE_INT32_LIST, 2, None),
    ],
    "REMOVE_TOPIC_RECORD": [("topicId", Kind.UUID, 0, MISSING)],
    "FEATURE_LEVEL_RECORD": [
        ("name", Kind.STRING, 0, MISSING),
        ("featureLevel", Kind.INT16, 0, MISSING),
    ],
    "BROKER_REGISTRATION_CHANGE_RECORD": [
        ("brokerId", Kind.INT32, 0, MISSING),
        ("brokerEpoch", Kind.INT64, 0, MISSING),
        ("fenced", Kind.INT8, 0, 0),
        ("inControlledShutdown", Kind.INT8, 1, 0),
    ],
    "NO_OP_RECORD": [],
    "LEADER_CHANGE": [
        ("controllerEpoch", Kind.INT32, 0, MISSING),
        ("leaderId", Kind.INT32, 0, MISSING),
        ("leaderUrl", Kind.STRING, 0, MISSING),
    ],
}

MAX_VERSIONS = {
    "REGISTER_BROKER_RECORD": 2,
    "BROKER_REGISTRATION_CHANGE_RECORD": 1,
    "UNREGISTER_BROKER_RECORD": 0,
    "PRODUCER_IDS_RECORD": 0,
    "CLIENT_QUOTA_RECORD": 0,
    "ACCESS_CONTROL_ENTRY_RECORD": 0,
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": 0,
    "TOPIC_RECORD": 0,
    "PARTITION_RECORD": 2,  # v2: KIP-966 ELR (v1, log directories, never written)
    "CONFIG_RECORD": 0,
    "PARTITION_CHANGE_RECORD": 2,  # v2: KIP-966 ELR
    "REMOVE_TOPIC_RECORD": 0,
    "FEATURE_LEVEL_RECORD": 0,
    "NO_OP_RECORD": 0,
    "LEADER_CHANGE": 0,
    "KRAFT_VOTERS": 0,
    "USER_SCRAM_CREDENTIAL_RECORD": 0,
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": 0,
    "DELEGATION_TOKEN_RECORD": 0,
    "REMOVE_DELEGATION_TOKEN_RECORD": 0,
}


def test_registry_holds_exactly_the_documented_types():
    # docs/api.md "A record": the eight metadata types, ConfigRecord, UnregisterBrokerRecord
    # ProducerIdsRecord and the two ACL records (issue 21), the two SCRAM
    # records and the two delegation token records (issue 47), and the control
    # records LEADER_CHANGE and KRAFT_VOTERS (the voter set, Kafka's VotersRecord).
    assert set(RECORD_TYPES) == set(KAFKA_TYPES) | {"LEADER_CHANGE", "KRAFT_VOTERS"}
    assert RECORD_TYPES["LEADER_CHANGE"] is LeaderChangeRecord


@pytest.mark.parametrize(("type_name", "cls_key"), sorted(KAFKA_TYPES.items()))
def test_kafka_type_names_and_api_keys(type_name, cls_key):
    cls, api_key = cls_key
    assert RECORD_TYPES[type_name] is cls
    assert cls.TYPE == type_name
    assert cls.API_KEY == api_key


def test_api_keys_are_distinct_and_leader_change_is_not_a_metadata_key():
    keys = [cls.API_KEY for cls in RECORD_TYPES.values()]
    assert len(keys) == len(set(keys))
    # LEADER_CHANGE is a control record, not one of Kafka's metadata api keys (all >= 0).
    assert LeaderChangeRecord.API_KEY < 0


@pytest.mark.parametrize("type_name", sorted(MAX_VERSIONS))
def test_max_versions(type_name):
    assert RECORD_TYPES[type_name].MAX_VERSION == MAX_VERSIONS[type_name]


@pytest.mark.parametrize("type_name", sorted(EXPECTED_FIELDS))
def test_fields_keys_kinds_since_and_defaults(type_name):
    cls = RECORD_TYPES[type_name]
    got = [(s.key, s.kind, s.since, s.default) for s in cls.FIELDS]
    assert got == EXPECTED_FIELDS[type_name]
    # The Python attribute matches the key, and "version" is not a data field.
    for spec in cls.FIELDS:
        assert spec.key != "version"
        assert spec.attr in cls.__struct_fields__
        head, *rest = spec.attr.split("_")
        assert spec.key == head + "".join(p.title() for p in rest)


@pytest.mark.parametrize("type_name", sorted(EXPECTED_FIELDS))
def test_field_since_never_exceeds_max_version(type_name):
    cls = RECORD_TYPES[type_name]
    assert all(0 <= s.since <= cls.MAX_VERSION for s in cls.FIELDS)


def test_the_versioned_fields_are_kafkas():
    versioned = {
        (name, s.key): s.since for name, cls in RECORD_TYPES.items() for s in cls.FIELDS if s.since
    }
    assert versioned == {
        ("REGISTER_BROKER_RECORD", "inControlledShutdown"): 1,
        ("REGISTER_BROKER_RECORD", "isMigratingZkBroker"): 2,
        ("BROKER_REGISTRATION_CHANGE_RECORD", "inControlledShutdown"): 1,
        # KIP-966's tagged fields (Kafka's versions "2+").
        ("PARTITION_RECORD", "eligibleLeaderReplicas"): 2,
        ("PARTITION_RECORD", "lastKnownElr"): 2,
        ("PARTITION_CHANGE_RECORD", "eligibleLeaderReplicas"): 2,
        ("PARTITION_CHANGE_RECORD", "lastKnownElr"): 2,
    }


def test_api_md_example_field_names():
    keys = [s.key for s in RegisterBrokerRecord.FIELDS]
    assert keys == [
        "brokerId",
        "incarnationId",
        "brokerEpoch",
        "endPoints",
        "features",
        "rack",
        "fenced",
        "inControlledShutdown",
        "isMigratingZkBroker",
    ]
    pcr = {s.key for s in PartitionChangeRecord.FIELDS}
    assert {"removingReplicas", "addingReplicas", "leaderRecoveryState"} <= pcr


def test_default_versions():
    # The newest versions are what the controller writes by default.
    reg = RegisterBrokerRecord(broker_id=1, incarnation_id=TID, broker_epoch=5)
    assert reg.version == 2 and reg.is_migrating_zk_broker is False
    assert reg.fenced is True
    assert reg.in_controlled_shutdown is False
    assert reg.end_points == () and reg.features == () and reg.rack is None
    change = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5)
    assert change.version == 0
    assert change.fenced == rec.NO_CHANGE == 0
    assert change.in_controlled_shutdown == rec.NO_CHANGE
    assert NoOpRecord().version == 0


def test_partition_change_defaults_mean_unchanged():
    r = PartitionChangeRecord(partition_id=0, topic_id=TID)
    assert r.isr is None and r.replicas is None
    assert r.removing_replicas is None and r.adding_replicas is None
    assert r.leader == rec.NO_LEADER_CHANGE == -2
    assert r.leader_recovery_state == rec.LRS_NO_CHANGE == -1


def test_partition_record_defaults():
    r = PartitionRecord(partition_id=0, topic_id=TID, replicas=(1, 2), isr=(1, 2))
    assert r.leader == rec.NO_LEADER == -1
    assert r.leader_recovery_state == rec.LRS_RECOVERED == 0
    assert r.leader_epoch == 0 and r.partition_epoch == 0
    assert r.removing_replicas == () and r.adding_replicas == ()


def test_special_constants_are_kafkas():
    assert (rec.FENCE, rec.UNFENCE, rec.NO_CHANGE) == (1, -1, 0)
    assert rec.IN_CONTROLLED_SHUTDOWN == 1
    assert rec.LRS_RECOVERING == 1
    assert rec.TOPIC_RESOURCE == 2  # ConfigResource.Type.TOPIC


def test_required_fields_are_required():
    with pytest.raises(TypeError):
        RegisterBrokerRecord(broker_id=1, incarnation_id=TID)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        TopicRecord(name="t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        LeaderChangeRecord(controller_epoch=1, leader_id=0)  # type: ignore[call-arg]


def test_records_are_frozen_and_hashable():
    r = TopicRecord(name="t", topic_id=TID)
    with pytest.raises(AttributeError):
        r.name = "u"  # type: ignore[misc]
    assert hash(r) == hash(TopicRecord(name="t", topic_id=TID))
    assert r == TopicRecord(name="t", topic_id=TID)
    assert r != TopicRecord(name="t", topic_id=TID, version=1)  # version is part of a record


def test_int_ranges():
    assert INT_RANGES == {
        Kind.INT8: (-128, 127),
        Kind.INT16: (-32768, 32767),
        Kind.INT32: (-2147483648, 2147483647),
        Kind.INT64: (-9223372036854775808, 9223372036854775807),
    }


def test_batch_is_frozen():
    b = rec.Batch(controller_epoch=1, timestamp_ms=2, records=(NoOpRecord(),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.controller_epoch = 3  # type: ignore[misc]


# ------------------------------------------------------------------ topic names


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "topic",
        "my-topic_v1.2",
        "...",
        ".a",
        "_",
        "-",
        "A" * TOPIC_NAME_MAX_LENGTH,
        "__consumer_offsets",
        "0123456789",
    ],
)
def test_legal_topic_names(name):
    assert topic_name_problem(name) is None


def test_empty_name():
    assert topic_name_problem("") == "Topic name is illegal, it can't be empty"


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names(name):
    assert topic_name_problem(name) == 'Topic name cannot be "." or ".."'


@pytest.mark.parametrize("name", ["a" * 250, "." * 250, "x" * 10_000])
def test_too_long(name):
    problem = topic_name_problem(name)
    assert problem is not None
    assert "249" in problem and "longer" in problem
    assert len(problem) < 200  # the name is cut in the message


@pytest.mark.parametrize(
    "name",
    ["a b", "a/b", "a:b", "a*", "é", "tópico", "a\tb", "a\nb", "\nab", "a,b", "a+b", "a\x00"],
)
def test_illegal_characters(name):
    problem = topic_name_problem(name)
    assert problem == (
        f'Topic name "{name}" is illegal, it contains a character other than '
        "ASCII alphanumerics, '.', '_' and '-'"
    )


# Regression: a '^...+$' pattern with re.match let 'abc\n' through ('$' matches before a
# trailing newline); Kafka rejects it.
@pytest.mark.parametrize("name", ["abc\n", "topic-1\n"])
def test_trailing_newline_is_illegal(name):
    assert topic_name_problem(name) is not None


LEGAL_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


@settings(max_examples=150)
@given(st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=TOPIC_NAME_MAX_LENGTH))
def test_property_legal_alphabet_names_are_legal(name):
    if name in (".", ".."):
        assert topic_name_problem(name) is not None
    else:
        assert topic_name_problem(name) is None


@settings(max_examples=150)
@given(
    st.text(alphabet=LEGAL_CHARS, max_size=50),
    st.characters(codec="utf-8").filter(lambda c: c not in LEGAL_CHARS),
    st.text(alphabet=LEGAL_CHARS, max_size=50),
)
def test_property_any_illegal_character_is_named(prefix, bad, suffix):
    name = prefix + bad + suffix
    problem = topic_name_problem(name)
    assert problem is not None
    assert "illegal" in problem
