"""``metaquorum recover --data-dir DIR``: a cluster that lost a majority of its
voters starts again from one survivor, as a single-voter cluster holding
everything that survivor had committed (etcd's ``--force-new-cluster``).

Unsafe by nature, so what it keeps true is what can still be kept:

* **Only what was committed.** The image is the survivor's snapshot and
  journal replayed up to its stored commit index (quorum/data_dir_reader.py);
  the entries past it are dropped, never served as committed, and listed
  first (Raft index, offsets, record types), with the writes that are lost
  whatever this does: those the lost voters committed and this one never
  received.
* **Asked, unless ``--yes``.** The operator types the cluster id (as one
  types a repository's name to delete it: "y" is typed by habit); without a
  terminal and without ``--yes`` it refuses.
* **No data is deleted.** The old files move to ``DIR/pre-recover-<UTC>/``
  (renames in one file system: no second copy, no room needed), and the
  seeded data dir (quorum/seeded_data_dir.py) takes their place with the same
  node id, cluster id and directory id, this node alone as the voter set, and
  a Raft index far beyond any the lost voters' logs can hold.
* **A crash at any point leaves a state the next run finishes or an operator
  undoes.** The seeded dir is written whole into ``DIR/recover-staging/``
  first (a run cut short there changed nothing: the next one starts over);
  then ``DIR/recover-in-progress.json`` records the move (old files out,
  ``metaquorum.json`` first; new files in, ``metaquorum.json`` last), so a
  second run finishes it; ``serve`` refuses a dir holding that marker, which
  goes last.
* The data dir's lock (quorum/startup_checks.py) is held throughout: a voter
  still running on it refuses recover, and serve refuses while it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from metadata_records.image import MetadataImage
from metadata_records.records import Voter
from metadata_records.snapshot import image_digest
from metadata_records.uuids import random_uuid
from quorum.data_dir_reader import JOURNAL_FILE, DataDirError, read_data_dir
from quorum.membership import address_of
from quorum.node_config import IDENTITY_FILE, RECOVER_MARKER, ConfigError, parse_voters
from quorum.raft.durability import fsync_dir
from quorum.seeded_data_dir import SeedError, seeded_raft_index, write_seeded_data_dir
from quorum.startup_checks import explain_os_error, lock_data_dir, unlock_data_dir

from .ops_command import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_REFUSED, fail

STAGING = "recover-staging"
MARKER = RECOVER_MARKER  # serve refuses a data dir holding it
BACKUP_PREFIX = "pre-recover-"
EXIT_CUT_SHORT = 3  # an error halfway (named): run recover again to finish
TAIL_TYPES_SHOWN = 8  # record types listed for the dropped tail, the most frequent first


class RecoverError(Exception):
    """What stops recover before it changed anything (exit 2), named with what to do."""


def add_recover_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        required=True,
        help="the surviving voter's data dir (its serve stopped)",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="do not ask for confirmation (scripts; the loss is still printed)",
    )
    p.add_argument(
        "--raft-address",
        help="this node's Raft HOST:PORT, if the voter set does not name it (serve's "
        "--voters entry for it); default: the voter set's",
    )


def run_recover(args: argparse.Namespace) -> int:
    data_dir = args.data_dir
    try:
        _check_dir(data_dir)
        try:
            lock = lock_data_dir(data_dir)
        except ConfigError as e:
            raise RecoverError(str(e)) from None
        try:
            return _recover_locked(data_dir, args)
        finally:
            unlock_data_dir(lock)
    except RecoverError as e:
        return fail(str(e), EXIT_BAD_INPUT)
    except OSError as e:  # before anything changed: seed_in_place says its own
        where = e.filename or data_dir
        return fail(
            f"--data-dir {where}: {explain_os_error(e)}; nothing was changed", EXIT_BAD_INPUT
        )
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)


def _recover_locked(data_dir: str, args: argparse.Namespace) -> int:
    marker = os.path.join(data_dir, MARKER)
    if os.path.exists(marker):
        return _finish_cut_short(data_dir, _read_marker(marker), args)
    staging = os.path.join(data_dir, STAGING)
    if os.path.lexists(staging):
        # Written before anything moved: the dir is as it was; start over.
        shutil.rmtree(staging)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(marker + ".tmp")
        print(f"removed {staging}, left by a recover cut short before it changed anything")
    survivor = read_survivor(data_dir)
    own = _own_voter(survivor, args.raft_address)
    for line in describe_loss(data_dir, survivor, own):
        print(line)
    if not _confirmed(survivor.cluster_id, args.yes):
        return fail("not confirmed: nothing was changed", EXIT_REFUSED)
    try:
        backup = seed_in_place(data_dir, survivor, own)
    except OSError as e:
        return _cut_short(data_dir, e)
    _done(data_dir, backup, survivor, own)
    return 0


def _cut_short(data_dir: str, e: OSError) -> int:
    return fail(
        f"recover of {data_dir} stopped halfway: {e}. Nothing is lost: once the cause is "
        "fixed, run recover again to finish it (or undo it: docs/durability.md)",
        EXIT_CUT_SHORT,
    )


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Survivor:
    """What a stopped voter's data dir holds, read without changing it."""

    node_id: int
    cluster_id: str
    directory_id: str
    image: MetadataImage  # at the stored commit index
    digest: str  # its image digest (a full encoding: computed once)
    commit_index: int | None
    last_index: int  # the highest Raft index in the dir, committed or not
    held_back: int  # Raft entries past the commit index
    tail: tuple  # LogEntry: the records those entries would have added
    tail_problem: str | None  # why the tail could not all be read


def _check_dir(data_dir: str) -> None:
    if not os.path.exists(data_dir):
        raise RecoverError(f"--data-dir {data_dir} does not exist: give the survivor's data dir")
    if not os.path.isdir(data_dir):
        raise RecoverError(f"--data-dir {data_dir} is not a directory")
    if not any(os.scandir(data_dir)):
        raise RecoverError(
            f"--data-dir {data_dir} is empty: nothing to recover from; give the data dir "
            "of a voter that survived (its raft.journal, raft.snapshot, metaquorum.json)"
        )


def read_survivor(data_dir: str) -> Survivor:
    node_id, cluster_id, directory_id = _identity(data_dir)
    try:
        committed = read_data_dir(data_dir)
        for _ in committed.entries:
            pass
    except DataDirError as e:
        raise RecoverError(f"{e}; nothing was changed") from None
    if committed.commit_index is None and os.path.exists(os.path.join(data_dir, JOURNAL_FILE)):
        raise RecoverError(
            f"{os.path.join(data_dir, JOURNAL_FILE)}.meta, which stores the commit index, is "
            "missing or unreadable: nothing tells the committed entries from the others; "
            "nothing was changed (choose another survivor, or restore from a backup)"
        )
    image = committed.image()
    tail, problem = [], None
    if committed.held_back:
        try:
            for batch in read_data_dir(data_dir, include_uncommitted=True).entries:
                tail.extend(e for e in batch if e.offset >= image.next_offset)
        except DataDirError as e:
            problem = str(e)
    return Survivor(
        node_id,
        cluster_id,
        directory_id,
        image,
        image_digest(image),
        committed.commit_index,
        committed.last_index,
        committed.held_back,
        tuple(tail),
        problem,
    )


def _identity(data_dir: str) -> tuple[int, str, str]:
    path = os.path.join(data_dir, IDENTITY_FILE)
    try:
        with open(path, "rb") as f:
            identity = orjson.loads(f.read())
        node_id, cluster_id = int(identity["nodeId"]), str(identity["clusterId"])
        # A dir from before directory ids (version 1) gets one now, as serve would.
        directory_id = identity.get("directoryId") or random_uuid()
    except FileNotFoundError:
        raise RecoverError(
            f"--data-dir {data_dir} has no {IDENTITY_FILE}: it is not a metaquorum voter's "
            "data dir (or a recover was cut short by hand: see docs/durability.md)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise RecoverError(f"{path} is unreadable ({e}); nothing was changed") from None
    return node_id, cluster_id, directory_id


def _own_voter(survivor: Survivor, raft_address: str | None) -> Voter:
    """This node as the only voter: at --raft-address, else where the voter set has it."""
    if raft_address is not None:
        try:
            address = parse_voters(f"{survivor.node_id}@{raft_address}")[survivor.node_id]
        except ConfigError as e:
            raise RecoverError(str(e).replace("--voters", "--raft-address")) from None
    else:
        named = [v for v in survivor.image.voters if v.voter_id == survivor.node_id]
        if not named:
            raise RecoverError(
                f"the committed voter set does not name node {survivor.node_id}: give its "
                "Raft address with --raft-address HOST:PORT (its entry in serve's --voters)"
            )
        address = address_of(named[0])
    host, _, port = address.rpartition(":")
    return Voter(survivor.node_id, survivor.directory_id, host, int(port))


def describe_loss(data_dir: str, survivor: Survivor, own: Voter) -> list[str]:
    image = survivor.image
    lines = [
        f"recover {data_dir}: node {survivor.node_id} of cluster {survivor.cluster_id} "
        f"(directory {survivor.directory_id})",
        f"  keeps: every record it committed, offsets 0 to {image.last_offset} "
        f"(Raft commit index {survivor.commit_index}), image digest {survivor.digest}",
        f"  becomes: a cluster of one voter, node {own.voter_id} at {address_of(own)}",
        "  may be lost:",
    ]
    if survivor.held_back:
        lines.append(
            f"  - {_entries(survivor.held_back)} past its commit index (up to index "
            f"{survivor.last_index}): written here but never known committed; dropped"
        )
        if survivor.tail:
            kinds = Counter(type(e.record).__name__ for e in survivor.tail)
            shown = ", ".join(f"{n} {k}" for k, n in kinds.most_common(TAIL_TYPES_SHOWN))
            more = "" if len(kinds) <= TAIL_TYPES_SHOWN else ", ..."
            lines.append(
                f"    they would have added offsets {survivor.tail[0].offset} to "
                f"{survivor.tail[-1].offset}: {shown}{more}"
            )
        if survivor.tail_problem:
            lines.append(f"    (not all could be read: {survivor.tail_problem})")
        lines.append(
            "    (a voter killed or cut off stores its commit index every 0.1 s: the last "
            "entries it knew committed may be among them)"
        )
    else:
        lines.append("  - no entry past its commit index")
    lines.append(
        "  - and every write the lost voters committed that this voter never received: "
        "nothing here can tell how many"
    )
    return lines


def _entries(n: int) -> str:
    return f"{n} Raft entr{'y' if n == 1 else 'ies'}"


def _confirmed(cluster_id: str, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        raise RecoverError(
            "no terminal to confirm on: run it with one (kubectl exec -it), or pass --yes "
            "once you have read what may be lost (run without --yes to print it)"
        )
    try:
        typed = input(f"Type the cluster id ({cluster_id}) to go on: ")
    except EOFError:
        return False
    return typed.strip() == cluster_id


# ------------------------------------------------------------------ writing


def seed_in_place(data_dir: str, survivor: Survivor, own: Voter) -> str:
    """The seeded dir written beside the old files, then put in their place;
    returns where the old files went."""
    staging = os.path.join(data_dir, STAGING)
    try:
        write_seeded_data_dir(
            staging,
            node_id=survivor.node_id,
            cluster_id=survivor.cluster_id,
            image=survivor.image,
            voters=(own,),
            raft_index=seeded_raft_index(survivor.last_index),
            directory_id=survivor.directory_id,
        )
    except SeedError as e:
        raise RecoverError(f"{e}; nothing was changed") from None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    backup, n = BACKUP_PREFIX + stamp, 1
    while os.path.lexists(os.path.join(data_dir, backup)):  # never into an earlier backup
        n += 1
        backup = f"{BACKUP_PREFIX}{stamp}-{n}"
    marker = {"backup": backup, "phase": "old files out"}
    _write_marker(data_dir, marker)
    _finish(data_dir, marker)
    return os.path.join(data_dir, marker["backup"])


def _finish(data_dir: str, marker: dict) -> None:
    """Each step is a rename or a marker rewrite; run again from any point, it
    does what is left."""
    backup = os.path.join(data_dir, marker["backup"])
    staging = os.path.join(data_dir, STAGING)
    if marker["phase"] == "old files out":
        os.makedirs(backup, exist_ok=True)
        fsync_dir(backup)
        old = _files(data_dir, leave=(MARKER, MARKER + ".tmp"))
        for name in sorted(old, key=lambda n: n != IDENTITY_FILE):  # the identity first
            os.replace(os.path.join(data_dir, name), os.path.join(backup, name))
        _sync_dirs(data_dir, backup)
        marker = {**marker, "phase": "new files in"}
        _write_marker(data_dir, marker)
    new = _files(staging, leave=())
    for name in sorted(new, key=lambda n: n == IDENTITY_FILE):  # the identity last
        os.replace(os.path.join(staging, name), os.path.join(data_dir, name))
    _sync_dirs(data_dir, staging)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(staging)
    os.unlink(os.path.join(data_dir, MARKER))
    _sync_dirs(data_dir)


def _files(directory: str, leave: tuple[str, ...]) -> list[str]:
    """The files and symbolic links of ``directory`` (a journal linked to
    another disk moves as a link); its subdirectories, earlier backups and a
    volume's lost+found among them, stay where they are."""
    if not os.path.isdir(directory):
        return []
    return [
        e.name
        for e in os.scandir(directory)
        if (e.is_symlink() or e.is_file()) and e.name not in leave
    ]


def _sync_dirs(*directories: str) -> None:
    for directory in directories:
        if not os.path.isdir(directory):
            continue
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_marker(data_dir: str, marker: dict) -> None:
    path = os.path.join(data_dir, MARKER)
    with open(path + ".tmp", "wb") as f:
        f.write(orjson.dumps(marker))
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    fsync_dir(path)


def _read_marker(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            marker = orjson.loads(f.read())
        if marker["phase"] not in ("old files out", "new files in") or not str(
            marker["backup"]
        ).startswith(BACKUP_PREFIX):
            raise ValueError(f"unknown step {marker['phase']!r}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RecoverError(
            f"{path} (left by a recover cut short) is unreadable ({e}): finish or undo "
            "by hand as docs/durability.md says"
        ) from None
    return marker


def _finish_cut_short(data_dir: str, marker: dict, args: argparse.Namespace) -> int:
    backup = os.path.join(data_dir, marker["backup"])
    print(
        f"recover {data_dir}: a recovery was cut short ({marker['phase']}): finishing it. "
        f"The old files are in {backup}; to undo instead, stop here and put them back "
        f"(docs/durability.md)"
    )
    if not _confirmed(_identity_for_prompt(data_dir, backup), args.yes):
        return fail("not confirmed: nothing was changed", EXIT_REFUSED)
    try:
        _finish(data_dir, marker)
    except OSError as e:
        return _cut_short(data_dir, e)
    print(f"recover {data_dir}: finished; the old files are in {backup}")
    _next_steps(data_dir, None)
    return 0


def _identity_for_prompt(data_dir: str, backup: str) -> str:
    """The cluster id, from wherever the identity file is at this step."""
    for where in (os.path.join(data_dir, STAGING), data_dir, backup):
        if os.path.exists(os.path.join(where, IDENTITY_FILE)):
            return _identity(where)[1]
    raise RecoverError(f"no {IDENTITY_FILE} in {data_dir}, its staging or its backup")


def _done(data_dir: str, backup: str, survivor: Survivor, own: Voter) -> None:
    image = survivor.image
    print(
        f"recovered {data_dir}: node {own.voter_id} is now the only voter of cluster "
        f"{survivor.cluster_id}, holding offsets 0 to {image.last_offset} (image digest "
        f"{survivor.digest} as committed here); the next record gets offset "
        f"{image.next_offset}"
    )
    dropped = f"; its uncommitted {_entries(survivor.held_back)} not served" * bool(
        survivor.held_back
    )
    print(f"  the old files are in {backup} (nothing was deleted{dropped})")
    _next_steps(data_dir, own)


def _next_steps(data_dir: str, own: Voter | None) -> None:
    address = address_of(own) if own is not None else "its address"
    print(
        "next:\n"
        f"  1. start this node with its usual serve flags (the same --node-id, --data-dir "
        f"{data_dir} and --voters): it leads alone at {address} and takes writes\n"
        "  2. wipe the lost voters' data dirs before they come back (one that comes back "
        "with its old log is not let in as a voter)\n"
        "  3. add voters one at a time, each started with an empty data dir: "
        "metaquorum add-voter --url URL --node-id N --address HOST:PORT\n"
        f"  4. once all is well, delete the backup under {data_dir} ({BACKUP_PREFIX}*)"
    )
