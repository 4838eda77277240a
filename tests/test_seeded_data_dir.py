"""A data dir seeded with an image (quorum/seeded_data_dir.py): what it refuses,
and a real three-voter cluster started from three dirs seeded from one image
that serves that image, goes on at its offsets, writes its voter set and
brings a fourth voter in through a snapshot install."""

from __future__ import annotations

import json
import os

import pytest

from metadata_records.image import EMPTY_IMAGE
from metadata_records.records import Voter
from quorum.data_dir_reader import read_data_dir
from quorum.seeded_data_dir import (
    RAFT_INDEX_MARGIN,
    SeedError,
    seeded_raft_index,
    write_seeded_data_dir,
)
from quorum.startup_checks import snapshot_last_index

from .cluster import Cluster
from .test_cluster import brokers, register, write
from .test_http_workers import heartbeat_until_unfenced
from .test_membership import add, digest, role, voters_of

VOTER = (Voter(0, None, "127.0.0.1", 9093),)


def seed(path, **kw):
    args = {
        "node_id": 0,
        "cluster_id": "c",
        "image": EMPTY_IMAGE,
        "voters": VOTER,
        "raft_index": seeded_raft_index(),
    }
    return write_seeded_data_dir(str(path), **{**args, **kw})


def test_a_dir_that_is_not_empty_is_refused_and_left_as_it_was(tmp_path):
    (tmp_path / "raft.journal").write_bytes(b"someone's journal")
    with pytest.raises(SeedError, match=r"is not empty \(raft.journal\).*empty or new directory"):
        seed(tmp_path)
    assert os.listdir(tmp_path) == ["raft.journal"]
    file = tmp_path / "raft.journal"
    with pytest.raises(SeedError, match="exists and is not a directory"):
        seed(file)


def test_bad_arguments_are_refused_before_anything_is_written(tmp_path):
    target = tmp_path / "new"
    with pytest.raises(SeedError, match="node 5 is not among the voters"):
        seed(target, node_id=5)
    with pytest.raises(SeedError, match="index 3 or more"):
        seed(target, raft_index=2)
    twice = (*VOTER, Voter(0, None, "127.0.0.1", 9094))
    with pytest.raises(SeedError, match="node id appears twice"):
        seed(target, voters=twice)
    with pytest.raises(SeedError, match="names directory"):
        seed(target, voters=(VOTER[0]._replace(voter_directory_id="AAAAAAAAAAAAAAAAAAAAAQ"),),
             directory_id="AAAAAAAAAAAAAAAAAAAAAg")  # fmt: skip
    assert not target.exists()


def test_a_seeded_dir_holds_the_image_a_meta_file_and_its_identity_last(tmp_path):
    image = EMPTY_IMAGE._replace(next_offset=42, controller_epoch=7)
    identity = seed(tmp_path / "d", image=image)
    files = sorted(os.listdir(tmp_path / "d"))
    assert files == ["metaquorum.json", "raft.journal.meta", "raft.snapshot"]
    stored = json.loads((tmp_path / "d" / "metaquorum.json").read_text())
    assert stored["formed"] is True and "bootstrapVoters" not in stored
    assert stored["directoryId"] == identity.directory_id
    read = read_data_dir(str(tmp_path / "d"))
    assert read.snapshot.next_offset == 42
    assert read.snapshot.voters == (VOTER[0]._replace(voter_directory_id=identity.directory_id),)
    assert read.last_index == RAFT_INDEX_MARGIN
    assert snapshot_last_index(str(tmp_path / "d" / "raft.snapshot")) == RAFT_INDEX_MARGIN


def source_image(root):
    """The image a real lone voter holds after some brokers and topics."""
    root.mkdir()
    src = Cluster(root, voters=1, fsync="always")
    try:
        src.start()
        leader = src.leader()
        epochs = {b: register(src, leader, b) for b in (1, 2, 3)}
        for b, epoch in epochs.items():
            heartbeat_until_unfenced(src, leader, b, epoch)
        created = write(src, leader, "/v1/topics", {"topics": [
            {"name": "orders", "numPartitions": 4, "replicationFactor": 3},
            {"name": "audit", "numPartitions": 2, "replicationFactor": 2},
        ]})  # fmt: skip
        assert [t["errorName"] for t in created["topics"]] == ["NONE", "NONE"], created
        assert src.stop(0) == 0
    finally:
        src.close()
    read = read_data_dir(str(src.data_dir(0)))
    for _ in read.entries:
        pass
    assert read.held_back == 0
    return read.image(), epochs


def topics(c, i):
    r = c.get(i, "/v1/topics")
    assert r.status_code == 200, r.text
    return {t["name"]: (t["topicId"], len(t["partitions"])) for t in r.json()["topics"]}


@pytest.mark.slow
def test_three_voters_seeded_from_one_image_serve_it_and_grow_by_a_snapshot(tmp_path):
    image, epochs = source_image(tmp_path / "source")
    assert image.next_offset > 0 and len(image.topics) == 2
    (tmp_path / "seeded").mkdir()
    c = Cluster(tmp_path / "seeded", voters=3, fsync="always")
    try:
        voters = tuple(Voter(i, None, "127.0.0.1", c.raft[i]) for i in range(3))
        index = seeded_raft_index()
        dirs = {}
        for i in range(3):
            identity = write_seeded_data_dir(
                str(c.data_dir(i)), node_id=i, cluster_id=c.cluster_id, image=image,
                voters=voters, raft_index=index,
            )  # fmt: skip
            dirs[i] = identity.directory_id
        c.start()
        leader = c.leader()
        want = {t.name: (t.topic_id, len(t.partitions)) for t in image.topics.values()}
        for i in range(3):
            c.wait(lambda i=i: c.ready(i), 30, f"voter {i} ready")
            assert brokers(c, i) == epochs
            assert topics(c, i) == want
        # Offsets go on from the image: a new broker epoch is past every old one.
        new_epoch = register(c, leader, 4)
        assert new_epoch >= image.next_offset

        # The first leader that heard every voter wrote the set, directory ids and all.
        def written() -> bool:
            return {n: v["directoryId"] for n, v in voters_of(c, leader).items()} == dirs

        c.wait(written, 30, "the voter set written with every directory id")
        # A fourth voter (an empty dir) catches up through a snapshot install:
        # its log could not continue the seeded one.
        j = c.add_node()
        c.start(j)
        c.wait(lambda: role(c, j) == "observer", 30, f"{j} up")
        add(c, j, via=leader)
        c.wait(lambda: all(role(c, i) == "voter" for i in range(4)), 30, "four voters")
        c.wait(lambda: len({digest(c, i) for i in range(4)}) == 1, 30, "equal digests")
        assert brokers(c, j) == {**epochs, 4: new_epoch}
        assert snapshot_last_index(str(c.data_dir(j) / "raft.snapshot")) >= index
    finally:
        c.close()
