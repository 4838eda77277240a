"""ACL bindings: CreateAcls, DeleteAcls and DescribeAcls.

Enums travel by Kafka's name (``READ``, ``TOPIC``) or code and are read into
codes here, so the controller sees only codes; an entry whose names do not read
is answered INVALID_REQUEST on its own, and the others still go through.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field
from pydantic.alias_generators import to_camel

from controller import messages as m
from metadata_records import limits
from metadata_records.acls import (
    ACL_ENUMS,
    AclBindingFilter,
    StandardAcl,
    acl_obj,
    parse_enum,
)
from metadata_records.errors import Errors

from .common import (
    ACCEPTED,
    NONE,
    ErrorFields,
    Int8,
    RefusalFields,
    RequestModel,
    ResponseModel,
    ThrottleTimeMs,
    bounded_list,
    bounded_str,
    error_obj,
    example,
)

AclEnum = Annotated[
    bounded_str(32) | Int8,
    Field(union_mode="left_to_right"),
]
AclString = bounded_str(limits.MAX_ACL_STRING_LENGTH)


def _acl_codes(entry: BaseModel, fields: dict[str, str], defaults: dict[str, int]) -> dict:
    """The entry's enum fields as Kafka's codes (``fields``: attribute -> the
    enum's name in metadata_records.acls.ACL_ENUMS); ValueError names the field
    and the value a name cannot be read from."""
    codes = {}
    for attr, enum_field in fields.items():
        value = getattr(entry, attr)
        if value is None:
            codes[attr] = defaults[attr]
            continue
        code = _NAME_CODES[enum_field].get(value) if type(value) is str else None
        if code is None:  # another case, spaces, a code, or no such name
            code = int(parse_enum(ACL_ENUMS[enum_field], _CAMEL[attr], value))
        codes[attr] = code
    return codes


_CREATION_ENUMS = {
    "resource_type": "resourceType",
    "resource_pattern_type": "patternType",
    "operation": "operation",
    "permission_type": "permissionType",
}
_FILTER_ENUMS = {
    "resource_type_filter": "resourceType",
    "pattern_type_filter": "patternType",
    "operation": "operation",
    "permission_type": "permissionType",
}
_FILTER_DEFAULTS = dict.fromkeys(_FILTER_ENUMS, 1)  # ANY
# Computed once, not per entry: a field's name in messages, and Kafka's
# names as written (READ, TOPIC) to codes in one dict lookup.
_CAMEL = {attr: to_camel(attr) for attr in (*_CREATION_ENUMS, *_FILTER_ENUMS)}
_NAME_CODES = {field: {m.name: int(m) for m in enum} for field, enum in ACL_ENUMS.items()}


class AclCreation(RequestModel):
    """One binding to create (Kafka's AclCreation). Enums by Kafka's name, in
    any case, or by code."""

    resource_type: AclEnum = Field(description="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...")
    resource_name: AclString = Field(description='the resource, "*" for all of its type')
    resource_pattern_type: AclEnum = Field(
        "LITERAL", description="LITERAL (the default) or PREFIXED"
    )
    principal: AclString = Field(description='"Type:name", e.g. "User:alice" or "User:*"')
    host: AclString = Field("*", description='the client host, "*" (the default) for any')
    operation: AclEnum = Field(description="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ...")
    permission_type: AclEnum = Field(description="ALLOW or DENY")

    def to_acl(self) -> StandardAcl:
        c = _acl_codes(self, _CREATION_ENUMS, {})
        return StandardAcl(
            c["resource_type"],
            self.resource_name,
            c["resource_pattern_type"],
            self.principal,
            self.host,
            c["operation"],
            c["permission_type"],
        )


class CreateAclsRequest(RequestModel):
    """POST /v1/acls (Kafka's CreateAclsRequest)."""

    model_config = example(
        {
            "creations": [
                {
                    "resourceType": "TOPIC",
                    "resourceName": "orders",
                    "resourcePatternType": "LITERAL",
                    "principal": "User:alice",
                    "host": "*",
                    "operation": "READ",
                    "permissionType": "ALLOW",
                }
            ]
        }
    )

    creations: bounded_list(AclCreation, limits.MAX_ACLS_PER_REQUEST) = Field(
        description="the bindings, each answered on its own"
    )

    def to_message(self) -> tuple[m.CreateAclsRequest, dict[int, str]]:
        """The controller's request for the creations whose names read, and
        (index -> problem) for those that do not."""
        acls, problems = [], {}
        for i, c in enumerate(self.creations):
            try:
                acls.append(c.to_acl())
            except ValueError as e:
                problems[i] = str(e)
        return m.CreateAclsRequest(tuple(acls)), problems


_ACCEPTED_OBJ = {**error_obj(Errors.NONE), "rule": None}


def _refused(problem: str, rule: str) -> dict[str, Any]:
    """A binding or filter the HTTP layer refused before the controller saw
    it: the controller's check (controller/rules.py), as the answer shows it."""
    return {**error_obj(Errors.INVALID_REQUEST, problem), "rule": rule}


def _decided(x: m.AclCreationResult | m.DeleteAclsFilterResult) -> dict[str, Any]:
    """The controller's outcome of one binding or filter, as the answer shows it."""
    return {**error_obj(x.error, x.error_message), "rule": x.rule}


class AclCreationResult(RefusalFields):
    """One creation's outcome (INVALID_REQUEST names the problem)."""


class CreateAclsResponse(RefusalFields):
    """One result per creation, in the request's order."""

    model_config = example(
        {**ACCEPTED, "throttleTimeMs": 0, "results": [ACCEPTED]},
    )

    throttle_time_ms: ThrottleTimeMs = 0
    results: list[AclCreationResult] = Field(description="by creation, in order")

    @staticmethod
    def obj_from_message(r: m.CreateAclsResponse, problems: dict[int, str]) -> dict[str, Any]:
        """The answer as JSON-ready data, built without a model per result (a
        CreateAcls has up to 10,000: decisions.md 139); the model validates
        it in tests/test_api_acls.py."""
        decided = iter(r.results)
        results = []
        for i in range(len(r.results) + len(problems)):
            if i in problems:
                results.append(_refused(problems[i], "acl.invalid"))
            else:
                x = next(decided)
                results.append(_decided(x))
        return {**_ACCEPTED_OBJ, "throttleTimeMs": 0, "results": results}


class DeleteAclsFilter(RequestModel):
    """Which bindings to delete (Kafka's DeleteAclsFilter): an absent field
    matches any; ANY matches any; MATCH (pattern type) every pattern that
    applies to the named resource (its literal name, "*" and its prefixes)."""

    resource_type_filter: AclEnum | None = Field(None, description="ANY (default), TOPIC, ...")
    resource_name_filter: AclString | None = Field(None, description="null (default): any")
    pattern_type_filter: AclEnum | None = Field(
        None, description="ANY (default), MATCH, LITERAL or PREFIXED"
    )
    principal_filter: AclString | None = Field(None, description="null (default): any")
    host_filter: AclString | None = Field(None, description="null (default): any")
    operation: AclEnum | None = Field(None, description="ANY (default), READ, ...")
    permission_type: AclEnum | None = Field(None, description="ANY (default), ALLOW or DENY")

    def to_filter(self) -> AclBindingFilter:
        c = _acl_codes(self, _FILTER_ENUMS, _FILTER_DEFAULTS)
        return AclBindingFilter(
            c["resource_type_filter"],
            self.resource_name_filter,
            c["pattern_type_filter"],
            self.principal_filter,
            self.host_filter,
            c["operation"],
            c["permission_type"],
        )


class DeleteAclsRequest(RequestModel):
    """POST /v1/acls/delete (Kafka's DeleteAclsRequest)."""

    model_config = example(
        {"filters": [{"resourceTypeFilter": "TOPIC", "resourceNameFilter": "orders",
                      "patternTypeFilter": "MATCH", "principalFilter": "User:alice"}]}
    )  # fmt: skip

    filters: bounded_list(DeleteAclsFilter, limits.MAX_ACL_FILTERS_PER_REQUEST) = Field(
        description="each answered with the bindings it matched"
    )

    def to_message(self) -> tuple[m.DeleteAclsRequest, dict[int, str]]:
        filters, problems = [], {}
        for i, f in enumerate(self.filters):
            try:
                filters.append(f.to_filter())
            except ValueError as e:
                problems[i] = str(e)
        return m.DeleteAclsRequest(tuple(filters)), problems


class AclBindingOut(ResponseModel):
    """A binding, enums by Kafka's name."""

    resource_type: str = Field(description='e.g. "TOPIC"')
    resource_name: str = Field(description="the resource")
    pattern_type: str = Field(description='"LITERAL" or "PREFIXED"')
    principal: str = Field(description='e.g. "User:alice"')
    host: str = Field(description='e.g. "*"')
    operation: str = Field(description='e.g. "READ"')
    permission_type: str = Field(description='"ALLOW" or "DENY"')


class DeleteAclsMatchingAcl(RefusalFields, AclBindingOut):
    """A binding the filter matched, deleted."""


class DeleteAclsFilterResult(RefusalFields):
    """One filter's outcome: the bindings it matched (INVALID_REQUEST names a bad filter)."""

    matching_acls: list[DeleteAclsMatchingAcl] = Field(description="what the filter deleted")


class DeleteAclsResponse(RefusalFields):
    """One result per filter, in order; a binding two filters match is in both
    and deleted once."""

    model_config = example(
        {
            **ACCEPTED,
            "throttleTimeMs": 0,
            "filterResults": [
                {
                    **ACCEPTED,
                    "matchingAcls": [
                        {
                            **ACCEPTED,
                            "resourceType": "TOPIC",
                            "resourceName": "orders",
                            "patternType": "LITERAL",
                            "principal": "User:alice",
                            "host": "*",
                            "operation": "READ",
                            "permissionType": "ALLOW",
                        }
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    filter_results: list[DeleteAclsFilterResult] = Field(description="by filter, in order")

    @staticmethod
    def obj_from_message(r: m.DeleteAclsResponse, problems: dict[int, str]) -> dict[str, Any]:
        """The answer as JSON-ready data, built without a model per binding
        (a filter may match 10,000: decisions.md 139); the model validates it
        in tests/test_api_acls.py."""
        decided = iter(r.filter_results)
        results = []
        none = _ACCEPTED_OBJ
        for i in range(len(r.filter_results) + len(problems)):
            if i in problems:
                results.append({**_refused(problems[i], "acl.filter-invalid"), "matchingAcls": []})
                continue
            x = next(decided)
            results.append(
                {
                    **_decided(x),
                    "matchingAcls": [{**none, **acl_obj(a)} for a in x.matching_acls],
                }
            )
        return {**none, "throttleTimeMs": 0, "filterResults": results}


class DescribeAclsEntryOut(ResponseModel):
    """One entry of a resource pattern's ACLs."""

    principal: str = Field(description='e.g. "User:alice"')
    host: str = Field(description='e.g. "*"')
    operation: str = Field(description='e.g. "READ"')
    permission_type: str = Field(description='"ALLOW" or "DENY"')


class DescribeAclsResourceOut(ResponseModel):
    """A resource pattern and its ACLs that match the filter."""

    resource_type: str = Field(description='e.g. "TOPIC"')
    resource_name: str = Field(description="the resource")
    pattern_type: str = Field(description='"LITERAL" or "PREFIXED"')
    acls: list[DescribeAclsEntryOut] = Field(description="its matching entries")


class DescribeAclsOut(ErrorFields):
    """GET /v1/acls: the bindings the filter matches, by resource (Kafka's
    DescribeAclsResponse), from the serving node's image."""

    model_config = example(
        {
            **NONE,
            "throttleTimeMs": 0,
            "resources": [
                {
                    "resourceType": "TOPIC",
                    "resourceName": "orders",
                    "patternType": "LITERAL",
                    "acls": [
                        {
                            "principal": "User:alice",
                            "host": "*",
                            "operation": "READ",
                            "permissionType": "ALLOW",
                        }
                    ],
                }
            ],
        }
    )

    throttle_time_ms: ThrottleTimeMs = 0
    resources: list[DescribeAclsResourceOut] = Field(
        description="by resource type, pattern type and name"
    )
