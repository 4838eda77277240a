"""How a worker and the orderer process follow the committed log: the core's
batches (from the batch ring, or over the link) applied in order to an image
of their own, as an observer follows a leader.
"""

from __future__ import annotations

from metadata_records.snapshot import decode_image
from quorum.state_machine import MetadataStateMachine


def load_image(sm: MetadataStateMachine, encoded: bytes, retained: tuple) -> None:
    """The core's IMAGE item into ``sm``: the image, and the retained log below it."""
    base, batches, next_offset = retained
    sm.image = decode_image(encoded)
    sm.log.load(base, batches, next_offset)


def apply_batches(sm: MetadataStateMachine, batches: list, who: str) -> str | None:
    """The core's committed batches into ``sm``, in order; a batch that does
    not follow (it cannot happen while the core sends in order: never serve
    a gap) stops it, and the gap is returned, described."""
    for first_offset, _count, payload in batches:
        if first_offset != sm.image.next_offset:
            return (
                f"batch at offset {first_offset} does not follow {who}'s image "
                f"(next offset {sm.image.next_offset})"
            )
        sm.apply_batch(payload, _doApply=True)
    return None
