"""metadata_records.errors: Kafka's protocol error codes by number and name."""

from __future__ import annotations

from enum import IntEnum

import pytest

from metadata_records import errors
from metadata_records.errors import ApiError, Errors

# Name -> code, as in org.apache.kafka.common.protocol.Errors (docs/kafka-rules.md section 1).
KAFKA_CODES = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "INVALID_TOPIC_EXCEPTION": 17,
    "CLUSTER_AUTHORIZATION_FAILED": 31,
    "UNSUPPORTED_SASL_MECHANISM": 33,
    "UNSUPPORTED_VERSION": 35,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_REPLICA_ASSIGNMENT": 39,
    "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41,
    "INVALID_REQUEST": 42,
    "POLICY_VIOLATION": 44,
    "OPERATION_NOT_ATTEMPTED": 55,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "STALE_BROKER_EPOCH": 77,
    "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "ELECTION_NOT_NEEDED": 84,
    "NO_REASSIGNMENT_IN_PROGRESS": 85,
    "THROTTLING_QUOTA_EXCEEDED": 89,
    "RESOURCE_NOT_FOUND": 91,
    "DUPLICATE_RESOURCE": 92,
    "UNACCEPTABLE_CREDENTIAL": 93,
    "DELEGATION_TOKEN_AUTH_DISABLED": 61,
    "DELEGATION_TOKEN_NOT_FOUND": 62,
    "DELEGATION_TOKEN_OWNER_MISMATCH": 63,
    "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED": 64,
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED": 65,
    "DELEGATION_TOKEN_EXPIRED": 66,
    "INVALID_PRINCIPAL_TYPE": 67,
    "INVALID_UPDATE_VERSION": 95,
    "UNKNOWN_TOPIC_ID": 100,
    "DUPLICATE_BROKER_REGISTRATION": 101,
    "BROKER_ID_NOT_REGISTERED": 102,
    "INCONSISTENT_CLUSTER_ID": 104,
    "INELIGIBLE_REPLICA": 107,
    "NEW_LEADER_ELECTED": 108,
    "INVALID_REGISTRATION": 119,
    "DUPLICATE_VOTER": 126,
    "VOTER_NOT_FOUND": 127,
}


def test_errors_is_an_int_enum():
    assert issubclass(Errors, IntEnum)
    assert Errors.STALE_BROKER_EPOCH == 77
    assert int(Errors.NOT_CONTROLLER) == 41


@pytest.mark.parametrize(("name", "code"), sorted(KAFKA_CODES.items(), key=lambda kv: kv[1]))
def test_code_and_name_match_kafka(name, code):
    assert Errors[name].value == code
    assert Errors(code).name == name
    assert Errors.from_code(code) is Errors[name]


def test_every_defined_error_is_a_kafka_error_with_kafkas_number():
    # Nothing extra, nothing renumbered: each member is in Kafka's table with its code.
    assert {e.name: e.value for e in Errors} == KAFKA_CODES


def test_codes_are_unique():
    # An IntEnum alias would silently map two names to one code.
    assert len(Errors.__members__) == len(list(Errors)) == len(KAFKA_CODES)


@pytest.mark.parametrize("code", [2, 5, 43, 76, 103, 109, 120, 9999, -2, 32767, -32768])
def test_from_code_unknown_raises_value_error_naming_the_code(code):
    with pytest.raises(ValueError, match=rf"(?<!\d){code}(?!\d)") as info:
        Errors.from_code(code)
    assert "unknown" in str(info.value).lower()
    # No chained "is not a valid Errors" noise.
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_from_code_returns_members_not_ints():
    err = Errors.from_code(107)
    assert type(err) is Errors
    assert err is Errors.INELIGIBLE_REPLICA
    assert err.name == "INELIGIBLE_REPLICA"


def test_api_error_success_and_message():
    assert errors.NONE.error is Errors.NONE
    assert errors.NONE.is_success
    assert errors.NONE.message is None
    err = ApiError(Errors.STALE_BROKER_EPOCH, "Expected broker epoch 5, got 4")
    assert not err.is_success
    assert err.message == "Expected broker epoch 5, got 4"
    assert err == ApiError(Errors.STALE_BROKER_EPOCH, "Expected broker epoch 5, got 4")
    assert err != ApiError(Errors.STALE_BROKER_EPOCH)


@pytest.mark.parametrize("error", [e for e in Errors if e is not Errors.NONE])
def test_only_none_is_success(error):
    assert not ApiError(error).is_success


def test_api_error_is_immutable():
    err = ApiError(Errors.NOT_CONTROLLER)
    with pytest.raises(AttributeError):
        err.error = Errors.NONE  # type: ignore[misc]
    assert hash(err) == hash(ApiError(Errors.NOT_CONTROLLER))
