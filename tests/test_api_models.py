"""api/models.py: the hot responses built as plain dicts (``json_obj``) are
byte for byte what their pydantic models give (``from_message().to_json_obj()``),
which is what the OpenAPI document describes."""

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from api import models as M
from controller import messages as m
from metadata_records.errors import Errors

errors = st.sampled_from(list(Errors))
messages = st.none() | st.text(max_size=20)
ints = st.integers(-(2**31), 2**31 - 1)
epochs = st.integers(-1, 2**63 - 1)


def same(model, message) -> None:
    assert orjson.dumps(model.json_obj(message)) == orjson.dumps(
        model.from_message(message).to_json_obj()
    )


@given(errors, messages, st.booleans(), st.booleans(), st.booleans())
def test_heartbeat_response(error, text, caught_up, fenced, shut_down):
    same(
        M.BrokerHeartbeatResponse,
        m.BrokerHeartbeatResponse(error, text, caught_up, fenced, shut_down),
    )


@given(errors, messages, epochs)
def test_registration_response(error, text, epoch):
    same(M.BrokerRegistrationResponse, m.BrokerRegistrationResponse(error, text, epoch))


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
    same(M.AlterPartitionResponse, m.AlterPartitionResponse(error, text, topics))


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
    quick = M.alter_partition_message(body, version)
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
    quick = M.alter_partition_message(body, 3)
    assert quick is not None and quick == pydantic_message(body, 3)


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'{"brokerId": 1, "brokerId": "x", "topics": []}',
                                  b'{"brokerId": 99999999999, "topics": []}', b"\xff"])  # fmt: skip
def test_bodies_that_are_not_plain_go_to_pydantic(body):
    assert M.alter_partition_message(body, 3) is None
