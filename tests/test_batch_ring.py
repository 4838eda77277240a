"""The committed batches in shared memory (voter/batch_ring.py, decision 125):
what a reader takes from the ring is exactly the batches from its offset, in
order, or RingMissed, never a torn, skipped or overwritten batch."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voter.batch_ring import _DATA, BatchRing, RingFollower, RingMissed, RingReader


def reader_of(ring: BatchRing) -> RingReader:
    return RingReader(os.dup(ring.fileno()))


def payload(first: int, size: int) -> bytes:
    return (first.to_bytes(8, "little") * (size // 8 + 1))[:size]


def test_a_reader_gets_the_batches_from_its_offset_in_order():
    ring = BatchRing(1 << 16)
    reader = reader_of(ring)
    assert reader.read(0) == []
    ring.publish(0, 2, b"ab")
    ring.publish(2, 3, b"cde")
    assert reader.read(0) == [(0, 2, b"ab"), (2, 3, b"cde")]
    assert reader.read(5) == []
    ring.publish(5, 1, b"f")
    assert reader.read(5) == [(5, 1, b"f")]


def test_a_reader_that_starts_later_skips_what_its_image_holds():
    ring = BatchRing(1 << 16)
    for first in range(0, 10, 2):
        ring.publish(first, 2, payload(first, 10))
    reader = reader_of(ring)  # an image at offset 6: it reads from 6 on
    assert [b[0] for b in reader.read(6)] == [6, 8]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 900), min_size=1, max_size=120),
    reads_every=st.integers(1, 4),
)
def test_a_reader_that_keeps_up_reads_every_batch_once_across_laps(sizes, reads_every):
    ring = BatchRing(4096)  # entries up to 1 KiB: many laps, wraps at every size
    reader = reader_of(ring)
    published, read, offset = [], [], 0
    for i, size in enumerate(sizes):
        ring.publish(offset, 1, payload(offset, size))
        published.append((offset, 1, payload(offset, size)))
        offset += 1
        if i % reads_every == 0:
            try:
                read.extend(reader.read(len(read)))
            except RingMissed:
                # Only when the ring lapped it: then a catch-up (here: take them
                # from what was published) and on from the ring.
                assert len(published) - len(read) > 1
                read.extend(published[len(read) :])
    read.extend(reader.read(len(read)))
    assert read == published


def test_a_lapped_reader_is_told_and_reads_on_from_a_later_offset():
    ring = BatchRing(4096)
    reader = reader_of(ring)
    ring.publish(0, 1, payload(0, 500))
    assert len(reader.read(0)) == 1
    for first in range(1, 40):
        ring.publish(first, 1, payload(first, 500))
    with pytest.raises(RingMissed, match="lapped"):
        reader.read(1)
    # Caught up over the link to offset 38: the ring serves the rest.
    assert reader.read(38) == [(38, 1, payload(38, 500)), (39, 1, payload(39, 500))]


def test_an_offset_older_than_the_ring_is_a_miss_not_a_gap_served():
    ring = BatchRing(4096)
    for first in range(40):
        ring.publish(first, 1, payload(first, 500))
    with pytest.raises(RingMissed, match="goes on at offset"):
        reader_of(ring).read(3)


def test_a_batch_too_large_for_the_ring_is_a_miss_for_those_who_need_it():
    ring = BatchRing(4096)
    reader = reader_of(ring)
    ring.publish(0, 1, b"small")
    ring.publish(1, 5, payload(1, 2000))  # over a quarter of the ring
    ring.publish(6, 1, b"after")
    with pytest.raises(RingMissed, match="too large"):
        reader.read(0)
    assert reader_of(ring).read(6) == [(6, 1, b"after")]  # already past it: skipped


def test_an_entry_changed_under_the_reader_fails_its_check():
    ring = BatchRing(1 << 16)
    reader = reader_of(ring)
    ring.publish(0, 1, b"x" * 100)
    ring._map[_DATA + 40] ^= 0xFF  # a byte of the payload, as a torn write would leave it
    with pytest.raises(RingMissed, match="changed while read"):
        reader.read(0)


def test_a_map_that_is_not_a_ring_is_refused():
    fd = os.memfd_create("not-a-ring")
    os.ftruncate(fd, 4096)
    with pytest.raises(ValueError, match="does not hold"):
        RingReader(fd)


def test_a_follower_asks_once_over_the_link_and_follows_the_ring_after():
    ring = BatchRing(4096)
    applied, asked = [], []
    follower = RingFollower(
        reader_of(ring),
        lambda: len(applied),
        applied.extend,
        asked.append,
        lambda offset: None,
        "a test reader",
    )
    ring.publish(0, 1, b"a")
    follower.poll()
    assert applied == []  # no image yet: nothing to follow from
    follower.caught_up()  # the image came: it looks at once
    assert applied == [(0, 1, b"a")]
    for first in range(1, 30):
        ring.publish(first, 1, payload(first, 500))
    follower.poll()
    follower.poll()  # asked already: not again until the answer
    assert asked == [1] and follower.catch_ups == 1
    applied.extend((first, 1, payload(first, 500)) for first in range(1, 28))  # the answer
    follower.caught_up()
    assert [b[0] for b in applied] == list(range(30))


def test_an_idle_follower_stops_looking_until_woken():
    """Nothing new for IDLE_AFTER_S: the follower says so once (``idle``) and
    its timer stops; the core's WAKE (or an answer's look that finds
    batches) starts it again."""
    import asyncio

    from voter.batch_ring import FOLLOW_EVERY_S, IDLE_AFTER_S

    async def run():
        ring = BatchRing(1 << 16)
        applied, idled = [], []
        follower = RingFollower(
            reader_of(ring), lambda: len(applied), applied.extend, None, idled.append, "a reader"
        )
        follower.start()
        follower.caught_up()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not follower.sleeping and loop.time() < deadline:
            await asyncio.sleep(FOLLOW_EVERY_S)
        assert follower.sleeping and idled == [0] and follower._timer is None
        await asyncio.sleep(2 * IDLE_AFTER_S)
        assert idled == [0]  # said once, and no timer meanwhile
        ring.publish(0, 1, b"a")
        follower.wake()
        assert applied == [(0, 1, b"a")] and not follower.sleeping
        assert follower._timer is not None
        # An answer's look that finds a batch while asleep starts it again too.
        while not follower.sleeping and loop.time() < deadline + 5:
            await asyncio.sleep(FOLLOW_EVERY_S)
        assert idled == [0, 1]
        ring.publish(1, 1, b"b")
        follower.poll()
        assert applied[-1] == (1, 1, b"b") and not follower.sleeping
        follower.stop()
        follower.wake()  # after stop: nothing armed again
        assert follower._timer is None

    asyncio.run(run())
