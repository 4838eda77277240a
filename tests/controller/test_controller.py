"""The Controller facade: dispatch, group commit on the view, moving onto
committed images, and what a new leader rebuilds."""

import pytest

from controller.messages import BrokerHeartbeatRequest, CreatableTopic, CreateTopicsRequest
from metadata_records.delta import apply
from metadata_records.records import Batch, NoOpRecord
from tests.harness import ControllerHarness


def test_unknown_requests_are_a_programming_error():
    h = ControllerHarness()
    with pytest.raises(TypeError, match="no handler for str"):
        h.decide("hello")


def test_requests_of_one_batch_see_each_others_records():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    first = h.decide(CreateTopicsRequest((CreatableTopic("a", 1, 3),)))
    second = h.decide(CreateTopicsRequest((CreatableTopic("a", 1, 3), CreatableTopic("b", 1, 3))))
    # The second request was decided on top of the first, although neither committed.
    assert [t.error.name for t in second.response.topics] == ["TOPIC_ALREADY_EXISTS", "NONE"]
    assert h.image.topic_ids == {}
    h.commit(first.records + second.records)
    assert set(h.image.topic_ids) == {"a", "b"}
    assert h.replayed() == h.image


def test_the_view_counts_offsets_across_the_batch():
    h = ControllerHarness()
    h.start_brokers(1)
    c = h.controller
    start = c.view.next_offset
    r1 = h.decide(CreateTopicsRequest((CreatableTopic("a", 2, 1),)))
    assert c.view.next_offset == start + len(r1.records)
    assert h.image.next_offset == start  # nothing committed yet


def test_an_unexpected_committed_image_rebuilds_leader_side_indexes():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    h.create_topic("t", 2, 2)
    c = h.controller
    assert c.index.leads_any(1)
    # Someone else's batch (not decided by this controller) moves the log on.
    h.image = apply(h.image, Batch(h.image.controller_epoch, 0, (NoOpRecord(),)))
    c.committed(h.image)
    assert c._index is None
    assert c.index.leads_any(1)  # rebuilt from the image on first use


def test_a_controller_built_on_an_image_resumes_from_it():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("t", 3, 3)
    h.new_leader()
    assert h.image.leader_url == "http://c1"
    resp = h.run(BrokerHeartbeatRequest(1, h.epochs[1], h.image.next_offset, want_fence=True))
    assert resp.is_fenced and all(1 not in h.partition("t", p).isr for p in range(3))
    assert h.replayed() == h.image


def test_bootstrap_records_only_for_an_empty_log():
    h = ControllerHarness()
    assert h.controller.bootstrap_records() == []
