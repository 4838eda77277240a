"""metadata_records/authorizer.py against Kafka's StandardAuthorizerTest, case
for case (StandardAuthorizer's rules: super users, DENY before ALLOW, wildcard
and prefixed resources, User:* and host *, implied operations,
allow.everyone.if.no.acl.found), and kept current from the log."""

import itertools

import pytest

from metadata_records.acls import AclOperation as Op
from metadata_records.acls import AclPermissionType as Perm
from metadata_records.acls import AclResourceType as RT
from metadata_records.acls import PatternType as PT
from metadata_records.acls import StandardAcl
from metadata_records.authorizer import ALLOWED, DENIED, StandardAuthorizer, _result
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)

LOCALHOST = "127.0.0.1"
_ids = (f"{i:022d}" for i in itertools.count())


def acl(rt, name, pt, principal, host, op, perm):
    return StandardAcl(rt, name, pt, principal, host, op, perm)


def authorizer(*acls, **options):
    """createAndInitializeStandardAuthorizer: super.users=User:superman."""
    a = StandardAuthorizer(super_users={"User:superman"}, **options)
    for one in acls:
        assert a.add_acl(next(_ids), one)
    return a


def check(a, user, actions, host=LOCALHOST):
    return [a.authorize(f"User:{user}", host, op, rt, name) for op, rt, name in actions]


def foo_acl(op, perm):
    return acl(RT.TOPIC, "foo_", PT.PREFIXED, "User:bob", "*", op, perm)


def bar_acl(op, perm):
    return acl(RT.GROUP, "bar", PT.LITERAL, "User:*", "*", op, perm)


BOB = ("User:bob", "User:*")


def test_find_result_implication():
    for op in (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert _result(foo_acl(op, Perm.ALLOW), BOB, LOCALHOST, Op.DESCRIBE) is ALLOWED
    assert _result(foo_acl(Op.CREATE, Perm.ALLOW), BOB, LOCALHOST, Op.DESCRIBE) is None
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):  # DENY implies nothing
        assert _result(foo_acl(op, Perm.DENY), BOB, LOCALHOST, Op.DESCRIBE) is None
    assert _result(foo_acl(Op.DESCRIBE, Perm.DENY), BOB, LOCALHOST, Op.DESCRIBE) is DENIED
    for op in (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert _result(foo_acl(op, Perm.ALLOW), BOB, LOCALHOST, Op.DESCRIBE_CONFIGS) is ALLOWED
    assert (
        _result(foo_acl(Op.ALTER_CONFIGS, Perm.DENY), BOB, LOCALHOST, Op.DESCRIBE_CONFIGS) is None
    )
    assert _result(foo_acl(Op.ALTER_CONFIGS, Perm.DENY), BOB, LOCALHOST, Op.ALTER_CONFIGS) is DENIED


def test_find_result_principal_matching():
    assert _result(foo_acl(Op.READ, Perm.ALLOW), BOB, LOCALHOST, Op.READ) is ALLOWED
    alice = ("User:alice", "User:*")
    assert _result(foo_acl(Op.READ, Perm.ALLOW), alice, LOCALHOST, Op.READ) is None
    assert _result(bar_acl(Op.READ, Perm.DENY), alice, LOCALHOST, Op.READ) is DENIED


def test_simple_authorizations():
    a = authorizer(
        foo_acl(Op.READ, Perm.ALLOW),
        foo_acl(Op.WRITE, Perm.ALLOW),
        bar_acl(Op.DESCRIBE_CONFIGS, Perm.ALLOW),
        bar_acl(Op.ALTER_CONFIGS, Perm.ALLOW),
    )
    assert check(a, "bob", [(Op.READ, RT.TOPIC, "foo_")]) == [ALLOWED]
    assert check(a, "fred", [(Op.ALTER_CONFIGS, RT.GROUP, "bar")]) == [ALLOWED]


def test_deny_precedence_with_operation_all():
    a = authorizer(
        acl(RT.TOPIC, "foo", PT.LITERAL, "User:alice", "*", Op.ALL, Perm.DENY),
        acl(RT.TOPIC, "foo", PT.PREFIXED, "User:alice", "*", Op.READ, Perm.ALLOW),
        acl(RT.TOPIC, "foo", PT.LITERAL, "User:*", "*", Op.ALL, Perm.DENY),
        acl(RT.TOPIC, "foo", PT.PREFIXED, "User:*", "*", Op.DESCRIBE, Perm.ALLOW),
    )
    assert check(
        a,
        "alice",
        [(Op.WRITE, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "foo"),
         (Op.DESCRIBE, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "foobar")],
    ) == [DENIED, DENIED, DENIED, ALLOWED]  # fmt: skip
    assert check(
        a,
        "bob",
        [(Op.DESCRIBE, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "foo"), (Op.WRITE, RT.TOPIC, "foo"),
         (Op.DESCRIBE, RT.TOPIC, "foobaz"), (Op.READ, RT.TOPIC, "foobaz")],
    ) == [DENIED, DENIED, DENIED, ALLOWED, DENIED]  # fmt: skip


def test_topic_acl_with_operation_all():
    a = authorizer(
        acl(RT.TOPIC, "foo", PT.LITERAL, "User:*", "*", Op.ALL, Perm.ALLOW),
        acl(RT.TOPIC, "bar", PT.PREFIXED, "User:alice", "*", Op.ALL, Perm.ALLOW),
        acl(RT.TOPIC, "baz", PT.LITERAL, "User:bob", "*", Op.ALL, Perm.ALLOW),
    )
    actions = [(Op.WRITE, RT.TOPIC, "foo"), (Op.DESCRIBE_CONFIGS, RT.TOPIC, "bar"),
               (Op.DESCRIBE, RT.TOPIC, "baz")]  # fmt: skip
    assert check(a, "alice", actions) == [ALLOWED, ALLOWED, DENIED]
    actions = [(Op.WRITE, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "bar"),
               (Op.DESCRIBE, RT.TOPIC, "baz")]  # fmt: skip
    assert check(a, "bob", actions) == [ALLOWED, DENIED, ALLOWED]
    actions = [(Op.DESCRIBE, RT.TOPIC, "foo"), (Op.WRITE, RT.TOPIC, "bar"),
               (Op.READ, RT.TOPIC, "baz")]  # fmt: skip
    assert check(a, "malory", actions) == [ALLOWED, DENIED, DENIED]


def test_host_address_acl_validation():
    host1, host2 = "192.168.1.1", "192.168.1.2"
    a = authorizer(
        acl(RT.TOPIC, "foo", PT.LITERAL, "User:alice", host1, Op.READ, Perm.DENY),
        acl(RT.TOPIC, "foo", PT.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW),
        acl(RT.TOPIC, "bar", PT.LITERAL, "User:bob", host2, Op.READ, Perm.ALLOW),
        acl(RT.TOPIC, "bar", PT.LITERAL, "User:*", LOCALHOST, Op.DESCRIBE, Perm.ALLOW),
    )
    actions = [(Op.READ, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "bar"),
               (Op.DESCRIBE, RT.TOPIC, "bar")]  # fmt: skip
    assert check(a, "alice", actions, LOCALHOST) == [ALLOWED, DENIED, ALLOWED]
    assert check(a, "alice", actions, host1) == [DENIED, DENIED, DENIED]
    assert check(a, "alice", actions, host2) == [ALLOWED, DENIED, DENIED]
    assert check(a, "bob", actions, LOCALHOST) == [DENIED, DENIED, ALLOWED]
    assert check(a, "bob", actions, host1) == [DENIED, DENIED, DENIED]
    assert check(a, "bob", actions, host2) == [DENIED, ALLOWED, ALLOWED]


MANY = (
    acl(RT.TOPIC, "green2", PT.LITERAL, "User:*", "*", Op.READ, Perm.ALLOW),
    acl(RT.TOPIC, "green", PT.PREFIXED, "User:bob", "*", Op.READ, Perm.ALLOW),
    acl(RT.TOPIC, "betamax4", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW),
    acl(RT.TOPIC, "betamax", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW),
    acl(RT.TOPIC, "beta", PT.PREFIXED, "User:*", "*", Op.READ, Perm.ALLOW),
    acl(RT.TOPIC, "alpha", PT.PREFIXED, "User:*", "*", Op.READ, Perm.ALLOW),
    acl(RT.TOPIC, "alp", PT.PREFIXED, "User:bob", "*", Op.READ, Perm.DENY),
    acl(RT.GROUP, "*", PT.LITERAL, "User:bob", "*", Op.WRITE, Perm.ALLOW),
    acl(RT.GROUP, "wheel", PT.LITERAL, "User:*", "*", Op.WRITE, Perm.DENY),
)


def test_authorization_with_many_acls():
    a = authorizer(*MANY)
    assert check(a, "bob", [(Op.READ, RT.TOPIC, "green1"), (Op.WRITE, RT.GROUP, "wheel")]) == [
        ALLOWED,
        DENIED,
    ]
    assert check(
        a,
        "bob",
        [(Op.READ, RT.TOPIC, "alpha"), (Op.WRITE, RT.GROUP, "arbitrary"),
         (Op.READ, RT.TOPIC, "ala")],
    ) == [DENIED, ALLOWED, DENIED]  # fmt: skip


def test_prefix_acls():
    a = authorizer(
        acl(RT.TOPIC, "fooa", PT.PREFIXED, "User:alice", "*", Op.ALL, Perm.ALLOW),
        acl(RT.TOPIC, "foobar", PT.LITERAL, "User:bob", "*", Op.ALL, Perm.ALLOW),
        acl(RT.TOPIC, "f", PT.PREFIXED, "User:bob", "*", Op.ALL, Perm.ALLOW),
    )
    actions = [(Op.WRITE, RT.TOPIC, "foobarr"), (Op.READ, RT.TOPIC, "goobar"),
               (Op.READ, RT.TOPIC, "fooa")]  # fmt: skip
    assert check(a, "bob", actions) == [ALLOWED, DENIED, ALLOWED]
    actions = [(Op.DESCRIBE, RT.TOPIC, "fooa"), (Op.WRITE, RT.TOPIC, "bar"),
               (Op.READ, RT.TOPIC, "baz")]  # fmt: skip
    assert check(a, "alice", actions) == [ALLOWED, DENIED, DENIED]


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_allow_everyone_if_no_acl_found(allow_everyone):
    """testAllowEveryoneIfNoAclFoundConfigEnabled / Disabled: only a resource
    with no ACL at all falls to the setting; an ACL for someone else denies."""
    a = StandardAuthorizer({"User:alice", "User:chris"}, allow_everyone)
    a.add_acl("id1", acl(RT.TOPIC, "topic1", PT.LITERAL, "User:Alice", "*", Op.READ, Perm.ALLOW))
    assert check(a, "Bob", [(Op.READ, RT.TOPIC, "topic1")]) == [DENIED]
    expected = ALLOWED if allow_everyone else DENIED
    assert check(a, "Bob", [(Op.READ, RT.TOPIC, "topic2")]) == [expected]
    assert check(a, "Bob", [(Op.READ, RT.GROUP, "g")]) == [expected]


def test_super_users_may_do_everything_even_when_denied():
    a = authorizer(acl(RT.TOPIC, "*", PT.LITERAL, "User:*", "*", Op.ALL, Perm.DENY))
    assert check(a, "superman", [(Op.ALTER, RT.TOPIC, "t"), (Op.READ, RT.GROUP, "g")]) == [
        ALLOWED,
        ALLOWED,
    ]
    assert check(a, "bob", [(Op.ALTER, RT.TOPIC, "t")]) == [DENIED]
    # Super users are principals with their type: Group:superman is not User:superman.
    assert a.authorize("Group:superman", LOCALHOST, Op.READ, RT.TOPIC, "t") is DENIED


def test_the_wildcard_resource_applies_to_every_name_of_its_type_only():
    a = authorizer(acl(RT.TOPIC, "*", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW))
    assert check(a, "bob", [(Op.READ, RT.TOPIC, "any"), (Op.READ, RT.GROUP, "any")]) == [
        ALLOWED,
        DENIED,
    ]


def test_kept_current_from_records_and_equal_to_one_built_from_the_image():
    read = acl(RT.TOPIC, "orders", PT.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW)
    deny = acl(RT.TOPIC, "ord", PT.PREFIXED, "User:bob", "10.0.0.9", Op.READ, Perm.DENY)
    records = [read.to_record("AAAAAAAAAAAAAAAAAAAAAg"), deny.to_record("AAAAAAAAAAAAAAAAAAAAAw")]
    a = StandardAuthorizer()
    for r in records:
        a.replay(r)
    assert check(a, "bob", [(Op.READ, RT.TOPIC, "orders")]) == [ALLOWED]
    assert check(a, "bob", [(Op.READ, RT.TOPIC, "orders")], "10.0.0.9") == [DENIED]
    removal = RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAAAw")
    a.replay(removal)
    assert check(a, "bob", [(Op.READ, RT.TOPIC, "orders")], "10.0.0.9") == [ALLOWED]
    image = apply_records(EMPTY_IMAGE, [*records, removal])
    b = StandardAuthorizer.from_image(image)
    assert b.acl_count() == a.acl_count() == 1
    assert check(b, "bob", [(Op.READ, RT.TOPIC, "orders")], "10.0.0.9") == [ALLOWED]
    # An unknown removal and an invalid ACL change nothing, as on replay.
    a.replay(removal)
    bad = AccessControlEntryRecord(
        id="AAAAAAAAAAAAAAAAAAAABA", resource_type=RT.ANY, resource_name="x",
        pattern_type=PT.LITERAL, principal="User:bob", host="*", operation=Op.READ,
        permission_type=Perm.ALLOW,
    )  # fmt: skip
    a.replay(bad)
    assert a.acl_count() == 1
