"""The hot chunks (metadata_records/hot_chunks.py): a chunk read whole from an
image file keeps its slots read out, the first read out let go past a bound.
Reads through it are the plain replay's reads whatever the bound and the
order; it never holds more slots than its bound (and one chunk's, partly let
go), never keeps a chunk (or its file) alive, and lone partition reads leave
it alone."""

import base64
import gc
import os
import random
import threading
import weakref
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records import hot_chunks
from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.image_file import ImageFile, rebased, write_image_file
from metadata_records.partition_states import FileChunk
from metadata_records.records import PartitionRecord, TopicRecord
from tests.test_image_file import PIDS, STEPS, T1, T2, TOPICS


@contextmanager
def hot_set(limit: int, switch: bool = True):
    """A hot set of ``limit`` slots in place of the process's own (with the
    switch off: none, every read slices its slots)."""
    was, was_on = hot_chunks.HOT, hot_chunks.HOT_CHUNKS
    hot_chunks.HOT, hot_chunks.HOT_CHUNKS = hot_chunks.HotChunks(limit), switch
    try:
        yield hot_chunks.HOT
    finally:
        hot_chunks.HOT, hot_chunks.HOT_CHUNKS = was, was_on


def check_bound(hot: hot_chunks.HotChunks) -> None:
    """At most ``limit`` slots kept, plus what is left of the oldest chunk
    partly let go; and nothing kept refers to a chunk or a file: bytes only."""
    held = hot.held()
    assert len(hot._refs) <= hot.limit
    assert hot.slots() <= hot.limit + (len(held[0].slots) - 1 if held else 0)
    assert all(slot is None or type(slot) is bytes for kept in held for slot in kept.slots)


def kept(chunk) -> tuple | None:
    """The slots the hot set still keeps for ``chunk``, or None."""
    kept = chunk._read() if chunk._read is not None else None
    return None if kept is None else kept.slots


def read_alike(read, held, plain) -> None:
    (topic_id, whole, pid), (image, offset) = read, held
    mine, theirs = image.topics.get(topic_id), plain[offset].topics.get(topic_id)
    assert (mine is None) == (theirs is None)
    if mine is None:
        return
    if whole:
        assert list(mine.partitions.items()) == list(theirs.partitions.items())
    else:
        assert mine.partitions.get(pid) == theirs.partitions.get(pid)
        assert (pid in mine.partitions) == (pid in theirs.partitions)


READS = st.lists(st.tuples(TOPICS, st.booleans(), PIDS), max_size=12)


@pytest.mark.parametrize("switch", [True, False])
@settings(max_examples=80, deadline=None)
@given(steps=STEPS, limit=st.integers(1, 40), reads=READS)
def test_reads_through_a_small_hot_set_are_the_plain_reads(
    switch, steps, limit, reads, tmp_path_factory
):
    """A follower starts from the core's file and takes each newer one as it
    comes; between its records,
    whole topics and lone partitions are read from it and from every image
    it held before (a reader holding an older image): each read equals the
    plain replay's at that image's offset, with the hot set at most its bound."""
    tmp = tmp_path_factory.mktemp("hot")
    start = [TopicRecord(name="a", topic_id=T1), TopicRecord(name="b", topic_id=T2)] + [
        PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=(1, 2), isr=(1,), leader=1)
        for topic_id in (T1, T2)
        for pid in (*range(6), *range(250, 261, 2), 515)
    ]
    log = start + [step for step in steps if step != "file"]
    plain = [EMPTY_IMAGE]
    for record in log:
        plain.append(apply_records(plain[-1], [record]))
    with hot_set(limit, switch) as hot:
        at = len(start)
        write_image_file(str(tmp / "image"), plain[at])
        follower, held = ImageFile(str(tmp / "image")).image(), []  # a process started from it
        for n, step in enumerate(steps):
            if step == "file":
                path = str(tmp / f"image-{n}")
                write_image_file(path, plain[at])
                follower = rebased(follower, ImageFile(path))
                os.unlink(path)
            else:
                follower = apply_records(follower, [log[at]])
                at += 1
            held.append((follower, at))
            for read in reads:
                read_alike(read, held[-1], plain)
                read_alike(read, random.choice(held), plain)
            check_bound(hot)
            assert switch or len(hot) == 0


def topics_image(topics: int, partitions: int):
    records = []
    for t in range(topics):
        topic_id = base64.urlsafe_b64encode((t + 2).to_bytes(16, "big")).decode()[:22]
        records.append(TopicRecord(name=f"t{t}", topic_id=topic_id))
        records += [
            PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=1
            )
            for p in range(partitions)
        ]
    return apply_records(EMPTY_IMAGE, records)


def test_a_chunk_let_go_by_its_image_dies_and_its_file_is_unmapped_though_its_slots_are_kept(
    tmp_path,
):
    write_image_file(str(tmp_path / "f"), topics_image(4, 300))
    with hot_set(10_000) as hot:
        file = ImageFile(str(tmp_path / "f"))
        image = file.image()
        for topic in image.topics.values():
            list(topic.partitions.values())
        assert hot.slots() == 1200 and len(hot) == 8  # two chunks a topic: 256 + 44
        chunk = next(iter(next(iter(image.topics.values())).partitions._chunks.values()))
        assert type(chunk) is FileChunk and kept(chunk) is not None
        buffers = weakref.ref(chunk._buf)  # every chunk holds it
        del image, chunk, file, topic
        gc.collect()
        assert buffers() is None  # the set kept no chunk alive, nor the file mapped
        assert hot.slots() == 1200  # until newer reads push them out


def test_lone_partition_reads_leave_the_hot_set_alone(tmp_path):
    write_image_file(str(tmp_path / "f"), topics_image(3, 600))
    with hot_set(10_000) as hot:
        image = ImageFile(str(tmp_path / "f")).image()
        for topic in image.topics.values():
            for pid in range(0, 600, 7):
                assert topic.partitions[pid].leader == 1
        assert len(hot) == 0
        partitions = next(iter(image.topics.values())).partitions
        list(partitions.items())
        assert len(hot) == 3 and hot.slots() == 600
        assert [partitions[pid] for pid in range(600)] == list(partitions.values())


def test_the_first_chunk_read_out_goes_first(tmp_path):
    write_image_file(str(tmp_path / "f"), topics_image(4, 100))
    with hot_set(250) as hot:
        image = ImageFile(str(tmp_path / "f")).image()
        a, b, c, d = (topic.partitions for topic in image.topics.values())
        chunk = {
            name: next(iter(p._chunks.values()))
            for name, p in zip("abcd", (a, b, c, d), strict=True)
        }
        list(a.values())
        list(b.values())
        list(a.values())  # read from what a kept: it is still the first to go
        list(c.values())
        assert kept(chunk["a"]) is not None and hot.slots() == 300  # a partly let go
        list(d.values())
        assert kept(chunk["a"]) is None and hot.slots() == 300  # now b partly
        assert all(kept(chunk[name]) is not None for name in "bcd")
        list(a.values())  # read out again
        assert kept(chunk["a"]) is not None and kept(chunk["b"]) is None


def test_threads_reading_at_once_keep_the_count_and_read_what_the_file_holds(tmp_path):
    plain = topics_image(12, 40)
    write_image_file(str(tmp_path / "f"), plain)
    with hot_set(100) as hot:
        image = ImageFile(str(tmp_path / "f")).image()
        names = list(image.topics)
        expected = {t: list(plain.topics[t].partitions.items()) for t in names}
        failures: list[BaseException] = []

        def reader(seed: int) -> None:
            rng = random.Random(seed)
            try:
                for _ in range(1500):
                    t = rng.choice(names)
                    assert list(image.topics[t].partitions.items()) == expected[t]
            except BaseException as e:  # noqa: BLE001 - handed to the test's thread
                failures.append(e)

        threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not failures and not any(thread.is_alive() for thread in threads)
        check_bound(hot)
        assert 0 < hot.slots() <= 100 + 39
