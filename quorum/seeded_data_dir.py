"""A voter's data dir written from an image: how a cluster starts again from
a known state (``metaquorum restore`` from a backup, ``metaquorum recover``
from a survivor's committed image), not from an empty log.

What it keeps true:

* ``metaquorum serve`` on the dir starts as a formed voter of ``cluster_id``
  whose state is exactly the image, with ``image.voters`` replaced by the
  voters given; offsets go on from ``image.next_offset``, so broker epochs
  (offsets) never go backwards.
* The dir holds our snapshot (``raft.snapshot``), the Raft meta file and
  ``metaquorum.json``, no journal: pysyncobj starts one holding its NO_OP at
  index 1, and loading the snapshot resets that log to the snapshot's two
  entries (``prev``, ``last``) because they differ from it
  (``SyncObj.__loadDumpFile``); ``_keep_journal`` leaves a one-entry journal
  alone, and the start checks find nothing to refuse (no journal, and a meta
  file whose commit index the snapshot covers: quorum/startup_checks.py).
* The Raft term goes on from the image's controller epoch: the controller
  epoch is the term of the leader that wrote it (quorum/orderer.py), and a
  LEADER_CHANGE applies only with a newer epoch than the image's
  (``batch_applies``). Started at term 0, a cluster seeded from an image of
  epoch 7 would elect leaders whose LEADER_CHANGE is a no-op until term 8.
  So the snapshot's entries carry that term and the meta file stores it as
  the current term (no vote); the first election is at the term after it.
* It is written into an empty or missing directory only, the identity last:
  a dir cut short by a crash has no ``metaquorum.json``, so ``serve`` refuses
  it (not empty, no identity) rather than start it as a new voter.

The Raft index of the snapshot (``seeded_raft_index``) matters twice. A voter
added later starts with a log of one entry (index 1), and pysyncobj's leader
sends a snapshot, not entries, only to a follower whose next index is at or
below its first log entry (``__sendAppendEntries``): ``prev`` must be at
index 2 or more, or the joiner would get entries without the image and
diverge. And after a lost majority, the voters that were lost may hold longer
logs than the survivor: if the new cluster's entries shared indexes with
theirs, one of their entries could match ours in index and term (our
terms go on from the image's epoch, through terms they also used) and an
old log would be extended as if it were ours. Starting far beyond any index they can hold makes every old log
shorter than our first entry, so it can only be replaced by a snapshot.
"""

from __future__ import annotations

import os
import struct

from metadata_records.image import MetadataImage
from metadata_records.records import Voter
from metadata_records.uuids import random_uuid

from .data_dir_reader import JOURNAL_FILE, SNAPSHOT_FILE
from .membership import address_of
from .node_config import DataDirIdentity, store_identity
from .raft.durability import DurableMetaStorer, fsync_dir
from .state_machine import write_snapshot_file

META_FILE = JOURNAL_FILE + ".meta"  # the Raft term, vote and commit index
_NO_OP = struct.pack("B", 1)  # pysyncobj's _COMMAND_TYPE.NO_OP entry, as its journal holds it

# How far a seeded snapshot's Raft index lies beyond the highest index known
# to have been used. Raft indexes are u64 in the journal (journal_format.py)
# and unbounded ints in pysyncobj, so room is no concern; 2**48 is more
# entries than a cluster appends (at 100,000 entries a second, a rate no
# pysyncobj leader reaches, 89 years), so no lost voter's log reaches it,
# and 32 seeds in a row still stay below 2**53, exact in a float64 (what
# /metrics and JSON readers hold numbers in).
RAFT_INDEX_MARGIN = 1 << 48


class SeedError(Exception):
    """The seeded data dir cannot be written; the message says why and what to do."""


def seeded_raft_index(highest_index_used: int = 0) -> int:
    """The Raft index to seed a data dir at: ``RAFT_INDEX_MARGIN`` past the
    highest index any voter of this cluster id may have used (a survivor's
    last journal entry for ``recover``; 0 when nothing is known, e.g. a
    restore into a new cluster). Always 3 or more (``prev`` at 2 or more)."""
    return max(highest_index_used, 0) + RAFT_INDEX_MARGIN


def write_seeded_data_dir(
    data_dir: str,
    *,
    node_id: int,
    cluster_id: str,
    image: MetadataImage,
    voters: tuple[Voter, ...],
    raft_index: int,
    directory_id: str | None = None,
) -> DataDirIdentity:
    """Writes ``data_dir`` (empty or missing) so that ``serve`` starts it as
    voter ``node_id`` of ``cluster_id`` holding ``image`` with ``voters``.

    ``directory_id``: this dir's (a new random one if None; ``voters``' entry
    for this node, if it has one, must agree). A voter given with directory
    id None accepts any formed peer under that node id: then the image gets
    no voter set and ``metaquorum.json`` the bootstrap set (quorum/voter_guard.py),
    and the first leader that heard every voter writes the full set; ``serve``
    must then be given ``--voters`` naming these voters at these addresses.
    Raises SeedError, having written nothing, for a bad argument or a
    directory that is not empty."""
    _check_target(data_dir)
    if raft_index < 3:
        raise SeedError(
            f"Raft index {raft_index}: a seeded snapshot must end at index 3 or more "
            "(seeded_raft_index says why)"
        )
    voters = _checked_voters(voters, node_id)
    own = next(v for v in voters if v.voter_id == node_id)
    if directory_id is None:
        directory_id = own.voter_directory_id or random_uuid()
    elif own.voter_directory_id not in (None, directory_id):
        raise SeedError(
            f"node {node_id}'s entry in the voters names directory {own.voter_directory_id}, "
            f"not this dir's {directory_id}"
        )
    voters = tuple(v._replace(voter_directory_id=directory_id) if v is own else v for v in voters)
    known = all(v.voter_directory_id is not None for v in voters)
    seeded = image._replace(voters=voters if known else ())
    identity = DataDirIdentity(
        node_id,
        cluster_id,
        directory_id,
        formed=True,
        bootstrap=None if known else {v.voter_id: v.voter_directory_id for v in voters},
    )
    created = not os.path.exists(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    if created:
        fsync_dir(data_dir)  # the new directory's entry in its parent
    term = image.controller_epoch
    last = (_NO_OP, raft_index, term)
    prev = (_NO_OP, raft_index - 1, term)
    cluster = sorted(address_of(v) for v in voters)
    write_snapshot_file(os.path.join(data_dir, SNAPSHOT_FILE), seeded, last, prev, cluster)
    # Term, no vote, and the snapshot's end committed (it is: it is the image).
    meta = {"raftCommitIndex": raft_index, "currentTerm": term, "votedForNodeId": None}
    DurableMetaStorer(os.path.join(data_dir, META_FILE)).storeMeta(meta, "seeding the data dir")
    store_identity(data_dir, identity)  # last: a dir without it is refused by serve
    return identity


def _check_target(data_dir: str) -> None:
    if not data_dir.strip():
        raise SeedError("the data dir is empty: give the directory to write the voter's files to")
    if os.path.lexists(data_dir) and not os.path.isdir(data_dir):
        raise SeedError(f"{data_dir} exists and is not a directory: give an empty or new directory")
    if os.path.isdir(data_dir) and any(os.scandir(data_dir)):
        names = sorted(os.listdir(data_dir))
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise SeedError(
            f"{data_dir} is not empty ({shown}): a seeded data dir is written into an empty "
            "or new directory only; move its files away, or give another directory"
        )


def _checked_voters(voters: tuple[Voter, ...], node_id: int) -> tuple[Voter, ...]:
    if not voters:
        raise SeedError("no voters given: the seeded cluster needs at least this node")
    ids = [v.voter_id for v in voters]
    if len(set(ids)) != len(ids):
        raise SeedError(f"a node id appears twice among the voters {sorted(ids)}")
    addresses = [address_of(v) for v in voters]
    if len(set(addresses)) != len(addresses):
        raise SeedError(f"a Raft address appears twice among the voters {addresses}")
    if node_id not in ids:
        raise SeedError(f"node {node_id} is not among the voters {sorted(ids)}")
    return tuple(sorted(voters, key=lambda v: v.voter_id))
