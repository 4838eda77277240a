"""The leader's apply takes its controller's view as the image
(quorum/state_machine.py ADOPT_VIEW, decisions.md 115) only when the view
holds exactly the batch on top of the image the batch applies to; otherwise
it replays the batch, and either way the image is the one replay gives."""

from __future__ import annotations

import pytest

from metadata_records.codec import encode_batch
from metadata_records.delta import ImageDelta
from metadata_records.records import (
    Batch,
    Endpoint,
    FeatureLevelRecord,
    LeaderChangeRecord,
    RegisterBrokerRecord,
)
from metadata_records.snapshot import image_digest
from quorum import state_machine
from quorum.state_machine import MetadataStateMachine


def _apply(sm: MetadataStateMachine, payload: bytes) -> int:
    return sm.apply_batch(payload, _doApply=True)


def _led() -> MetadataStateMachine:
    """A state machine whose log holds a LEADER_CHANGE (epoch 1) and the
    metadata.version."""
    sm = MetadataStateMachine()
    boot = Batch(1, 0, (LeaderChangeRecord(1, 0, "http://x"),), -1)
    _apply(sm, encode_batch(boot))
    levels = Batch(1, 0, (FeatureLevelRecord("metadata.version", 12),), sm.image.next_offset)
    _apply(sm, encode_batch(levels))
    return sm


def _registration(broker_id: int, offset: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id="AAAAAAAAAAAAAAAAAAAAAA",
        broker_epoch=offset,
        end_points=(Endpoint("PLAINTEXT", "h", 9092, 0),),
    )


def _replayed(image, records) -> str:
    delta = ImageDelta(image)
    for r in records:
        delta.replay(r)
    return image_digest(delta.apply())


@pytest.mark.parametrize("how", ["exact", "one more", "another base", "switch off"])
def test_the_view_is_the_image_only_when_it_holds_exactly_the_batch(how, monkeypatch):
    sm = _led()
    base = sm.image
    offset = base.next_offset
    records = (_registration(1, offset), _registration(2, offset + 1))
    batch = Batch(1, 0, records, offset)
    expected = _replayed(base, records)
    view = ImageDelta(base if how != "another base" else _led().image)
    for r in records:
        view.replay(r)
    if how == "one more":
        view.replay(_registration(3, offset + 2))
    if how == "switch off":
        monkeypatch.setattr(state_machine, "ADOPT_VIEW", False)
    payload = encode_batch(batch)
    sm.expect(payload, batch, None, view)
    assert _apply(sm, payload) == offset
    assert image_digest(sm.image) == expected
    assert sm.image.next_offset == offset + 2
    assert sm.views_adopted == (1 if how == "exact" else 0)


def test_a_view_changed_after_its_batch_was_proposed_is_not_taken():
    """Something replayed into the view after expect (a second batch in
    flight) moves its end: the batch is replayed instead."""
    sm = _led()
    base = sm.image
    offset = base.next_offset
    records = (_registration(1, offset),)
    batch = Batch(1, 0, records, offset)
    view = ImageDelta(base)
    view.replay(records[0])
    payload = encode_batch(batch)
    sm.expect(payload, batch, None, view)
    view.replay(_registration(2, offset + 1))
    _apply(sm, payload)
    assert sm.views_adopted == 0
    assert image_digest(sm.image) == _replayed(base, records)


def test_a_stale_batch_is_not_applied_whatever_its_view():
    sm = _led()
    base = sm.image
    records = (_registration(1, base.next_offset),)
    batch = Batch(1, 0, records, base.next_offset + 5)  # decided for another offset
    view = ImageDelta(base)
    view.replay(records[0])
    payload = encode_batch(batch)
    sm.expect(payload, batch, None, view)
    assert _apply(sm, payload) == state_machine.STALE
    assert sm.image is base and sm.views_adopted == 0
