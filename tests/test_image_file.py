"""The image file (metadata_records/image_file.py): what the processes of a
voter read their partitions from. A log replayed by a process that loads its
image from a file and takes each newer file as it comes (``rebased``) holds,
at every offset, the image a plain replay holds: equal, with equal encodings
and digests. Images already handed to readers stay as they were while newer
files come and old ones are unlinked; a file cut short or not one is refused
by name, and a writer that stops halfway leaves no file."""

import os
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_records.delta import apply_records
from metadata_records.image import EMPTY_IMAGE
from metadata_records.image_file import (
    ImageFile,
    ImageFileError,
    rebased,
    write_image_file,
)
from metadata_records.partition_states import FileChunk
from metadata_records.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from metadata_records.snapshot import encode_image, image_digest

T1, T2, T3 = "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw", "AAAAAAAAAAAAAAAAAAAABA"
TOPICS = st.sampled_from([T1, T2, T3])
LISTS = st.lists(st.integers(0, 4), max_size=4).map(tuple)
# Ids across three chunks of 256, dense at the start as Kafka makes them.
PIDS = st.one_of(st.integers(0, 5), st.integers(250, 260), st.integers(510, 520))
RECORDS = st.one_of(
    st.builds(
        PartitionRecord,
        partition_id=PIDS,
        topic_id=TOPICS,
        replicas=LISTS,
        isr=LISTS,
        leader=st.integers(-1, 4),
    ),
    st.builds(
        PartitionChangeRecord,
        partition_id=PIDS,
        topic_id=TOPICS,
        isr=st.none() | LISTS,
        leader=st.sampled_from([-2, -1, 1, 2]),
        replicas=st.none() | LISTS,
    ),
    st.builds(RemoveTopicRecord, topic_id=TOPICS),
    st.builds(TopicRecord, name=st.sampled_from(["a", "b", "c"]), topic_id=TOPICS),
    st.builds(
        RegisterBrokerRecord,
        broker_id=st.integers(0, 4),
        broker_epoch=st.integers(0, 9),
        incarnation_id=st.sampled_from([T1, T2]),
    ),
    st.builds(
        BrokerRegistrationChangeRecord,
        broker_id=st.integers(0, 4),
        broker_epoch=st.integers(0, 9),
        fenced=st.sampled_from([0, 1, -1]),
    ),
)
# One step of the log: a record, or the core writing its image at this offset.
STEPS = st.lists(st.one_of(RECORDS, st.just("file")), max_size=60)


def same(a, b, reasons: bool = True) -> None:
    """Equal images; with ``reasons``, the same reasons for ignored records
    too (an image loaded from a file, as from a snapshot, starts with none)."""
    assert a == b
    if reasons:
        assert a.ignored_reasons == b.ignored_reasons
    assert encode_image(a) == encode_image(b)
    for topic_id, topic in b.topics.items():
        mine = a.topics[topic_id].partitions
        assert list(mine.items()) == list(topic.partitions.items())  # the order too


def file_chunks(image) -> int:
    return sum(
        type(chunk) is FileChunk
        for topic in image.topics.values()
        for chunk in topic.partitions._chunks.values()
    )


@settings(max_examples=120, deadline=None)
@given(steps=STEPS, lag=st.integers(0, 3))
def test_a_process_following_files_holds_the_plain_image_at_every_offset(
    steps, lag, tmp_path_factory
):
    """The core applies the log and writes a file where a step says; a
    follower ``lag`` records behind takes each file once it has reached its
    offset; a new process loads the latest file and replays on from it.
    Every image either follower ever held equals the plain replay's at its
    offset, checked again at the end, after every file was unlinked."""
    tmp = tmp_path_factory.mktemp("images")
    start = [TopicRecord(name="a", topic_id=T1), TopicRecord(name="b", topic_id=T2)]
    log = start + [step for step in steps if step != "file"]
    plain = [EMPTY_IMAGE]
    for record in log:
        plain.append(apply_records(plain[-1], [record]))

    core_at, files, held = len(start), [], []
    follower, late = plain[0], None
    pending: list[ImageFile] = []
    for step in steps:
        if step == "file":
            path = str(tmp / f"image-{len(files)}")
            write_image_file(path, plain[core_at])
            files.append(path)
            loaded = ImageFile(path)
            assert loaded.next_offset == core_at
            pending.append(loaded)
            late = loaded.image()  # a process started now: reasons start afresh
            held.append((late, core_at, False))
            continue
        core_at += 1
        if late is not None:
            late = apply_records(late, [log[core_at - 1]])
            held.append((late, core_at, False))
        while follower.next_offset < max(core_at - lag, 0):
            at = follower.next_offset
            follower = apply_records(follower, [log[at]])
            held.append((follower, at + 1, True))
            while pending and pending[0].next_offset <= follower.next_offset:
                follower = rebased(follower, pending.pop(0))
                held.append((follower, at + 1, True))
    for path in files:
        os.unlink(path)  # readers keep what they mapped
    for image, at, reasons in held:
        same(image, plain[at], reasons)
        assert image_digest(image) == image_digest(plain[at])
    # Any two of them differ in exactly the partitions their plain twins do
    # (files compared a chunk at a time, changes a slot at a time).
    for (a, _, _), (b, _, _) in zip(held, held[1:] + held[:1], strict=True):
        for topic_id in a.topics.keys() & b.topics.keys():
            x, y = a.topics[topic_id].partitions, b.topics[topic_id].partitions
            expected = {pid for pid in x.keys() | y.keys() if x.get(pid) != y.get(pid)}
            assert set(x.differing(y)) == expected == set(y.differing(x))


def test_a_rebased_image_keeps_only_what_changed_since_the_file(tmp_path):
    topics = [TopicRecord(name="t", topic_id=T1)] + [
        PartitionRecord(partition_id=pid, topic_id=T1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
        for pid in range(1000)
    ]
    image = apply_records(EMPTY_IMAGE, topics)
    write_image_file(str(tmp_path / "f"), image)
    loaded = ImageFile(str(tmp_path / "f")).image()
    assert loaded == image and file_chunks(loaded) == 4
    changed = apply_records(
        loaded, [PartitionChangeRecord(partition_id=7, topic_id=T1, isr=(1, 2), leader=1)]
    )
    chunk = changed.topics[T1].partitions._chunks[0]
    assert type(chunk) is FileChunk and chunk.changed_slots() == [7]
    write_image_file(str(tmp_path / "g"), changed)
    again = rebased(changed, ImageFile(str(tmp_path / "g")))
    assert again == changed and again.topics[T1].partitions._chunks[0].changed_slots() == []
    with pytest.raises(ValueError, match="serve the future"):
        rebased(image, ImageFile(str(tmp_path / "g")))


def test_a_file_cut_short_or_not_one_is_refused_by_name(tmp_path):
    image = apply_records(
        EMPTY_IMAGE,
        [
            TopicRecord(name="t", topic_id=T1),
            PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1),
        ],
    )
    path = tmp_path / "f"
    size = write_image_file(str(path), image)
    assert size == path.stat().st_size and not (tmp_path / "f.part").exists()
    whole = path.read_bytes()
    path.write_bytes(whole[:-1])
    with pytest.raises(ImageFileError, match="cut short"):
        ImageFile(str(path))
    path.write_bytes(b"x" * 100)
    with pytest.raises(ImageFileError, match="not an image file"):
        ImageFile(str(path))
    path.write_bytes(b"")
    with pytest.raises(ImageFileError, match="shorter than its header"):
        ImageFile(str(path))
    with pytest.raises(ImageFileError, match="No such file"):
        ImageFile(str(tmp_path / "missing"))


def test_a_writer_that_fails_halfway_leaves_no_file(tmp_path, monkeypatch):
    image = apply_records(EMPTY_IMAGE, [TopicRecord(name="t", topic_id=T1)])
    import metadata_records.image_file as image_file

    def broken(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(image_file, "encode_image", broken)
    with pytest.raises(OSError):
        write_image_file(str(tmp_path / "f"), image)
    assert not (tmp_path / "f").exists()


class _Image(NamedTuple):
    next_offset: int
    partition_count: int


def test_a_new_file_is_due_after_enough_records_or_once_writes_calm_down():
    from voter import shared_image

    now = 1000.0
    image = _Image(0, 2_000_000)
    shared = shared_image.SharedImage(lambda: image, lambda: 0)
    assert not shared.due(now)  # none yet: the first is written when a process needs one
    shared.files.append(shared_image.SharedFile(-1, 0, 0, None))
    per_file = max(shared_image.REWRITE_RECORDS, 2_000_000 * shared_image.REWRITE_PER_PARTITION)
    # Steady writes, a thousand records a second: due only after per_file of them.
    t, offset = now, 0
    while offset < per_file - 1_000:
        t, offset = t + 0.1, offset + 100
        image = _Image(offset, 2_000_000)
        assert not shared.due(t), offset
    image = _Image(int(per_file), 2_000_000)
    assert shared.due(t + 0.1)
    # Writes calm down after fewer: due once QUIET_S passed with few records.
    shared.files.append(shared_image.SharedFile(-1, image.next_offset, 0, None))
    base = image.next_offset
    image = _Image(base + shared_image.QUIET_AFTER + 5, 2_000_000)
    t += 0.1
    assert not shared.due(t)
    assert not shared.due(t + shared_image.QUIET_S / 2)
    assert shared.due(t + shared_image.QUIET_S + 0.2)
    # Calm, but too few records since the newest file: not worth a file.
    shared.files.append(shared_image.SharedFile(-1, image.next_offset, 0, None))
    image = _Image(image.next_offset + 10, 2_000_000)
    assert not shared.due(t + 60)


def test_a_process_that_cannot_read_the_file_asks_for_the_image_encoded(tmp_path):
    from voter.link import IMAGE_FILE, NO_FILE
    from voter.log_follower import LogFollower

    sent = []
    follower = LogFollower(1000, "worker 0", "worker 0", sent.append, sent.append)
    assert follower.take((IMAGE_FILE, str(tmp_path / "gone"), (0, [], 0)))
    assert sent[0][0] == NO_FILE and "No such file" in sent[0][1]
    assert not follower.has_image.is_set()
    # One at another offset than the core named (its descriptor reused) neither.
    image = apply_records(EMPTY_IMAGE, [TopicRecord(name="t", topic_id=T1)])
    write_image_file(str(tmp_path / "f"), image)
    assert follower.take((IMAGE_FILE, str(tmp_path / "f"), (0, [], image.next_offset + 5)))
    assert sent[1][0] == NO_FILE and "not " + str(image.next_offset + 5) in sent[1][1]
    assert not follower.has_image.is_set()
    # A readable one starts it.
    assert follower.take((IMAGE_FILE, str(tmp_path / "f"), (0, [], image.next_offset)))
    assert follower.has_image.is_set() and follower.sm.image == image


def test_a_rebase_never_goes_back_to_an_older_file(tmp_path):
    topics = [TopicRecord(name="t", topic_id=T1)] + [
        PartitionRecord(partition_id=pid, topic_id=T1, replicas=(1, 2), isr=(1, 2), leader=1)
        for pid in range(300)
    ]
    older = apply_records(EMPTY_IMAGE, topics)
    write_image_file(str(tmp_path / "older"), older)
    newer = apply_records(
        older, [PartitionChangeRecord(partition_id=7, topic_id=T1, isr=(1,), leader=1)]
    )
    write_image_file(str(tmp_path / "newer"), newer)
    reading = ImageFile(str(tmp_path / "newer")).image()
    # Partition 7 is not a change of its own here: from the older file it would read as it was.
    with pytest.raises(ValueError, match="older than the one"):
        rebased(reading, ImageFile(str(tmp_path / "older")))
