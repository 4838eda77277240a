"""The OpenAPI document: every path of docs/api.md, named and documented models,
resolvable references, 400 (never FastAPI's 422); and real answers match the
response models the document publishes."""

from __future__ import annotations

import typing
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from api import models as M
from metadata_records.codec import record_from_obj

from .local_node import registration_body

API_MD_OPERATIONS = {
    ("post", "/v1/brokers/register"),
    ("post", "/v1/brokers/heartbeat"),
    ("post", "/v1/alter-partition"),
    ("post", "/v1/topics"),
    ("delete", "/v1/topics/{name}"),
    ("post", "/v1/topics/{name}/partitions"),
    ("post", "/v1/reassignments"),
    ("post", "/v1/elect-leaders"),
    ("post", "/v1/features"),
    ("post", "/v1/quorum/transfer-leadership"),
    ("post", "/v1/quorum/add-voter"),  # membership (README), beside docs/api.md's list
    ("post", "/v1/quorum/remove-voter"),
    ("post", "/v1/quorum/update-voter"),
    ("get", "/v1/brokers"),
    ("get", "/v1/brokers/{id}"),
    ("get", "/v1/topics"),
    ("get", "/v1/topics/{name}"),
    ("get", "/v1/log"),
    ("get", "/v1/snapshot"),
    ("get", "/v1/backup"),
    ("get", "/v1/quorum/status"),
    ("get", "/livez"),
    ("get", "/readyz"),
    ("get", "/metrics"),
}
WRITE_BODIES = {
    "/v1/brokers/register": "BrokerRegistrationRequest",
    "/v1/brokers/heartbeat": "BrokerHeartbeatRequest",
    "/v1/alter-partition": "AlterPartitionRequest",
    "/v1/topics": "CreateTopicsRequest",
    "/v1/topics/{name}/partitions": "CreatePartitionsRequest",
    "/v1/reassignments": "AlterPartitionReassignmentsRequest",
    "/v1/elect-leaders": "ElectLeadersRequest",
    "/v1/features": "UpdateFeaturesRequest",
    "/v1/quorum/transfer-leadership": "TransferLeadershipRequest",
    "/v1/quorum/add-voter": "AddVoterRequest",
    "/v1/quorum/remove-voter": "RemoveVoterRequest",
    "/v1/quorum/update-voter": "UpdateVoterRequest",
}


@pytest.fixture(scope="module")
def schema(local, app):
    r = local.request(app, "GET", "/openapi.json")
    assert r.status_code == 200
    return r.json()


def refs(node: Any):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def test_every_operation_of_api_md_is_documented(schema):
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "metaquorum"
    documented = {
        (method, path)
        for path, item in schema["paths"].items()
        for method in item
        if method in ("get", "post", "delete", "put", "patch")
    }
    assert API_MD_OPERATIONS <= documented
    for method, path in API_MD_OPERATIONS:
        operation = schema["paths"][path][method]
        assert operation.get("summary"), (method, path)
        assert "200" in operation["responses"], (method, path)
        assert "422" not in operation["responses"], (method, path)


def test_request_bodies_are_named_models(schema):
    components = schema["components"]["schemas"]
    for path, model in WRITE_BODIES.items():
        body = schema["paths"][path]["post"]["requestBody"]
        assert body["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{model}"
        }
        assert model in components
        assert components[model].get("description"), model
    register = components["BrokerRegistrationRequest"]["properties"]
    assert register["brokerId"]["maximum"] == 2**31 - 1
    assert register["brokerId"]["format"] == "int32"
    assert register["previousBrokerEpoch"]["format"] == "int64"
    assert "incarnationId" in components["BrokerRegistrationRequest"]["required"]
    listener = components["Listener"]["properties"]
    assert (listener["port"]["minimum"], listener["port"]["maximum"]) == (0, 65535)
    partition = components["AlterPartitionPartitionData"]["properties"]
    assert {"newIsr", "newIsrWithEpochs", "leaderRecoveryState"} <= set(partition)
    version = {p["name"]: p for p in schema["paths"]["/v1/alter-partition"]["post"]["parameters"]}
    assert version["version"]["schema"]["maximum"] == 3


def test_errors_are_documented_and_every_reference_resolves(schema):
    components = schema["components"]["schemas"]
    assert "HTTPValidationError" not in components
    for name in (
        "ErrorResponse",
        "NotControllerResponse",
        "OffsetTooOldResponse",
        "BrokerOut",
        "TopicOut",
        "RecordOut",
    ):
        assert name in components, name
    register = schema["paths"]["/v1/brokers/register"]["post"]["responses"]
    assert {"200", "307", "400", "401", "403", "413", "429", "503"} <= set(register)
    assert register["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/BrokerRegistrationResponse"
    }
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if path not in ("/metrics", "/v1/backup"):  # text and a file: no JSON
                assert "$ref" in str(
                    operation["responses"]["200"]["content"]["application/json"]
                ), (method, path)
    assert register["307"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/NotControllerResponse"
    )
    assert "410" in schema["paths"]["/v1/log"]["get"]["responses"]
    assert "404" in schema["paths"]["/v1/brokers/{id}"]["get"]["responses"]
    for ref in set(refs(schema)):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[1] in components, ref
    assert "bearer" in str(schema["components"].get("securitySchemes", {})).lower()


def test_docs_page(local, app):
    r = local.request(app, "GET", "/docs")
    assert r.status_code == 200
    assert "swagger" in r.text.lower()


# ---------------------------------------------------------------- answers match the models


def conforms(model: type[BaseModel], obj: Any, where: str = "body") -> None:
    """``obj`` has exactly the model's camelCase keys (AlterPartition topics carry
    one of topicName/topicId), and every nested value fits its model."""
    assert isinstance(obj, dict), where
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    optional_echo = {
        M.AlterPartitionTopicResult: {"topicName", "topicId"},
        M.RecordOut: {"who"},  # the log's who: absent where none (issue 43)
        M.WhoOut: {"address", "requestId", "rule"},  # left out when empty
    }.get(model, set())
    assert set(obj) <= set(fields), (where, set(obj) - set(fields))
    assert set(fields) - optional_echo <= set(obj), (where, set(fields) - set(obj))
    model.model_validate(obj)
    for key, info in fields.items():
        if key not in obj:
            continue
        annotation = info.annotation
        args = typing.get_args(annotation)
        inner = args[0] if typing.get_origin(annotation) is list and args else annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            values = obj[key] if isinstance(obj[key], list) else [obj[key]]
            for i, value in enumerate(values):
                conforms(inner, value, f"{where}.{key}[{i}]")


def test_answers_match_the_published_models(local, app):
    def call(method, path, body=None):
        r = local.request(app, method, path, json=body)
        assert r.status_code == 200, r.text
        return r.json()

    reg = call("POST", "/v1/brokers/register", registration_body(local.cluster_id, 1))
    conforms(M.BrokerRegistrationResponse, reg)
    hb = call(
        "POST",
        "/v1/brokers/heartbeat",
        {"brokerId": 1, "brokerEpoch": reg["brokerEpoch"], "currentMetadataOffset": 1 << 40},
    )
    conforms(M.BrokerHeartbeatResponse, hb)
    created = call("POST", "/v1/topics", {"topics": [{"name": "t", "numPartitions": 1}]})
    conforms(M.CreateTopicsResponse, created)
    topic = call("GET", "/v1/topics/t")
    conforms(M.TopicOut, topic)
    p = topic["partitions"][0]
    for version, key, value in ((3, "topicId", topic["topicId"]), (1, "topicName", "t")):
        isr = {"newIsrWithEpochs": [{"brokerId": 1}]} if version == 3 else {"newIsr": [1]}
        ap = call(
            "POST",
            f"/v1/alter-partition?version={version}",
            {
                "brokerId": 1,
                "brokerEpoch": reg["brokerEpoch"],
                "topics": [
                    {
                        key: value,
                        "partitions": [
                            {
                                "partitionIndex": 0,
                                "leaderEpoch": p["leaderEpoch"],
                                "partitionEpoch": p["partitionEpoch"],
                                **isr,
                            }
                        ],
                    }
                ],
            },
        )
        conforms(M.AlterPartitionResponse, ap)
    conforms(M.CreatePartitionsResponse, call("POST", "/v1/topics/t/partitions", {"count": 2}))
    conforms(
        M.AlterPartitionReassignmentsResponse,
        call(
            "POST",
            "/v1/reassignments",
            {"topics": [{"name": "t", "partitions": [{"partitionIndex": 0, "replicas": None}]}]},
        ),
    )
    conforms(
        M.ElectLeadersResponse,
        call("POST", "/v1/elect-leaders", {"topicPartitions": [{"topic": "t", "partitions": [0]}]}),
    )
    conforms(
        M.UpdateFeaturesResponse,
        call("POST", "/v1/features", {"name": "metadata.version", "level": 12}),
    )
    conforms(M.BrokersOut, call("GET", "/v1/brokers"))
    conforms(M.BrokerOut, call("GET", "/v1/brokers/1"))
    conforms(M.TopicsOut, call("GET", "/v1/topics"))
    conforms(M.LogOut, call("GET", "/v1/log"))
    conforms(M.SnapshotOut, call("GET", "/v1/snapshot"))
    conforms(M.QuorumStatusOut, call("GET", "/v1/quorum/status"))
    conforms(M.HealthOut, call("GET", "/readyz"))
    conforms(M.HealthOut, call("GET", "/livez"))
    conforms(M.DeleteTopicsResponse, call("DELETE", "/v1/topics/t"))
    missing = local.request(app, "GET", "/v1/topics/t")
    conforms(M.ErrorResponse, missing.json())


# ---------------------------------------------------------------- for clients in other languages


def test_the_document_passes_openapi_spec_validator(schema):
    from openapi_spec_validator import validate

    validate(schema)  # raises, naming the place, if the document is not valid OpenAPI


def validator(schema: dict, target: dict):
    """A JSON Schema 2020-12 validator (OpenAPI 3.1's dialect) for ``target``,
    with the document's ``#/components/schemas/...`` references resolvable."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator({**target, "components": schema["components"]})


def errors_of(schema: dict, target: dict, value: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or 'body'}: {e.message}"
        for e in validator(schema, target).iter_errors(value)
    ]


def error_names_match_codes(value: Any, where: str) -> None:
    from metadata_records.errors import Errors

    if isinstance(value, dict):
        if "errorCode" in value:
            code = Errors(value["errorCode"])
            assert value.get("errorName") == code.name, (where, value)
        for key, inner in value.items():
            error_names_match_codes(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            error_names_match_codes(inner, f"{where}[{i}]")


def test_every_schema_has_a_description_and_examples_valid_against_it(schema):
    components = schema["components"]["schemas"]
    for name, definition in components.items():
        assert definition.get("description"), f"schema {name} has no description"
        undescribed = [
            p for p, v in definition.get("properties", {}).items() if "description" not in v
        ]
        assert not undescribed, f"schema {name}: properties without a description: {undescribed}"
        assert definition.get("examples"), f"schema {name} has no example"
        for i, example in enumerate(definition["examples"]):
            problems = errors_of(schema, {"$ref": f"#/components/schemas/{name}"}, example)
            assert not problems, f"schema {name}, example {i} does not fit it: {problems}"
            error_names_match_codes(example, f"{name} example {i}")
            # The models, stricter than the JSON schema (UUIDs, Kafka's int types), take it too.
            model = getattr(M, name)
            model.model_validate_json(orjson.dumps(example))
            if name == "RecordOut":  # a record as the codec writes it
                record_from_obj(example)


HEALTH = ("/livez", "/readyz", "/metrics")


def test_every_operation_has_a_good_name_and_documents_each_error_status(schema):
    operation_ids = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            operation_ids.append(operation.get("operationId"))
            assert (operation.get("operationId") or "_").isalnum(), (
                f"{where}: operationId {operation.get('operationId')!r} is not a plain camelCase "
                "name (generators make method names of it)"
            )
            responses = operation["responses"]
            expected = set()
            if (method, path) in API_MD_OPERATIONS and path not in HEALTH:
                expected = {"400", "401", "403", "429"}
                if path != "/v1/quorum/status":  # served even when the node is not ready
                    expected.add("503")
            if method in ("post", "delete"):
                expected |= {"307", "413", "415"}
            assert expected <= set(responses), f"{where}: undocumented {expected - set(responses)}"
            for status, response in responses.items():
                assert response.get("description"), f"{where} {status}: no description"
                for header, spec in response.get("headers", {}).items():
                    assert not errors_of(schema, spec["schema"], spec["example"]), (where, header)
                if status == "200":
                    continue
                media = response["content"]["application/json"]
                examples = [e["value"] for e in media.get("examples", {}).values()]
                assert examples, f"{where} {status}: no example of the error body"
                for example in examples:
                    problems = errors_of(schema, media["schema"], example)
                    assert not problems, f"{where} {status}: example does not fit: {problems}"
                    error_names_match_codes(example, f"{where} {status}")
                if status in ("429", "503") and path != "/livez":
                    assert response["headers"]["Retry-After"]["required"], (where, status)
                if status == "307":
                    assert response["headers"]["Location"]["required"], where
    assert len(operation_ids) == len(set(operation_ids)), "operationIds are not unique"
