"""api/models.py: the hot responses built as plain dicts (``json_obj``) are
byte for byte what their pydantic models give (``from_message().to_json_obj()``),
which is what the OpenAPI document describes."""

import orjson
from hypothesis import given
from hypothesis import strategies as st

from api import models as M
from metadata_records.errors import Errors
from quorum import messages as m

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
