"""``metaquorum restore``: a voter's data dir written from a backup file, so
that ``metaquorum serve`` starts a new cluster holding exactly the backup's
image.

What it keeps true:

* Nothing is written unless the whole file is good (the check of
  ``backup --verify``: digests, the image decoded and held against its
  header), its metadata.version is one this build runs, and the data dir is
  empty or new (quorum/seeded_data_dir.py writes the identity last).
* Every voter restored from one file agrees: the same image, the same Raft
  index (``seeded_raft_index()``: nothing of the new cluster's log exists
  yet, so the index is a constant, not anything of this machine), the same
  cluster id, and the voter set of ``--voters`` with no directory ids: each
  voter accepts any formed peer under those node ids, and the first leader
  that hears every voter writes the full set (quorum/voter_guard.py).
* By default the cluster gets a new id, so brokers of the old cluster (a
  disaster-recovery drill while the old one still runs, a copy for tests)
  are refused with INCONSISTENT_CLUSTER_ID instead of joining it. A new id
  must be the same on every voter: with one voter it is made here; with
  more, ``--cluster-id`` names it (a random id drawn on each voter would
  give a cluster that never forms). ``--keep-cluster-id`` keeps the
  backup's: the old brokers are then accepted (the cluster replaces a lost one).
"""

from __future__ import annotations

import argparse
import os

from metadata_records.backup_file import BackupError, describe, load_backup
from metadata_records.features import MAX_METADATA_VERSION, METADATA_VERSION, release_name
from metadata_records.limits import MAX_CLUSTER_ID_LENGTH
from metadata_records.records import Voter
from metadata_records.uuids import random_uuid
from quorum.membership import describe as describe_voters
from quorum.node_config import ConfigError, parse_voters
from quorum.seeded_data_dir import SeedError, seeded_raft_index, write_seeded_data_dir

from .ops_command import EXIT_BAD_INPUT, EXIT_REFUSED, fail

READ_BYTES = 1 << 20


class _Refused(Exception):
    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code


def add_restore_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", required=True, metavar="FILE", help="a backup file")
    p.add_argument("--data-dir", required=True, help="the voter's data dir to write (empty or new)")
    p.add_argument("--node-id", type=int, required=True, help="this voter's node id")
    p.add_argument(
        "--voters",
        required=True,
        help='the new cluster\'s voters, "0@host:raftport,1@host:raftport,..." (as serve '
        "--voters); the same on every voter",
    )
    ids = p.add_mutually_exclusive_group()
    ids.add_argument(
        "--cluster-id",
        help="the new cluster's id, the same for every voter (required with more than one "
        "voter, unless --keep-cluster-id)",
    )
    ids.add_argument(
        "--keep-cluster-id",
        action="store_true",
        help="keep the backup's cluster id: its brokers are accepted (the default, a new id, "
        "refuses them with INCONSISTENT_CLUSTER_ID)",
    )


def run_restore(args: argparse.Namespace) -> int:
    try:
        return _restore(args)
    except _Refused as e:
        return fail(str(e), e.code)


def _restore(args: argparse.Namespace) -> int:
    try:
        addresses = parse_voters(args.voters)
    except ConfigError as e:
        raise _Refused(str(e), EXIT_BAD_INPUT) from None
    if args.node_id not in addresses:
        raise _Refused(
            f"--node-id {args.node_id} is not among --voters ({args.voters})", EXIT_BAD_INPUT
        )
    if args.cluster_id is not None and not 0 < len(args.cluster_id) <= MAX_CLUSTER_ID_LENGTH:
        raise _Refused(
            f"--cluster-id: 1 to {MAX_CLUSTER_ID_LENGTH} characters, not {len(args.cluster_id)}",
            EXIT_BAD_INPUT,
        )
    if len(addresses) > 1 and args.cluster_id is None and not args.keep_cluster_id:
        raise _Refused(
            f"a restore of {len(addresses)} voters needs the new cluster id, the same for "
            f"every voter: add --cluster-id (a fresh one: --cluster-id {random_uuid()}), or "
            "--keep-cluster-id to keep the backup's",
            EXIT_BAD_INPUT,
        )
    _check_empty(args.data_dir)
    summary, image = _load(args.source)
    if image.metadata_version > MAX_METADATA_VERSION:
        raise _Refused(
            f"{args.source} is at {METADATA_VERSION} {image.metadata_version}; this "
            f"metaquorum runs up to {MAX_METADATA_VERSION} ({release_name(MAX_METADATA_VERSION)}): "
            "restore with the release that wrote it, or a newer one; nothing was written"
        )
    old_id = summary.header["clusterId"]
    cluster_id = (
        old_id if args.keep_cluster_id else args.cluster_id if args.cluster_id else random_uuid()
    )
    voters = tuple(
        Voter(node_id, None, *_host_port(address)) for node_id, address in addresses.items()
    )
    raft_index = seeded_raft_index()
    try:
        identity = write_seeded_data_dir(
            args.data_dir,
            node_id=args.node_id,
            cluster_id=cluster_id,
            image=image,
            voters=voters,
            raft_index=raft_index,
        )
    except SeedError as e:
        raise _Refused(f"{e}; nothing was written", EXIT_BAD_INPUT) from None
    _report(args, summary, voters, cluster_id, old_id, identity.directory_id, raft_index)
    return 0


def _check_empty(data_dir: str) -> None:
    """Before the file is read (a large one takes a while): the same check
    write_seeded_data_dir makes again before it writes."""
    if os.path.isdir(data_dir) and any(os.scandir(data_dir)):
        raise _Refused(
            f"--data-dir {data_dir} is not empty: a restore writes into an empty or new "
            "directory only; move its files away, or give another directory",
            EXIT_BAD_INPUT,
        )
    if os.path.lexists(data_dir) and not os.path.isdir(data_dir):
        raise _Refused(f"--data-dir {data_dir} exists and is not a directory", EXIT_BAD_INPUT)


def _load(path: str):
    def pieces():
        try:
            with open(path, "rb") as f:
                while piece := f.read(READ_BYTES):
                    yield piece
        except OSError as e:
            raise _Refused(
                f"--from {path}: cannot read it ({e.strerror})", EXIT_BAD_INPUT
            ) from None

    try:
        return load_backup(pieces())
    except BackupError as e:
        raise _Refused(f"{path}: {e}; nothing was written") from None


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _report(args, summary, voters, cluster_id, old_id, directory_id, raft_index) -> None:
    print(f"restored node {args.node_id} into {args.data_dir} from {args.source}:")
    for line in describe(summary):
        print(f"  {line}")
    print(f"  new voter set {describe_voters(voters)}; this voter's directory id {directory_id}")
    print(f"  Raft index {raft_index} (the same for every voter restored from a backup)")
    if cluster_id == old_id:
        print(
            f"cluster id {cluster_id}, the backup's (--keep-cluster-id): the old cluster's "
            "brokers are accepted. Never run it beside the cluster it was taken from."
        )
    else:
        print(
            f"cluster id {cluster_id} (new; the backup's was {old_id}): brokers of the old "
            "cluster are refused with INCONSISTENT_CLUSTER_ID until they are configured with "
            "the new id, or the cluster is restored with --keep-cluster-id instead"
        )
    others = [v.voter_id for v in voters if v.voter_id != args.node_id]
    if others:
        print(
            f"next: restore voters {', '.join(map(str, others))} from this same file with "
            f"--cluster-id {cluster_id} and the same --voters, then start every voter:"
        )
    else:
        print("next: start it:")
    print(
        f"  metaquorum serve --node-id {args.node_id} --voters {args.voters} "
        f"--data-dir {args.data_dir} (with your usual flags; the first leader to hear every "
        "voter writes the voter set)"
    )
