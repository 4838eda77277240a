"""ACLs as Kafka's KRaft controller keeps them: ``AccessControlEntryRecord``
bindings by id, their enums, and the filters DescribeAcls and DeleteAcls match
them with.

Kafka's names and codes (``org.apache.kafka.common.acl`` and ``.resource``):
a binding is a resource pattern (type, name, pattern type) and an entry
(principal, host, operation, permission). A stored ACL never holds ANY,
UNKNOWN or MATCH: those only appear in filters. ``acl_problem`` is Kafka's
``AclControlManager.validateNewAcl`` with ``AclApis``' checks (the cluster
resource's name, an empty name) and a principal that parses as ``Type:name``;
``AclBindingFilter.matches`` is ``ResourcePatternFilter.matches`` and
``AccessControlEntryFilter.matches``, line for line.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from .records import AccessControlEntryRecord


class AclResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"  # ResourcePattern.WILDCARD_RESOURCE and AccessControlEntry's any host
WILDCARD_PRINCIPAL = "User:*"  # Acl.WILDCARD_PRINCIPAL
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource

# What a stored ACL may hold (validateNewAcl): everything but the filter-only values.
_FILTER_ONLY = {
    AclResourceType: (AclResourceType.UNKNOWN, AclResourceType.ANY),
    PatternType: (PatternType.UNKNOWN, PatternType.ANY, PatternType.MATCH),
    AclOperation: (AclOperation.UNKNOWN, AclOperation.ANY),
    AclPermissionType: (AclPermissionType.UNKNOWN, AclPermissionType.ANY),
}
# The codes a stored ACL may hold, per enum.
_STORABLE = {
    enum: frozenset(int(m) for m in enum if m not in filter_only)
    for enum, filter_only in _FILTER_ONLY.items()
}
ACL_ENUMS = {
    "resourceType": AclResourceType,
    "patternType": PatternType,
    "operation": AclOperation,
    "permissionType": AclPermissionType,
}


def parse_enum(enum: type[IntEnum], field: str, text: object) -> IntEnum:
    """Kafka's name (any case) or its code -> the member; ValueError naming
    ``field`` and the accepted names otherwise."""
    if isinstance(text, str):
        member = enum._member_map_.get(text.strip().upper())
        if member is not None:
            return member
    elif isinstance(text, int) and not isinstance(text, bool) and text in enum._value2member_map_:
        return enum(text)
    names = ", ".join(enum.__members__)
    raise ValueError(f"{field} {text!r} is not one of {names}")


def _name(enum: type[IntEnum], code: int) -> str:
    member = enum._value2member_map_.get(code)
    return member.name if member is not None else f"code {code}"


def principal_problem(principal: str) -> str | None:
    """SecurityUtils.parseKafkaPrincipal: ``Type:name``, split at the first colon."""
    if not principal or ":" not in principal:
        return f"expected a string in format principalType:principalName but got {principal!r}"
    if not principal.split(":", 1)[0]:
        return f"principal {principal!r} has an empty principal type"
    return None


class StandardAcl(NamedTuple):
    """One binding (Kafka's ``StandardAcl``), enum fields as their codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def from_record(cls, r: AccessControlEntryRecord) -> StandardAcl:
        return cls(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )

    def to_record(self, acl_id: str) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            id=acl_id,
            resource_type=self.resource_type,
            resource_name=self.resource_name,
            pattern_type=self.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission_type=self.permission_type,
        )

    def describe(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={_name(AclOperation, self.operation)}, "
            f"permissionType={_name(AclPermissionType, self.permission_type)}) on "
            f"{_name(AclResourceType, self.resource_type)}:"
            f"{_name(PatternType, self.pattern_type)}:{self.resource_name}"
        )


def enum_problem(acl: StandardAcl) -> str | None:
    """Why a binding's codes cannot be stored (unknown, or a filter-only value):
    validateNewAcl's four switches, in its order and with its messages."""
    if (
        acl.resource_type in _STORABLE[AclResourceType]
        and acl.pattern_type in _STORABLE[PatternType]
        and acl.operation in _STORABLE[AclOperation]
        and acl.permission_type in _STORABLE[AclPermissionType]
    ):
        return None  # every replayed ACL: four set lookups
    for enum, code, what in (
        (AclResourceType, acl.resource_type, "resourceType"),
        (PatternType, acl.pattern_type, "patternType"),
        (AclOperation, acl.operation, "operation"),
        (AclPermissionType, acl.permission_type, "permissionType"),
    ):
        if code not in _STORABLE[enum]:
            return f"Invalid {what} {_name(enum, code)}"
    return None


def acl_problem(acl: StandardAcl) -> str | None:
    """Why ``acl`` may not be created (Kafka's INVALID_REQUEST message), or None."""
    # AclApis.handleCreateAcls first, then validateNewAcl.
    if acl.resource_type == AclResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    problem = enum_problem(acl) or principal_problem(acl.principal)
    if problem is not None:
        return problem
    if not acl.host:
        return "Host should not be empty (use * for every host)"
    return None


class AclBindingFilter(NamedTuple):
    """Kafka's ``AclBindingFilter``: None for a name, principal or host matches
    any; ANY for an enum matches any; MATCH for the pattern type matches every
    pattern that applies to the named resource (literal, ``*`` and prefixes)."""

    resource_type: int = AclResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def unknown(self) -> str | None:
        """AclControlManager.validateFilter: a filter with an UNKNOWN value."""
        if (
            self.resource_type == AclResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
        ):
            return "Unknown patternFilter."
        if (
            self.operation == AclOperation.UNKNOWN
            or self.permission_type == AclPermissionType.UNKNOWN
        ):
            return "Unknown entryFilter."
        return None

    def matches(self, acl: StandardAcl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != AclResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt != PatternType.ANY and pt != PatternType.MATCH and pt != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if pt == PatternType.ANY or pt == acl.pattern_type:
            return name == acl.resource_name
        if acl.pattern_type == PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD
        if acl.pattern_type == PatternType.PREFIXED:
            return name.startswith(acl.resource_name)
        return False  # Kafka throws: a stored ACL never has another pattern type

    def _matches_entry(self, acl: StandardAcl) -> bool:
        # AccessControlEntryFilter.matches
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return (
            self.permission_type == AclPermissionType.ANY
            or self.permission_type == acl.permission_type
        )


def acl_obj(acl: StandardAcl) -> dict[str, object]:
    """A binding as the HTTP answers show it: Kafka's names."""
    return {
        "resourceType": _name(AclResourceType, acl.resource_type),
        "resourceName": acl.resource_name,
        "patternType": _name(PatternType, acl.pattern_type),
        "principal": acl.principal,
        "host": acl.host,
        "operation": _name(AclOperation, acl.operation),
        "permissionType": _name(AclPermissionType, acl.permission_type),
    }
