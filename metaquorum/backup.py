"""``metaquorum backup``: a voter's GET /v1/backup, written to a file only
whole and checked; ``metaquorum backup --verify FILE`` checks one again.

The file appears under its name only once every byte arrived and its
digests matched (metadata_records/backup_file.py ``BackupCheck``, fed as the
bytes come): it is written to ``FILE.part`` in the same directory, fsynced,
renamed, and the directory fsynced, so a crash or a broken download leaves
either no file or the previous one, never half of one; a failure removes the
``.part``. The file holds sensitive config values as they are (a restore
must bring them back): it is created readable by its owner only.

Connection flags as every command that talks to a cluster
(connection_flags.py); the token needs the admin role.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Iterator

import httpx

from metadata_records.backup_file import (
    BackupCheck,
    BackupError,
    BackupSummary,
    describe,
    load_backup,
)

from .connection_flags import add_connection_flags
from .ops_command import EXIT_BAD_INPUT, EXIT_NO_ANSWER, EXIT_REFUSED, fail

READ_BYTES = 1 << 20
PROGRESS_EVERY_S = 2.0  # a plain progress line this often (a terminal's is redrawn)


class _Failed(Exception):
    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code


def add_backup_flags(p: argparse.ArgumentParser) -> None:
    add_connection_flags(p, token_help="bearer token of the admin role")
    p.add_argument(
        "--token-file",
        default=os.environ.get("METAQUORUM_TOKEN_FILE"),
        help="read the bearer token from this file [env METAQUORUM_TOKEN_FILE]",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", metavar="FILE", help="write the backup to FILE")
    what.add_argument(
        "--out-dir",
        metavar="DIR",
        help="write it into DIR as metaquorum-<cluster id>-<offset>-<UTC time>.backup "
        "(a CronJob's volume: no shell needed to name it)",
    )
    what.add_argument(
        "--verify", metavar="FILE", help="check FILE whole (digests, image, counts); no --url"
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out FILE")
    p.add_argument(
        "--keep",
        type=int,
        metavar="N",
        help="with --out-dir: after a good backup, delete the oldest of DIR's backups "
        "beyond the newest N (this cluster's only; never a .part or another file)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run_backup(args: argparse.Namespace) -> int:
    try:
        if args.verify:
            return _verify(args.verify)
        return _backup(args)
    except _Failed as e:
        return fail(str(e), e.code)
    except KeyboardInterrupt:
        return 130


# ---------------------------------------------------------------- --verify


def _file_pieces(path: str) -> Iterator[bytes]:
    try:
        with open(path, "rb") as f:
            while piece := f.read(READ_BYTES):
                yield piece
    except OSError as e:
        raise _Failed(f"{path}: cannot read it ({e.strerror})", EXIT_BAD_INPUT) from None


def _verify(path: str) -> int:
    try:
        summary, _ = load_backup(_file_pieces(path))
    except BackupError as e:
        raise _Failed(f"{path}: {e}") from None
    print(f"{path}: a good metaquorum backup")
    for line in describe(summary):
        print(f"  {line}")
    return 0


# ---------------------------------------------------------------- download


def _backup(args: argparse.Namespace) -> int:
    from brokers.tls import ClientTlsError, client_context

    if args.keep is not None and (args.out_dir is None or args.keep < 1):
        raise _Failed("--keep N needs --out-dir and N of 1 or more", EXIT_BAD_INPUT)
    if args.out_dir is not None:
        directory = os.path.abspath(args.out_dir)
        if not os.path.isdir(directory):
            raise _Failed(f"--out-dir {args.out_dir}: no such directory", EXIT_BAD_INPUT)
        # Named once the header says the cluster and offset (_named).
        out = os.path.join(directory, f".metaquorum-backup-{os.getpid()}-{time.time_ns()}")
    else:
        out = os.path.abspath(args.out)
        directory = os.path.dirname(out)
    if not os.path.isdir(directory):
        raise _Failed(f"--out {args.out}: no directory {directory}", EXIT_BAD_INPUT)
    if args.out and os.path.exists(out) and not args.force:
        raise _Failed(
            f"--out {args.out} exists; choose another name, or --force to replace it",
            EXIT_BAD_INPUT,
        )
    token = _token(args)
    try:
        verify = client_context(args.cacert, args.cert, args.key) or True
    except ClientTlsError as e:
        raise _Failed(str(e), EXIT_BAD_INPUT) from None
    part = out + ".part"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    urls = [u.strip().rstrip("/") for u in args.url.split(",") if u.strip()]
    with httpx.Client(timeout=httpx.Timeout(60.0), headers=headers, verify=verify) as client:
        try:
            url, summary = _download(client, urls, part, args.quiet)
            if args.out_dir is not None:
                out = _named(directory, summary)
            _publish(part, out)
        except BaseException:
            _remove(part)
            raise
    h = summary.header
    print(
        f"backup of cluster {h['clusterId']} as of offset {h['lastOffset']} (next offset "
        f"{h['nextOffset']}), from node {h['sourceNodeId']} at {url}"
    )
    print(f"wrote {args.out or out}: {summary.file_bytes:,} bytes")
    print(f"image SHA-256 {summary.image_sha256} (the image digest voters report at that offset)")
    if args.keep is not None:
        for old in _beyond_newest(directory, h["clusterId"], args.keep):
            _remove(old)
            print(f"deleted {old} (--keep {args.keep})")
    return 0


BACKUP_NAME = "metaquorum-{cluster}-{offset:012d}-{stamp}.backup"
_TAIL = re.compile(r"\d{12}-\d{8}T\d{6}Z(-\d{9})?\.backup")  # after the cluster id


def _named(directory: str, summary: BackupSummary) -> str:
    """DIR/metaquorum-<cluster id>-<next offset>-<UTC time>.backup: sorted by
    name is sorted by offset within a cluster, and a second backup at the same
    offset (an idle cluster) gets its own time."""
    h = summary.header
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = BACKUP_NAME.format(cluster=h["clusterId"], offset=h["nextOffset"], stamp=stamp)
    out = os.path.join(directory, name)
    if os.path.exists(out):  # two in one second
        out = out.replace(".backup", f"-{time.time_ns() % 10**9:09d}.backup")
    return out


def _beyond_newest(directory: str, cluster_id: str, keep: int) -> list[str]:
    """This cluster's backups in ``directory`` but the newest ``keep``, by
    offset then time (the names sort so)."""
    prefix = f"metaquorum-{cluster_id}-"
    mine = sorted(
        name
        for name in os.listdir(directory)
        if name.startswith(prefix) and _TAIL.fullmatch(name[len(prefix) :])
    )
    return [os.path.join(directory, name) for name in mine[: max(len(mine) - keep, 0)]]


def _token(args: argparse.Namespace) -> str | None:
    if not args.token_file:
        return args.token
    from .ops import _read_token

    try:
        return _read_token(args.token_file)
    except ValueError as e:
        raise _Failed(str(e), EXIT_BAD_INPUT) from None


def _download(
    client: httpx.Client, urls: list[str], part: str, quiet: bool
) -> tuple[str, BackupSummary]:
    """The first voter that answers, streamed to ``part`` and checked."""
    from brokers.tls import explain

    problems = []
    for url in urls:
        try:
            with client.stream("GET", f"{url}/v1/backup") as r:
                if r.status_code != 200:
                    r.read()
                    raise _Failed(f"GET {url}/v1/backup answered {r.status_code}: {_message(r)}")
                return url, _write(r, part, url, quiet)
        except httpx.HTTPError as e:
            tls_problem = explain(e, url)
            if tls_problem is not None:
                raise _Failed(tls_problem, EXIT_NO_ANSWER) from None
            if isinstance(e, httpx.ConnectError):
                problems.append(f"{url}: {e}")
                continue
            raise _Failed(f"the download from {url} broke off: {e}; nothing was written") from None
    raise _Failed(
        f"no voter answered ({'; '.join(problems)}); is the cluster up? (--url)", EXIT_NO_ANSWER
    )


def _message(r: httpx.Response) -> str:
    try:
        body = r.json()
        return f"{body.get('errorName')}: {body.get('errorMessage')}"
    except ValueError:
        return r.text[:200]


def _write(r: httpx.Response, part: str, url: str, quiet: bool) -> BackupSummary:
    check = BackupCheck()
    progress = _Progress(quiet, r.headers.get("X-Next-Offset"))
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in r.iter_bytes(READ_BYTES):
                try:
                    check.feed(piece)
                except BackupError as e:
                    raise _Failed(f"{url} sent something else than a backup: {e}") from None
                f.write(piece)
                progress.update(check.received)
            progress.done(check.received)
            try:
                summary = check.finish()
            except BackupError as e:
                raise _Failed(
                    f"the backup from {url} is not whole: {e}; nothing was written"
                ) from None
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise _Failed(f"cannot write {part}: {e.strerror}", EXIT_BAD_INPUT) from None
    return summary


def _publish(part: str, out: str) -> None:
    os.replace(part, out)
    fd = os.open(os.path.dirname(out), os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a crash
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _Progress:
    """Bytes so far and the rate, on stderr: redrawn in place on a terminal,
    a line every PROGRESS_EVERY_S otherwise (a CronJob's log)."""

    def __init__(self, quiet: bool, next_offset: str | None) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.start = self.last = time.monotonic()
        self.what = f"backup (next offset {next_offset})" if next_offset else "backup"

    def _line(self, received: int, now: float) -> str:
        rate = received / max(now - self.start, 1e-6)
        return f"{self.what}: {received / 2**20:,.1f} MiB, {rate / 2**20:,.1f} MiB/s"

    def update(self, received: int) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last < (0.2 if self.tty else PROGRESS_EVERY_S):
            return
        self.last = now
        line = self._line(received, now)
        print(f"\r{line}" if self.tty else line, end="" if self.tty else "\n", file=sys.stderr)

    def done(self, received: int) -> None:
        if self.quiet or self.last == self.start:  # nothing shown: small and quick
            return
        line = self._line(received, time.monotonic())
        print(f"\r{line}" if self.tty else line, file=sys.stderr)
