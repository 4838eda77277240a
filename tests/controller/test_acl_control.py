"""CreateAcls and DeleteAcls in the pure controller, after Kafka's
AclControlManagerTest (and its TEST_ACLS), with the filter semantics of
ResourcePatternFilterTest / AclBindingFilter."""

import pytest

from controller.messages import CreateAclsRequest, DeleteAclsRequest
from controller.record_cap import MAX_RECORDS_PER_USER_OP
from metadata_records.acls import AclBindingFilter, StandardAcl
from metadata_records.acls import AclOperation as Op
from metadata_records.acls import AclPermissionType as Perm
from metadata_records.acls import AclResourceType as RT
from metadata_records.acls import PatternType as PT
from metadata_records.errors import Errors
from metadata_records.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from tests.harness import ControllerHarness

TEST_ACLS = [
    StandardAcl(RT.CLUSTER, "kafka-cluster", PT.LITERAL, "User:*", "*", Op.ALTER, Perm.ALLOW),
    StandardAcl(RT.TOPIC, "foo_", PT.PREFIXED, "User:*", "*", Op.READ, Perm.ALLOW),
    StandardAcl(RT.GROUP, "mygroup", PT.LITERAL, "User:foo", "*", Op.READ, Perm.DENY),
    StandardAcl(RT.GROUP, "mygroup", PT.PREFIXED, "User:foo", "*", Op.READ, Perm.DENY),
    StandardAcl(RT.GROUP, "foo", PT.PREFIXED, "User:foo", "*", Op.READ, Perm.DENY),
]
VALID = StandardAcl(RT.TOPIC, "*", PT.LITERAL, "User:*", "*", Op.ALTER, Perm.ALLOW)


def create(h, *acls):
    return h.run(CreateAclsRequest(tuple(acls)))


def delete(h, *filters):
    return h.run(DeleteAclsRequest(tuple(filters)))


def outcomes(response):
    return [(r.error, r.error_message) for r in response.results]


def test_validate_new_acl():
    h = ControllerHarness()
    cases = [
        (VALID._replace(pattern_type=PT.UNKNOWN), "Invalid patternType UNKNOWN"),
        (VALID._replace(resource_type=RT.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (VALID._replace(operation=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (VALID._replace(permission_type=Perm.UNKNOWN), "Invalid permissionType UNKNOWN"),
        (VALID._replace(resource_type=RT.ANY), "Invalid resourceType ANY"),
        (VALID._replace(pattern_type=PT.MATCH), "Invalid patternType MATCH"),
        (VALID._replace(pattern_type=PT.ANY), "Invalid patternType ANY"),
        (VALID._replace(operation=Op.ANY), "Invalid operation ANY"),
        (VALID._replace(permission_type=Perm.ANY), "Invalid permissionType ANY"),
        (VALID._replace(operation=99), "Invalid operation code 99"),
        (VALID._replace(resource_name=""), "Invalid empty resource name"),
        (
            VALID._replace(resource_type=RT.CLUSTER, resource_name="c"),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            VALID._replace(principal="alice"),
            "expected a string in format principalType:principalName but got 'alice'",
        ),
        (VALID._replace(principal=":alice"), "principal ':alice' has an empty principal type"),
        (VALID._replace(host=""), "Host should not be empty (use * for every host)"),
    ]
    r = create(h, VALID, *(acl for acl, _ in cases))
    assert outcomes(r) == [(Errors.NONE, None)] + [
        (Errors.INVALID_REQUEST, message) for _, message in cases
    ]
    assert len(h.last.records) == 1 and len(h.image.acls) == 1


def test_create_acl_delete_acl():
    """testCreateAclDeleteAcl: three created, an invalid one refused in place;
    a LITERAL filter deletes the literal ones, an UNKNOWN filter is refused."""
    h = ControllerHarness()
    r = create(h, *TEST_ACLS[:3], VALID._replace(pattern_type=PT.UNKNOWN))
    assert outcomes(r) == [(Errors.NONE, None)] * 3 + [
        (Errors.INVALID_REQUEST, "Invalid patternType UNKNOWN")
    ]
    assert [type(rec) for rec in h.last.records] == [AccessControlEntryRecord] * 3
    assert sorted(h.image.acls.values()) == sorted(TEST_ACLS[:3])
    r = delete(
        h,
        AclBindingFilter(RT.ANY, None, PT.LITERAL),
        AclBindingFilter(RT.UNKNOWN, None, PT.LITERAL),
    )
    first, second = r.filter_results
    assert first.error is Errors.NONE
    assert set(first.matching_acls) == {TEST_ACLS[0], TEST_ACLS[2]}
    assert (second.error, second.error_message) == (
        Errors.INVALID_REQUEST,
        "Unknown patternFilter.",
    )
    assert list(h.image.acls.values()) == [TEST_ACLS[1]]


def test_validate_filter():
    h = ControllerHarness()
    r = delete(
        h,
        AclBindingFilter(RT.ANY, "*", PT.LITERAL, "User:*", "*"),
        AclBindingFilter(RT.ANY, "*", PT.UNKNOWN, "User:*", "*"),
        AclBindingFilter(RT.ANY, "*", PT.MATCH, "User:*", "*", Op.ANY, Perm.UNKNOWN),
    )
    assert [(f.error, f.error_message) for f in r.filter_results] == [
        (Errors.NONE, None),
        (Errors.INVALID_REQUEST, "Unknown patternFilter."),
        (Errors.INVALID_REQUEST, "Unknown entryFilter."),
    ]


def test_an_identical_binding_creates_nothing_but_succeeds():
    h = ControllerHarness()
    r = create(h, TEST_ACLS[0], TEST_ACLS[0])
    assert outcomes(r) == [(Errors.NONE, None)] * 2
    assert len(h.last.records) == 1
    acl_id = h.last.records[0].id
    r = create(h, TEST_ACLS[0], TEST_ACLS[1])
    assert outcomes(r) == [(Errors.NONE, None)] * 2
    assert [rec.id != acl_id for rec in h.last.records] == [True]
    assert h.image.acls[acl_id] == TEST_ACLS[0] and len(h.image.acls) == 2


def test_delete_dedupe():
    """testDeleteDedupe: one removal however many filters match the ACL."""
    h = ControllerHarness()
    binding = StandardAcl(
        RT.TOPIC, "topic-1", PT.LITERAL, "User:user", "10.0.0.1", Op.ALL, Perm.ALLOW
    )
    create(h, binding)
    acl_id = h.last.records[0].id
    exact = AclBindingFilter(*binding)
    for filters in ([AclBindingFilter()], [exact], [AclBindingFilter(), exact]):
        result = h.controller.handle(DeleteAclsRequest(tuple(filters)), h.now_ms)
        h.controller.committed(h.image)  # decided only: the next one sees the ACL again
        assert result.records == (RemoveAccessControlEntryRecord(id=acl_id),)
        assert [f.matching_acls for f in result.response.filter_results] == [(binding,)] * len(
            filters
        )
    delete(h, AclBindingFilter(), exact)
    assert h.image.acls == {}
    r = delete(h, exact)
    assert r.filter_results[0].matching_acls == () and h.last.records == ()


def test_load_snapshot_and_a_new_leader_keep_the_acls():
    h = ControllerHarness()
    create(h, *TEST_ACLS)
    h.new_leader()
    assert h.replayed() == h.image
    r = create(h, *TEST_ACLS)
    assert outcomes(r) == [(Errors.NONE, None)] * 5 and h.last.records == ()


PATTERNS = [
    StandardAcl(RT.TOPIC, "foo", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
    StandardAcl(RT.TOPIC, "*", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
    StandardAcl(RT.TOPIC, "fo", PT.PREFIXED, "User:a", "*", Op.READ, Perm.ALLOW),
    StandardAcl(RT.TOPIC, "foo", PT.PREFIXED, "User:b", "h1", Op.WRITE, Perm.DENY),
    StandardAcl(RT.GROUP, "foo", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
]


@pytest.mark.parametrize(
    "f, expected",
    [
        (AclBindingFilter(), [0, 1, 2, 3, 4]),
        (AclBindingFilter(RT.TOPIC), [0, 1, 2, 3]),
        # ANY with a name: the name exactly, whatever the pattern type.
        (AclBindingFilter(RT.TOPIC, "foo"), [0, 3]),
        (AclBindingFilter(RT.ANY, "foo", PT.LITERAL), [0, 4]),
        (AclBindingFilter(RT.TOPIC, "foo", PT.PREFIXED), [3]),
        # MATCH: every pattern that applies to the named resource.
        (AclBindingFilter(RT.TOPIC, "foo", PT.MATCH), [0, 1, 2, 3]),
        (AclBindingFilter(RT.TOPIC, "food", PT.MATCH), [1, 2, 3]),
        (AclBindingFilter(RT.TOPIC, "bar", PT.MATCH), [1]),
        (AclBindingFilter(RT.TOPIC, "*", PT.LITERAL), [1]),
        (AclBindingFilter(principal="User:b"), [3]),
        (AclBindingFilter(host="h1"), [3]),
        (AclBindingFilter(host="*", operation=Op.READ), [0, 1, 2, 4]),
        (AclBindingFilter(permission_type=Perm.DENY), [3]),
        (AclBindingFilter(RT.TOPIC, None, PT.MATCH, "User:a"), [0, 1, 2]),
    ],
)
def test_filter_semantics(f, expected):
    assert [i for i, acl in enumerate(PATTERNS) if f.matches(acl)] == expected
    h = ControllerHarness()
    create(h, *PATTERNS)
    r = delete(h, f)
    assert sorted(r.filter_results[0].matching_acls) == sorted(PATTERNS[i] for i in expected)
    assert sorted(h.image.acls.values()) == sorted(
        acl for i, acl in enumerate(PATTERNS) if i not in expected
    )


def test_create_past_the_record_cap_writes_nothing():
    h = ControllerHarness()
    acls = [VALID._replace(resource_name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    r = create(h, *acls)
    assert h.last.records == () and h.image.acls == {}
    assert {e for e, _ in outcomes(r)} == {Errors.POLICY_VIOLATION}
    assert len(r.results) == len(acls)
    r = create(h, *acls[:MAX_RECORDS_PER_USER_OP])
    assert len(h.image.acls) == MAX_RECORDS_PER_USER_OP


def test_delete_past_the_record_cap_writes_nothing():
    h = ControllerHarness()
    acls = [VALID._replace(resource_name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP)]
    create(h, *acls)
    create(h, VALID._replace(resource_name="one-more"))
    r = delete(h, AclBindingFilter(), AclBindingFilter(RT.GROUP))
    assert h.last.records == () and len(h.image.acls) == MAX_RECORDS_PER_USER_OP + 1
    assert [f.error for f in r.filter_results] == [Errors.POLICY_VIOLATION] * 2
    r = delete(h, AclBindingFilter(RT.TOPIC, "one-more"))
    assert len(h.last.records) == 1


def test_replay_refuses_what_could_not_be_created_and_unknown_removals():
    h = ControllerHarness()
    create(h, TEST_ACLS[0])
    acl_id = h.last.records[0].id
    before = h.image.ignored_records
    h.commit(
        [
            VALID._replace(resource_type=RT.ANY).to_record("AAAAAAAAAAAAAAAAAAAAEA"),
            VALID._replace(operation=42).to_record("AAAAAAAAAAAAAAAAAAAAEQ"),
            VALID._replace(principal="nobody").to_record("AAAAAAAAAAAAAAAAAAAAEg"),
            TEST_ACLS[1].to_record(acl_id),  # an id in use
            TEST_ACLS[0].to_record("AAAAAAAAAAAAAAAAAAAAEw"),  # the same binding again
            RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAAFA"),
        ]
    )
    assert h.image.ignored_records == before + 6
    assert h.image.acls == {acl_id: TEST_ACLS[0]}
    h.commit([RemoveAccessControlEntryRecord(id=acl_id), RemoveAccessControlEntryRecord(id=acl_id)])
    assert h.image.acls == {} and h.image.ignored_records == before + 7
