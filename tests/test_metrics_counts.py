"""The partition counts of /metrics (api/metrics.py's _ImageCounts), moved
image to image by what changed, against a walk of every partition of each
image: the same after any sequence of batches, topics created, changed,
deleted and created again included, partitions kept encoded or not."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.metrics import _ImageCounts
from metadata_records import partition_states
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import (
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

T1, T2 = "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"
TOPIC = st.sampled_from([T1, T2])
PID = st.integers(0, 300)  # over a chunk's edge
REPLICAS = st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True).map(tuple)
records = st.one_of(
    st.builds(
        PartitionRecord,
        partition_id=PID,
        topic_id=TOPIC,
        replicas=REPLICAS,
        isr=REPLICAS,
        leader=st.integers(-1, 3),
    ),
    st.builds(
        PartitionChangeRecord,
        partition_id=PID,
        topic_id=TOPIC,
        leader=st.sampled_from([-2, -1, 0, 1, 2, 3]),
    ),
    st.builds(RemoveTopicRecord, topic_id=TOPIC),
    st.builds(TopicRecord, name=st.sampled_from(["a", "b"]), topic_id=TOPIC),
)


def walked(image):
    parts = [p for t in image.topics.values() for p in t.partitions.values()]
    return (
        sum(1 for p in parts if p.leader < 0),
        sum(1 for p in parts if not p.has_preferred_leader),
    )


@pytest.mark.parametrize("compact", [True, False])
@settings(max_examples=100, deadline=None)
@given(batches=st.lists(st.lists(records, max_size=12), max_size=10))
def test_counts_moved_by_each_batch_are_a_walk_of_every_partition(compact, batches):
    partition_states.COMPACT_PARTITIONS = compact
    try:
        counts = _ImageCounts()
        image = apply_records(
            EMPTY_IMAGE, [TopicRecord(name="a", topic_id=T1), TopicRecord(name="b", topic_id=T2)]
        )
        for batch in batches:
            image = apply_records(image, batch)
            counts.of(image)
            assert (counts.offline, counts.imbalanced) == walked(image)
    finally:
        partition_states.COMPACT_PARTITIONS = True
