"""CreateAcls, DeleteAcls and DescribeAcls over HTTP against a real
single-voter node (docs/api-additions.md): Kafka's names in any case, one
result per creation and per filter, a per-entry INVALID_REQUEST naming an
unknown name, the snapshot carrying the ACLs."""

from __future__ import annotations

from metadata_records.codec import record_from_obj
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE

from .test_api_admin import post


def creation(name, principal="User:alice", op="READ", perm="ALLOW", **kw):
    return {
        "resourceType": kw.pop("resourceType", "TOPIC"),
        "resourceName": name,
        "resourcePatternType": kw.pop("resourcePatternType", "LITERAL"),
        "principal": principal,
        "host": kw.pop("host", "*"),
        "operation": op,
        "permissionType": perm,
        **kw,
    }


def create(local, app, *creations):
    body = post(local, app, "/v1/acls", {"creations": list(creations)})
    assert (body["errorCode"], body["throttleTimeMs"]) == (0, 0)
    return [(r["errorName"], r["errorMessage"]) for r in body["results"]]


def delete(local, app, *filters):
    body = post(local, app, "/v1/acls/delete", {"filters": list(filters)})
    assert body["errorCode"] == 0
    return body["filterResults"]


def describe(local, app, **params):
    r = local.request(app, "GET", "/v1/acls", params=params)
    assert r.status_code == 200, r.text
    assert int(r.headers["X-Metadata-Offset"]) >= 0
    return r.json()


def bindings(body):
    return sorted(
        (r["resourceType"], r["resourceName"], r["patternType"], a["principal"], a["host"],
         a["operation"], a["permissionType"])
        for r in body["resources"]
        for a in r["acls"]
    )  # fmt: skip


def test_create_describe_delete_with_names_in_any_case(local, app):
    assert (
        create(
            local,
            app,
            creation("orders"),
            creation("orders"),  # the same binding: succeeds, nothing more written
            creation("ord", "User:bob", "write", "deny", resourcePatternType="prefixed"),
            creation("*", "User:*", "Describe", resourceType="group"),
            creation("kafka-cluster", op=7, perm=3, resourceType=4),  # codes too
        )
        == [("NONE", None)] * 5
    )
    body = describe(local, app)
    assert body["errorName"] == "NONE"
    assert bindings(body) == [
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "ALTER", "ALLOW"),
        ("GROUP", "*", "LITERAL", "User:*", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC", "ord", "PREFIXED", "User:bob", "*", "WRITE", "DENY"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
    ]
    # MATCH: every pattern that applies to topic "orders".
    matched = describe(local, app, resourceType="topic", resourceName="orders", patternType="match")
    assert [b[1] for b in bindings(matched)] == ["ord", "orders"]
    assert bindings(describe(local, app, principal="User:bob")) == [
        ("TOPIC", "ord", "PREFIXED", "User:bob", "*", "WRITE", "DENY")
    ]
    assert bindings(describe(local, app, resourceType="TOPIC", resourceName="orders")) == [
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    ]
    results = delete(
        local,
        app,
        {
            "resourceTypeFilter": "TOPIC",
            "resourceNameFilter": "orders",
            "patternTypeFilter": "MATCH",
        },
        {"principalFilter": "User:bob"},
        {"resourceTypeFilter": "DELEGATION_TOKEN"},
    )
    assert [len(f["matchingAcls"]) for f in results] == [2, 1, 0]
    assert results[1]["matchingAcls"][0] == {
        "errorCode": 0, "errorName": "NONE", "errorMessage": None, "rule": None, "resourceType": "TOPIC",
        "resourceName": "ord", "patternType": "PREFIXED", "principal": "User:bob", "host": "*",
        "operation": "WRITE", "permissionType": "DENY",
    }  # fmt: skip
    assert [b[0] for b in bindings(describe(local, app))] == ["CLUSTER", "GROUP"]
    delete(local, app, {})
    assert describe(local, app)["resources"] == []


def test_bad_entries_are_refused_one_by_one_with_their_reason(local, app):
    before = local.node.image.acls
    outcome = create(
        local,
        app,
        creation("a", op="READS"),
        creation("b"),
        creation("c", resourceType="ANY"),
        creation("d", principal="alice"),
        creation("", resourceType="TOPIC"),
        creation("e", resourcePatternType="MATCH"),
        creation("f", perm="unknown"),
        creation("g", resourceType="CLUSTER"),
    )
    assert outcome[0] == (
        "INVALID_REQUEST",
        "operation 'READS' is not one of UNKNOWN, ANY, ALL, READ, WRITE, CREATE, DELETE, "
        "ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, "
        "CREATE_TOKENS, DESCRIBE_TOKENS",
    )
    assert outcome[1:] == [
        ("NONE", None),
        ("INVALID_REQUEST", "Invalid resourceType ANY"),
        (
            "INVALID_REQUEST",
            "expected a string in format principalType:principalName but got 'alice'",
        ),
        ("INVALID_REQUEST", "Invalid empty resource name"),
        ("INVALID_REQUEST", "Invalid patternType MATCH"),
        ("INVALID_REQUEST", "Invalid permissionType UNKNOWN"),
        ("INVALID_REQUEST", "The only valid name for the CLUSTER resource is kafka-cluster"),
    ]
    assert len(local.node.image.acls) == len(before) + 1
    results = delete(
        local, app, {"operation": "READ", "resourceNameFilter": "b"}, {"operation": "REED"},
        {"patternTypeFilter": "UNKNOWN"},
    )  # fmt: skip
    assert [(f["errorName"], len(f["matchingAcls"])) for f in results] == [
        ("NONE", 1),
        ("INVALID_REQUEST", 0),
        ("INVALID_REQUEST", 0),
    ]
    assert results[1]["errorMessage"].startswith("operation 'REED' is not one of")
    assert results[2]["errorMessage"] == "Unknown patternFilter."
    assert local.node.image.acls == before


def test_describe_refuses_an_unknown_query_value(local, app):
    for params, message in [
        ({"resourceType": "TOPICS"}, "resourceType 'TOPICS' is not one of"),
        ({"operation": "unknown"}, "operation UNKNOWN matches nothing"),
    ]:
        r = local.request(app, "GET", "/v1/acls", params=params)
        assert r.status_code == 400, r.text
        assert r.json()["errorName"] == "INVALID_REQUEST"
        assert r.json()["errorMessage"].startswith(message)


def test_a_body_of_the_wrong_shape_is_a_400(local, app):
    for body in ({}, {"creations": [{"resourceType": "TOPIC"}]}, {"creations": "x"},
                 {"creations": [creation("a", principal=7)]}):  # fmt: skip
        r = local.request(app, "POST", "/v1/acls", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["errorName"] == "INVALID_REQUEST"


def test_the_snapshot_carries_the_acls(local, app):
    create(local, app, creation("snap", "User:carol", "ALL", "ALLOW", host="10.0.0.1"))
    r = local.request(app, "GET", "/v1/snapshot")
    assert r.status_code == 200, r.text
    records = [record_from_obj(o) for o in r.json()["records"]]
    image = apply_records(EMPTY_IMAGE, records)
    assert image.acls == local.node.image.acls
    assert any(o["type"] == "ACCESS_CONTROL_ENTRY_RECORD" for o in r.json()["records"])


def test_the_answers_built_without_models_are_what_the_models_say() -> None:
    """CreateAcls' and DeleteAcls' answers are built as plain data (up to
    10,000 entries each); their models, which the OpenAPI document shows,
    take them unchanged."""
    from api import models as M
    from controller import messages as m
    from metadata_records.acls import StandardAcl
    from metadata_records.errors import Errors

    created = m.CreateAclsResponse(
        (m.AclCreationResult(), m.AclCreationResult(Errors.INVALID_REQUEST, "no"))
    )
    obj = M.CreateAclsResponse.obj_from_message(created, {1: "bad name"})
    assert M.CreateAclsResponse.model_validate(obj).to_json_obj() == obj
    assert [r["errorName"] for r in obj["results"]] == [
        "NONE",
        "INVALID_REQUEST",
        "INVALID_REQUEST",
    ]
    acl = StandardAcl(2, "orders", 3, "User:alice", "*", 3, 3)
    deleted = m.DeleteAclsResponse(
        (m.DeleteAclsFilterResult(matching_acls=(acl, acl._replace(principal="User:bob"))),)
    )
    obj = M.DeleteAclsResponse.obj_from_message(deleted, {0: "bad filter"})
    assert M.DeleteAclsResponse.model_validate(obj).to_json_obj() == obj
    assert [len(r["matchingAcls"]) for r in obj["filterResults"]] == [0, 2]
