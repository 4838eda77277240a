"""The seam between api/models_fast.py and the pydantic models of api/models/:
the hot responses built as plain dicts are byte for byte what their models give
(``from_message().to_json_obj()``, what the OpenAPI document describes); the
quick AlterPartition parser accepts only what pydantic accepts and builds the
same request, for valid and invalid bodies alike; and the app answers the same
requests identically with ``models_fast.QUICK`` on and off."""

import json
from contextlib import contextmanager

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import models as M
from api import models_fast as MF
from api.bodies import alter_partition_request, heartbeat_request, registration_request
from api.errors import ApiProblem
from controller import messages as m
from metadata_records.errors import Errors

from .local_node import registration_body

errors = st.sampled_from(list(Errors))
messages = st.none() | st.text(max_size=20)
ints = st.integers(-(2**31), 2**31 - 1)
epochs = st.integers(-1, 2**63 - 1)


def same(model, quick, message) -> None:
    assert orjson.dumps(quick(message)) == orjson.dumps(model.from_message(message).to_json_obj())


@given(errors, messages, st.booleans(), st.booleans(), st.booleans())
def test_heartbeat_response(error, text, caught_up, fenced, shut_down):
    same(
        M.BrokerHeartbeatResponse,
        MF.quick_heartbeat_response_obj,
        m.BrokerHeartbeatResponse(error, text, caught_up, fenced, shut_down),
    )


@given(errors, messages, epochs)
def test_registration_response(error, text, epoch):
    same(
        M.BrokerRegistrationResponse,
        MF.quick_registration_response_obj,
        m.BrokerRegistrationResponse(error, text, epoch),
    )


partition_results = st.builds(
    m.AlterPartitionPartitionResult,
    partition_index=ints,
    error=errors,
    error_message=messages,
    leader_id=ints,
    leader_epoch=ints,
    isr=st.lists(ints, max_size=4).map(tuple),
    leader_recovery_state=st.integers(0, 1),
    partition_epoch=ints,
)
topic_results = st.builds(
    m.AlterPartitionTopicResult,
    partitions=st.lists(partition_results, max_size=4).map(tuple),
    topic_name=st.none() | st.text(max_size=10),
    topic_id=st.none() | st.just("fPZv1VBsRFmnlRvmGcOW9w"),
).filter(lambda t: (t.topic_name is None) != (t.topic_id is None))


@given(errors, messages, st.lists(topic_results, max_size=3).map(tuple))
def test_alter_partition_response(error, text, topics):
    same(
        M.AlterPartitionResponse,
        MF.quick_alter_partition_response_obj,
        m.AlterPartitionResponse(error, text, topics),
    )


# ---------------------------------------------------------------- AlterPartition bodies

UUID_TEXTS = ["fPZv1VBsRFmnlRvmGcOW9w", "7cf66fd5-506c-4459-a795-1be619c396f7", "not-a-uuid", ""]
odd = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=3),
                st.integers(-(2**70), 2**70), st.lists(st.integers(), max_size=2))  # fmt: skip


def maybe(value_strategy):
    """A field that is usually right, sometimes wrong, sometimes missing."""
    return st.one_of(value_strategy, value_strategy, value_strategy, odd, st.just("<missing>"))


def shaped(**fields):
    return st.fixed_dictionaries({k: maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v != "<missing>"}
    )


int32 = st.integers(-(2**31), 2**31 - 1)
states = shaped(brokerId=int32, brokerEpoch=st.integers(-1, 2**63 - 1))
partition_bodies = shaped(
    partitionIndex=int32,
    leaderEpoch=int32,
    partitionEpoch=int32,
    newIsr=st.none() | st.lists(int32, max_size=3),
    newIsrWithEpochs=st.none() | st.lists(states, max_size=3),
    leaderRecoveryState=st.none() | st.integers(-200, 200),
)
topic_bodies = shaped(
    topicName=st.none() | st.text(max_size=5),
    topicId=st.none() | st.sampled_from(UUID_TEXTS),
    partitions=st.lists(partition_bodies, max_size=3),
)
alter_bodies = shaped(brokerId=int32, brokerEpoch=st.integers(-(2**63), 2**63 - 1),
                      topics=st.lists(topic_bodies, max_size=2))  # fmt: skip


def pydantic_message(body: bytes, version: int):
    try:
        return M.AlterPartitionRequest.model_validate_json(body).to_message(version)
    except (ValueError, M.VersionMismatch):  # ValidationError is a ValueError
        return None


@given(alter_bodies, st.integers(0, 3))
def test_quick_alter_partition_parsing_accepts_only_what_pydantic_accepts_and_agrees(obj, version):
    body = json.dumps(obj).encode()  # integers past 64 bits too
    quick = MF.quick_alter_partition_message(body, version)
    if quick is not None:
        assert quick == pydantic_message(body, version)


valid_partitions = st.builds(
    lambda i, le, pe, isr, lrs: {"partitionIndex": i, "leaderEpoch": le, "partitionEpoch": pe,
                                 "newIsrWithEpochs": [{"brokerId": b, "brokerEpoch": e} for b, e in isr],
                                 "leaderRecoveryState": lrs},
    int32, int32, int32, st.lists(st.tuples(int32, st.integers(-1, 2**63 - 1)), max_size=3),
    st.none() | st.integers(0, 1),
)  # fmt: skip


@given(st.integers(0, 2**31 - 1), st.lists(st.tuples(st.sampled_from(UUID_TEXTS[:2]), st.lists(valid_partitions, max_size=4)), max_size=3))  # fmt: skip
def test_every_plainly_valid_version_3_body_takes_the_quick_path(broker_id, topics):
    obj = {"brokerId": broker_id, "topics": [{"topicId": t, "partitions": ps} for t, ps in topics]}
    body = orjson.dumps(obj)
    quick = MF.quick_alter_partition_message(body, 3)
    assert quick is not None and quick == pydantic_message(body, 3)


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'{"brokerId": 1, "brokerId": "x", "topics": []}',
                                  b'{"brokerId": 99999999999, "topics": []}', b"\xff"])  # fmt: skip
def test_bodies_that_are_not_plain_go_to_pydantic(body):
    assert MF.quick_alter_partition_message(body, 3) is None


# ---------------------------------------------------------------- the switch: what the app parses


@contextmanager
def plain_models():
    """The one switch turned off: pydantic parses every body, models build every answer."""
    assert MF.QUICK
    MF.QUICK = False
    try:
        yield
    finally:
        MF.QUICK = True


def parsed(body: bytes, version: int):
    """What the AlterPartition endpoint makes of a body: the request (its repr
    tells tuples from lists) or the refusal's status and bytes."""
    try:
        return ("ok", repr(alter_partition_request(body, version)))
    except ApiProblem as e:
        response = e.response()
        return ("refused", response.status_code, bytes(response.body))


def parsed_both(body: bytes, version: int):
    quick = parsed(body, version)
    with plain_models():
        plain = parsed(body, version)
    return quick, plain


edge_ints = st.sampled_from([2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -1, 0])
unknown = st.dictionaries(
    st.sampled_from(["x", "broker_id", "new_isr", "partitionindex", "topicNames", ""]),
    odd | edge_ints,
    max_size=2,
)


def with_unknown(bodies):
    """Bodies with unknown fields added (ignored by both, as Kafka's converters do)."""
    return st.tuples(bodies, unknown).map(lambda pair: {**pair[1], **pair[0]})


edge_partition_bodies = with_unknown(
    shaped(
        partitionIndex=int32 | edge_ints,
        leaderEpoch=int32 | edge_ints,
        partitionEpoch=int32,
        newIsr=st.none() | st.lists(int32 | edge_ints, max_size=3),
        newIsrWithEpochs=st.none() | st.lists(with_unknown(states), max_size=3),
        leaderRecoveryState=st.none() | st.integers(-200, 200),
    )
)


def duplicated_first(items):
    """A list whose first entry appears twice (duplicate partition ids, ISR members)."""
    return [*items, items[0]] if items else items


edge_topic_bodies = with_unknown(
    shaped(
        topicName=st.none() | st.text(max_size=5),
        topicId=st.none() | st.sampled_from(UUID_TEXTS),
        partitions=st.lists(edge_partition_bodies, max_size=3)
        | st.lists(edge_partition_bodies, min_size=1, max_size=2).map(duplicated_first),
    )
)
edge_alter_bodies = with_unknown(
    shaped(
        brokerId=int32 | edge_ints,
        brokerEpoch=st.integers(-(2**63), 2**63 - 1) | edge_ints,
        topics=st.lists(edge_topic_bodies, max_size=2) | st.just([]),
    )
)


def with_duplicate_key(obj, key, value) -> bytes:
    """``obj`` as JSON with ``key`` written twice (the first value ``value``)."""
    rest = json.dumps(obj)[1:]
    return ("{" + json.dumps(key) + ": " + json.dumps(value) + ("," if obj else "") + rest).encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edge_alter_bodies, st.integers(0, 3), st.data())
def test_every_body_is_parsed_alike_with_the_quick_parser_on_and_off(obj, version, data):
    """Unknown fields, wrong types, out-of-range and edge integers, missing
    fields, fields of another version, duplicate partitions, empty lists and
    repeated keys: the same request or the same 400, byte for byte."""
    body = json.dumps(obj).encode()  # integers past 64 bits too
    if isinstance(obj, dict) and obj and data.draw(st.booleans()):
        body = with_duplicate_key(obj, data.draw(st.sampled_from(sorted(obj))), 1)
    quick_only = MF.quick_alter_partition_message(body, version)
    quick, plain = parsed_both(body, version)
    assert quick == plain
    if quick_only is not None:  # the quick parser only vouches for what pydantic accepts
        assert plain == ("ok", repr(quick_only))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"null",
        b"[]",
        b"{}",
        b'{"brokerId": 1, "topics": []}',
        b'{"brokerId": 1, "topics": [], "topics": []}',
        b'{"brokerId": -1, "topics": []}',
        b'{"brokerId": 1.0, "topics": []}',
        b'{"brokerId": true, "topics": []}',
        b'{"brokerId": "1", "topics": []}',
        b'{"brokerId": 1, "topics": {}}',
        b'{"brokerId": 1, "topics": [{}]}',
        b'{"brokerId": 1, "topics": [{"topicName": "t", "partitions": []}]}',
        b'{"brokerId": 1, "topics": [{"topicId": "fPZv1VBsRFmnlRvmGcOW9w", "partitions": []}]}',
        b'{"brokerId": 1, "topics": [{"topicId": "fPZv1VBsRFmnlRvmGcOW9w", "topicName": "t",'
        b' "partitions": []}]}',
    ],
)
def test_edge_bodies_are_parsed_alike(body, version):
    quick, plain = parsed_both(body, version)
    assert quick == plain


# ---------------------------------------------------------------- the switch: real requests


@pytest.fixture(scope="module")
def registered(local, app):
    """Broker 5 registered: its registration again is accepted and changes nothing."""
    body = registration_body(local.cluster_id, 5)
    response = local.request(app, "POST", "/v1/brokers/register", json=body)
    assert response.status_code == 200 and response.json()["errorName"] == "NONE", response.text
    return body


def answered_both(local, app, method, url, **kwargs):
    def one():
        r = local.request(app, method, url, **kwargs)
        return r.status_code, r.content, r.headers.get("content-type")

    quick = one()
    with plain_models():
        plain = one()
    return quick, plain


def test_broker_writes_answer_alike_with_the_quick_path_on_and_off(local, app, registered):
    requests = [
        ("/v1/brokers/register", registered),  # accepted again: the success answer
        ("/v1/brokers/register", {**registered, "clusterId": "other"}),
        ("/v1/brokers/heartbeat", {"brokerId": 5, "brokerEpoch": 999, "currentMetadataOffset": 0}),
        ("/v1/brokers/heartbeat", {"brokerId": 9, "brokerEpoch": 1, "currentMetadataOffset": 0}),
        ("/v1/brokers/heartbeat", {"brokerId": 9}),
        ("/v1/alter-partition?version=3", {"brokerId": 5, "topics": []}),
        ("/v1/alter-partition?version=1", {"brokerId": 5, "topics": [{"topicName": "nope",
         "partitions": [{"partitionIndex": 0, "leaderEpoch": 0, "partitionEpoch": 0,
                         "newIsr": [5]}]}]}),
    ]  # fmt: skip
    for url, body in requests:
        quick, plain = answered_both(local, app, "POST", url, json=body)
        assert quick == plain, url


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(edge_alter_bodies, st.integers(0, 3))
def test_alter_partition_requests_answer_alike_with_the_quick_path_on_and_off(
    local, app, registered, obj, version
):
    """Through the app and the controller (no such topics: nothing is written,
    so both answers are decided against the same image)."""
    content = json.dumps(obj).encode()
    quick, plain = answered_both(
        local,
        app,
        "POST",
        f"/v1/alter-partition?version={version}",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert quick == plain


def plainly_valid_partition(version: int):
    isr = st.lists(int32, max_size=3)
    members = st.lists(st.tuples(int32, st.none() | st.integers(-1, 2**63 - 1)), max_size=3)
    return st.builds(
        lambda i, le, pe, isr, members, lrs: {
            "partitionIndex": i,
            "leaderEpoch": le,
            "partitionEpoch": pe,
            **(
                {"newIsrWithEpochs": [
                    {"brokerId": b} if e is None else {"brokerId": b, "brokerEpoch": e}
                    for b, e in members
                ]}
                if version >= 3
                else {"newIsr": isr}
            ),
            **({} if version == 0 or lrs is None else {"leaderRecoveryState": lrs}),
        },
        int32, int32, int32, isr | isr.map(duplicated_first), members, st.none() | st.integers(0, 1),
    )  # fmt: skip


# Kafka's legal topic characters: a name needs no escape and holds no colon.
kafka_names = st.text(alphabet="abcXYZ019._-", max_size=5)


@st.composite
def plainly_valid_bodies(draw):
    version = draw(st.integers(0, 3))
    partitions = st.lists(plainly_valid_partition(version), max_size=4)
    topics = draw(
        st.lists(
            st.tuples(
                st.sampled_from(UUID_TEXTS[:2]) if version >= 2 else kafka_names,
                partitions | partitions.map(duplicated_first),
            ),
            max_size=3,
        )
    )
    key = "topicId" if version >= 2 else "topicName"
    obj = {"brokerId": draw(st.integers(0, 2**31 - 1)),
           "topics": [{key: t, "partitions": ps} for t, ps in topics]}  # fmt: skip
    if draw(st.booleans()):
        obj["brokerEpoch"] = draw(st.integers(-(2**63), 2**63 - 1))
    return obj, version


@settings(max_examples=300, deadline=None)
@given(plainly_valid_bodies())
def test_every_plainly_valid_body_of_every_version_takes_the_quick_path_and_agrees(body_version):
    """Duplicate partitions and ISR members, empty lists, all four versions:
    the quick parser vouches and builds pydantic's request. (Unknown fields,
    escaped strings and colons inside strings go to pydantic: the tests above
    show both parse them alike.)"""
    obj, version = body_version
    body = orjson.dumps(obj)
    quick_only = MF.quick_alter_partition_message(body, version)
    assert quick_only is not None
    quick, plain = parsed_both(body, version)
    assert quick == plain == ("ok", repr(quick_only))


@pytest.mark.parametrize(
    "body",
    [
        b'{"brokerId": 1, "topics": [], "x": 1}',  # unknown: ignored by pydantic
        b'{"brokerId": 1, "topics": [{"topicName": "a:b", "partitions": []}]}',
        b'{"brokerId": 1, "topics": [{"topicName": "\\u0061", "partitions": []}]}',
        b'{"brokerId": 1, "topics": [{"topicName": "a", "partitions": [{"partitionIndex": 0,'
        b' "leaderEpoch": 1, "partitionEpoch": 1, "newIsr": [1], "newIsr": [2]}]}]}',
        b'{"brokerId": 1, "topics": [{"topicName": "a", "topicName": "b", "partitions": []}]}',
        b'{"broker\\u0049d": 1, "brokerId": 2, "topics": []}',
        b'{"brokerId": 1, "topics": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_what_the_quick_parser_cannot_vouch_for_goes_to_pydantic(body):
    """msgspec keeps the last of a repeated key, skips unknown ones and reads
    escapes; the quick parser then counts the body's keys (decisions.md 45)
    and leaves the body to pydantic, which refuses or accepts it."""
    assert MF.quick_alter_partition_message(body, 1) is None
    quick, plain = parsed_both(body, 1)
    assert quick == plain


# ---------------------------------------------------------------- heartbeat bodies


def outcome(parse, body: bytes):
    """What an endpoint's parser makes of a body: the request (its repr
    tells tuples from lists) or the refusal's status and bytes."""
    try:
        return ("ok", repr(parse(body)))
    except ApiProblem as e:
        response = e.response()
        return ("refused", response.status_code, bytes(response.body))


def agree_on_and_off(parse, quick_parse, obj, data) -> None:
    """``obj`` as a body (sometimes with its first key repeated) is parsed
    alike with the quick parser on and off; what the quick parser vouches
    for is what pydantic builds."""
    body = json.dumps(obj).encode()
    if isinstance(obj, dict) and obj and data.draw(st.booleans()):
        body = with_duplicate_key(obj, data.draw(st.sampled_from(sorted(obj))), 1)
    quick_only = quick_parse(body)
    quick = outcome(parse, body)
    with plain_models():
        plain = outcome(parse, body)
    assert quick == plain
    if quick_only is not None:
        assert plain == ("ok", repr(quick_only))


heartbeat_bodies = with_unknown(
    shaped(
        brokerId=int32 | edge_ints,
        brokerEpoch=st.integers(-(2**63), 2**63 - 1) | edge_ints,
        currentMetadataOffset=st.integers(-(2**63), 2**63 - 1) | edge_ints,
        wantFence=st.booleans(),
        wantShutDown=st.booleans(),
    )
)


@settings(max_examples=400, deadline=None)
@given(heartbeat_bodies, st.data())
def test_every_heartbeat_body_is_parsed_alike_with_the_quick_parser_on_and_off(obj, data):
    agree_on_and_off(heartbeat_request, MF.quick_heartbeat_message, obj, data)


@given(
    st.integers(0, 2**31 - 1),
    st.none() | st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**63 - 1),
    st.none() | st.booleans(),
    st.none() | st.booleans(),
)
def test_every_plainly_valid_heartbeat_takes_the_quick_path(broker, epoch, offset, fence, down):
    obj = {"brokerId": broker, "currentMetadataOffset": offset}
    for key, value in (("brokerEpoch", epoch), ("wantFence", fence), ("wantShutDown", down)):
        if value is not None:
            obj[key] = value
    assert_quick_path(MF.quick_heartbeat_message, M.BrokerHeartbeatRequest, obj)


def assert_quick_path(quick_parse, model, obj) -> None:
    """``obj``'s body takes the quick path and gives what pydantic's ``model`` gives."""
    body = orjson.dumps(obj)
    quick = quick_parse(body)
    assert quick is not None
    assert quick == model.model_validate_json(body).to_message()


# ---------------------------------------------------------------- registration bodies


int16 = st.integers(-(2**15), 2**15 - 1)
edge_int16 = st.sampled_from([2**15 - 1, -(2**15), 2**15, -(2**15) - 1, 2**16 - 1, 2**16, -1])
bounded_text = st.text(max_size=4) | st.sampled_from(["x" * 255, "x" * 256, "é" * 64, "é" * 65])
listener_bodies = with_unknown(
    shaped(
        name=bounded_text,
        host=bounded_text,
        port=st.integers(0, 2**16 - 1) | edge_int16,
        securityProtocol=int16 | edge_int16,
    )
)
feature_bodies = with_unknown(
    shaped(
        name=bounded_text,
        minSupportedVersion=int16 | edge_int16,
        maxSupportedVersion=int16 | edge_int16,
    )
)
registration_bodies = with_unknown(
    shaped(
        brokerId=int32 | edge_ints,
        clusterId=bounded_text,
        incarnationId=st.sampled_from(UUID_TEXTS),
        listeners=st.lists(listener_bodies, max_size=2) | st.just([]),
        features=st.lists(feature_bodies, max_size=2),
        rack=st.none() | bounded_text,
        isMigratingZkBroker=st.booleans(),
        previousBrokerEpoch=st.integers(-(2**63), 2**63 - 1) | edge_ints,
    )
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registration_bodies, st.data())
def test_every_registration_body_is_parsed_alike_with_the_quick_parser_on_and_off(obj, data):
    """Wrong types, lengths and ranges at their edges, missing and unknown
    fields, nulls, both UUID spellings and repeated keys: the same request or
    the same 400, byte for byte."""
    agree_on_and_off(registration_request, MF.quick_registration_message, obj, data)


plain_names = st.text(alphabet="abcXYZ019._-", max_size=8)


@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(UUID_TEXTS[:2]),
    st.lists(st.tuples(plain_names, plain_names, st.integers(0, 2**16 - 1), int16), max_size=3),
    st.lists(st.tuples(plain_names, int16, int16), max_size=3),
    st.none() | st.just("<null>") | plain_names,
    st.none() | st.booleans(),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)
def test_every_plainly_valid_registration_takes_the_quick_path(
    broker, incarnation, listeners, features, rack, zk, previous
):
    obj = {
        "brokerId": broker,
        "clusterId": "MkU3OEVBNTcwNTJENDM2Qk",
        "incarnationId": incarnation,
        "listeners": [
            {"name": n, "host": h, "port": p, "securityProtocol": s} for n, h, p, s in listeners
        ],
        "features": [
            {"name": n, "minSupportedVersion": lo, "maxSupportedVersion": hi}
            for n, lo, hi in features
        ],
    }
    for key, value in (("rack", rack), ("isMigratingZkBroker", zk), ("previousBrokerEpoch", previous)):  # fmt: skip
        if value == "<null>":
            obj[key] = None
        elif value is not None:
            obj[key] = value
    assert_quick_path(MF.quick_registration_message, M.BrokerRegistrationRequest, obj)


@pytest.mark.parametrize(
    "body",
    [
        b'{"brokerId": 1, "clusterId": "c", "incarnationId": "fPZv1VBsRFmnlRvmGcOW9w",'
        b' "listeners": [{"name": "P", "host": "::1", "port": 1, "securityProtocol": 0}]}',
        b'{"brokerId": 1, "clusterId": "c", "incarnationId": "fPZv1VBsRFmnlRvmGcOW9w",'
        b' "rack": "r", "rack": "s"}',
        b'{"brokerId": 1, "clusterId": "\\u0063", "incarnationId": "fPZv1VBsRFmnlRvmGcOW9w"}',
        b'{"brokerId": 1, "clusterId": "c", "incarnationId": "fPZv1VBsRFmnlRvmGcOW9w",'
        b' "listeners": null}',
    ],
)
def test_registrations_the_quick_parser_cannot_vouch_for_go_to_pydantic(body):
    assert MF.quick_registration_message(body) is None
    quick = outcome(registration_request, body)
    with plain_models():
        assert outcome(registration_request, body) == quick


VALID_REGISTRATION = {
    "brokerId": 1,
    "clusterId": "MkU3OEVBNTcwNTJENDM2Qk",
    "incarnationId": "fPZv1VBsRFmnlRvmGcOW9w",
    "listeners": [{"name": "PLAINTEXT", "host": "b1", "port": 9092, "securityProtocol": 0}],
    "features": [{"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": 9}],
    "rack": "r1",
    "isMigratingZkBroker": False,
    "previousBrokerEpoch": -1,
}
_L, _F = VALID_REGISTRATION["listeners"][0], VALID_REGISTRATION["features"][0]


@pytest.mark.parametrize(
    "change",
    [
        {"brokerId": -1},
        {"brokerId": 2**31},
        {"clusterId": "c" * 65},
        {"incarnationId": "AAAAAAAAAAAAAAAAAAAAAB"},  # padding bits set
        {"listeners": [{**_L, "name": "n" * 256}]},
        {"listeners": [{**_L, "host": "h" * 256}]},
        {"listeners": [{**_L, "port": -1}]},
        {"listeners": [{**_L, "port": 2**16}]},
        {"listeners": [{**_L, "securityProtocol": 2**15}]},
        {"listeners": [_L] * 65},
        {"features": [{**_F, "name": "n" * 256}]},
        {"features": [{**_F, "minSupportedVersion": -(2**15) - 1}]},
        {"features": [{**_F, "maxSupportedVersion": 2**15}]},
        {"features": [_F] * 65},
        {"rack": "r" * 256},
        {"isMigratingZkBroker": 0},
        {"previousBrokerEpoch": 2**63},
    ],
)
def test_a_registration_one_field_past_its_bound_is_refused_alike(change):
    body = orjson.dumps({**VALID_REGISTRATION, **change})
    assert MF.quick_registration_message(body) is None
    quick = outcome(registration_request, body)
    assert quick[0] == "refused"
    with plain_models():
        assert outcome(registration_request, body) == quick
    assert MF.quick_registration_message(orjson.dumps(VALID_REGISTRATION)) is not None
