"""``metaquorum``: the operator's command line.

Every command is an entry of a table: this module's own (``COMMANDS``: demo,
serve, dev, sim, broker, backup, restore, recover, hash-token), the operator commands'
(ops.OPS) and the pipeline's (pipeline_cli.PIPELINE_COMMANDS); ``completion``
prints the whole parser's. A command's parser imports only what its flags need, so that
``metaquorum status`` starts without the server's or the simulator's imports.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

from . import __version__


@dataclass(frozen=True)
class Command:
    """A command of this module's table: its help, how its flags are added and
    how it runs (each imports its module only when called, see ``_parser``)."""

    help: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


def _later(module: str, function: str) -> Callable:
    """``module.function``, imported when it is called, not before."""

    def call(*args):
        return getattr(importlib.import_module(module, __package__), function)(*args)

    return call


def _demo_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print only the log, as NDJSON")


def _run_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(as_json=args.json)


def _run_serve(args: argparse.Namespace) -> int:
    # No collections while it imports FastAPI, pydantic and the rest:
    # its classes make no garbage, and each collection walked them all
    # (about 0.1 s of a start's CPU); tune_runtime turns it back on.
    gc.disable()
    from .serve import run_serve

    return run_serve(args)


# The commands this module defines, in the order --help lists them; the
# operator commands are ops.py's table (OPS), the pipeline's pipeline_cli.py's,
# and ``completion`` needs the whole parser.
COMMANDS: dict[str, Command] = {
    "demo": Command(
        "watch the controller decide a small cluster's life, record by record",
        _demo_flags,
        _run_demo,
        "Runs the pure controller over an in-memory log: registration, unfencing, "
        "a topic, a KIP-903 rejection and a KIP-841 controlled shutdown.",
    ),
    "serve": Command(
        "run one voter: the Raft quorum and the HTTP API",
        _later(".serve", "add_serve_flags"),
        _run_serve,
        "Runs one voter. Every flag is also an environment variable "
        "(--node-id = METAQUORUM_NODE_ID). Exit codes: 0 clean stop, 2 bad "
        "configuration, 3 refused to serve (corrupt data).",
    ),
    "dev": Command(
        "a local cluster on 127.0.0.1 (1 voter, or --nodes 3), with curl recipes",
        _later(".dev", "add_dev_flags"),
        _later(".dev", "run_dev"),
    ),
    "sim": Command(
        "many simulated brokers against a running cluster, with chaos and a live dashboard",
        _later(".sim", "add_sim_flags"),
        _later(".sim", "run_sim"),
        "Runs N broker agents (register, heartbeat, follow the log, lead "
        "partitions and ask for ISR changes) in one process, with chaos drawn from "
        "--seed, then checks the log's invariants. Exit codes: 0 no violation, 1 a "
        "violation or no recovery, 2 bad flags or no cluster.",
    ),
    "broker": Command(
        "one simulated broker agent; SIGTERM makes it shut down cleanly (KIP-841)",
        _later(".sim", "add_broker_flags"),
        _later(".sim", "run_broker"),
        "Registers, heartbeats, follows the metadata log and leads its "
        "partitions until SIGTERM or Ctrl-C, then asks for a controlled shutdown and "
        "waits for it. Exit codes: 0 clean stop, 1 the controlled shutdown timed out, "
        "2 no cluster.",
    ),
    "backup": Command(
        "a consistent copy of the committed metadata, streamed from any voter to a file",
        _later(".backup", "add_backup_flags"),
        _later(".backup", "run_backup"),
        "Writes the image as of one committed offset (after a read barrier, with the "
        "cluster id, voter set and features) from any voter's GET /v1/backup to FILE.part, "
        "checks its digests, fsyncs and renames it to FILE; --verify FILE checks a backup "
        "whole. Needs an admin token: the file holds sensitive config values. Exit codes: "
        "0 done; 1 refused, broken off or a damaged file; 2 a bad flag or file, or no voter "
        "answered.",
    ),
    "restore": Command(
        "a voter's data dir written from a backup file, to start a new cluster from it",
        _later(".restore", "add_restore_flags"),
        _later(".restore", "run_restore"),
        "Checks the backup whole (as backup --verify), then writes --data-dir (empty or "
        "new) so that serve starts voter --node-id of a cluster of --voters holding exactly "
        "the backup's image, under a new cluster id (--cluster-id, required for more than "
        "one voter) or the backup's (--keep-cluster-id). Restore every voter from the same "
        "file. Exit codes: 0 written; 1 a damaged file or a newer metadata.version; 2 a bad "
        "flag, an unreadable file or a data dir that is not empty. Nothing is written on a "
        "refusal.",
    ),
    "hash-token": Command(
        "a tokens-file line with a token's salted hash (scrypt) instead of the token",
        _later(".hash_token", "add_hash_token_flags"),
        _later(".hash_token", "run_hash_token"),
        "Prints a tokens-file line that holds the salted scrypt hash of a "
        "token of the form ID.SECRET: a new one (shown once on stderr), or "
        "--token-file's. Exit code 2 on a bad flag or token.",
    ),
    "recover": Command(
        "after a lost majority: make a surviving voter's data dir a one-voter cluster",
        _later(".recover", "add_recover_flags"),
        _later(".recover", "run_recover"),
        "Unsafe by nature (docs/durability.md, Recovering from a lost majority): "
        "keeps what the stopped survivor committed, drops its entries past the "
        "commit index, moves its old files to DIR/pre-recover-<UTC>/ and writes a "
        "data dir from which serve starts it as the only voter; then add voters "
        "with add-voter. Asks for the cluster id unless --yes. Exit codes: 0 "
        "recovered (or a recovery cut short finished), 1 not confirmed (nothing "
        "changed), 2 a bad flag or data dir (missing, empty, in use, unreadable) "
        "or no terminal and no --yes, 3 cut short by an error (named): run it "
        "again to finish.",
    ),
}
LOCAL_COMMANDS = tuple(COMMANDS)


def _command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names, if it names one this parser can build on its
    own (see ``_parser``); None for the whole parser."""
    if not argv or argv[0].startswith("-"):
        return None
    command = argv[0]
    if command in COMMANDS:
        return command
    from .ops import OPS

    if command in OPS:
        return command
    from .pipeline_cli import PIPELINE_COMMANDS

    return command if command in PIPELINE_COMMANDS else None


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``command``, one that knows only that command:
    each command's flags import its module (the simulator's alone is a
    quarter of a second), and ``metaquorum status`` should not wait for them.
    Both parse the command's arguments alike (tests/test_cli.py)."""
    parser = argparse.ArgumentParser(
        prog="metaquorum",
        description="A Raft-replicated cluster-metadata service in the style of Kafka's KRaft controller.",
    )
    parser.add_argument("--version", action="version", version=f"metaquorum {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, local in COMMANDS.items():
        if command is None or command == name:
            local.add_flags(
                commands.add_parser(name, help=local.help, description=local.description)
            )
    if command is None or command not in COMMANDS:
        from .ops import OPS, add_ops_commands
        from .pipeline_cli import add_pipeline_commands

        if command is None or command in OPS:
            add_ops_commands(commands)
        if command is None or command not in OPS:
            add_pipeline_commands(commands)
    if command is None:
        from .completion import add_completion_command

        add_completion_command(commands)
    return parser


def _terminate(signum: int, _frame) -> None:
    """SIGTERM's default action (end at once), for a process that is pid 1;
    the exit status a shell reports for a process the signal killed."""
    os._exit(128 + signum)


def stop_on_sigterm_as_pid_1() -> None:
    """In a container the command is pid 1, and the kernel delivers pid 1 only
    the signals it has a handler for: until ``serve`` installs its own (once
    the node has started: imports, journal replay and the wait for the other
    voters come before), a SIGTERM, a pod deleted while it starts, would be
    dropped, and the pod killed only at the end of its grace period. Any
    other process keeps SIGTERM's default action."""
    if os.getpid() == 1:
        signal.signal(signal.SIGTERM, _terminate)


def main(argv: list[str] | None = None) -> int:
    stop_on_sigterm_as_pid_1()
    parser = _parser(_command_of(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    try:
        return _run(parser, args)
    except BrokenPipeError:
        # The reader went away (``metaquorum demo --json | head``): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The command's run, looked up in its table."""
    if args.command in COMMANDS:
        return COMMANDS[args.command].run(args)
    if args.command == "completion":
        from .completion import run_completion

        return run_completion(parser, args.shell)
    from .ops import OPS, run_op

    if args.command in OPS:
        return run_op(args)
    from .pipeline_cli import PIPELINE_COMMANDS, run_pipeline_command

    if args.command in PIPELINE_COMMANDS:
        return run_pipeline_command(args)
    raise AssertionError(args.command)  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
