"""Kafka's protocol error codes, by number and name (docs/kafka-rules.md section 1).

Numbers are those of ``org.apache.kafka.common.protocol.Errors``; names travel on
the wire as ``errorName`` next to ``errorCode``.
"""

from __future__ import annotations

from enum import IntEnum

import msgspec


class Errors(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    INVALID_TOPIC_EXCEPTION = 17
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OPERATION_NOT_ATTEMPTED = 55
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    THROTTLING_QUOTA_EXCEEDED = 89
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    INVALID_REGISTRATION = 119
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127

    @classmethod
    def from_code(cls, code: int) -> Errors:
        """The error for a wire code; unknown codes raise ValueError naming the code."""
        try:
            return cls(code)
        except ValueError:
            raise ValueError(f"unknown Kafka error code {code}") from None


class ApiError(msgspec.Struct, frozen=True, gc=False):
    """An error code with the reason a person reads (Kafka's ``ApiError``)."""

    error: Errors
    message: str | None = None
    # The check that refused (an id of controller/rules.py), None on success.
    rule: str | None = None

    @property
    def is_success(self) -> bool:
        return self.error is Errors.NONE


NONE = ApiError(Errors.NONE)
