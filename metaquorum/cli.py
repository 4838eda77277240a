"""``metaquorum``: the operator's command line."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys

from . import __version__

# The commands this module defines; the others are ops' and the pipeline's.
LOCAL_COMMANDS = ("demo", "serve", "dev", "sim", "broker", "hash-token")


def _command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names, if it names one this parser can build on its
    own (see ``_parser``); None for the whole parser."""
    if not argv or argv[0].startswith("-"):
        return None
    command = argv[0]
    if command in LOCAL_COMMANDS:
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

    def wanted(name: str) -> bool:
        return command is None or command == name

    if wanted("demo"):
        _add_demo(commands)
    if wanted("serve"):
        from .serve import add_serve_flags

        add_serve_flags(
            commands.add_parser(
                "serve",
                help="run one voter: the Raft quorum and the HTTP API",
                description="Runs one voter. Every flag is also an environment variable "
                "(--node-id = METAQUORUM_NODE_ID). Exit codes: 0 clean stop, 2 bad "
                "configuration, 3 refused to serve (corrupt data).",
            )
        )
    if wanted("dev"):
        from .dev import add_dev_flags

        add_dev_flags(
            commands.add_parser(
                "dev",
                help="a local cluster on 127.0.0.1 (1 voter, or --nodes 3), with curl recipes",
            )
        )
    if wanted("sim"):
        from .sim import add_sim_flags

        add_sim_flags(
            commands.add_parser(
                "sim",
                help="many simulated brokers against a running cluster, with chaos and a live "
                "dashboard",
                description="Runs N broker agents (register, heartbeat, follow the log, lead "
                "partitions and ask for ISR changes) in one process, with chaos drawn from "
                "--seed, then checks the log's invariants. Exit codes: 0 no violation, 1 a "
                "violation or no recovery, 2 bad flags or no cluster.",
            )
        )
    if wanted("broker"):
        from .sim import add_broker_flags

        add_broker_flags(
            commands.add_parser(
                "broker",
                help="one simulated broker agent; SIGTERM makes it shut down cleanly (KIP-841)",
                description="Registers, heartbeats, follows the metadata log and leads its "
                "partitions until SIGTERM or Ctrl-C, then asks for a controlled shutdown and "
                "waits for it. Exit codes: 0 clean stop, 1 the controlled shutdown timed out, "
                "2 no cluster.",
            )
        )
    if wanted("hash-token"):
        from .hash_token import add_hash_token_flags

        add_hash_token_flags(
            commands.add_parser(
                "hash-token",
                help="a tokens-file line with a token's salted hash (scrypt) instead of the token",
                description="Prints a tokens-file line that holds the salted scrypt hash of a "
                "token of the form ID.SECRET: a new one (shown once on stderr), or "
                "--token-file's. Exit code 2 on a bad flag or token.",
            )
        )
    if command is None or command not in LOCAL_COMMANDS:
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


def _add_demo(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="watch the controller decide a small cluster's life, record by record",
        description="Runs the pure controller over an in-memory log: registration, unfencing, "
        "a topic, a KIP-903 rejection and a KIP-841 controlled shutdown.",
    )
    demo.add_argument("--json", action="store_true", help="print only the log, as NDJSON")


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
        if args.command == "completion":
            from .completion import run_completion

            return run_completion(parser, args.shell)
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(as_json=args.json)
        if args.command == "serve":
            # No collections while it imports FastAPI, pydantic and the rest:
            # its classes make no garbage, and each collection walked them all
            # (about 0.1 s of a start's CPU); tune_runtime turns it back on.
            gc.disable()
            from .serve import run_serve

            return run_serve(args)
        if args.command == "broker":
            from .sim import run_broker

            return run_broker(args)
        if args.command == "sim":
            from .sim import run_sim

            return run_sim(args)
        if args.command == "hash-token":
            from .hash_token import run_hash_token

            return run_hash_token(args)
        if args.command == "dev":
            from .dev import run_dev

            return run_dev(args)
        from .ops import OPS, run_op

        if args.command in OPS:
            return run_op(args)
        from .pipeline_cli import PIPELINE_COMMANDS, run_pipeline_command

        if args.command in PIPELINE_COMMANDS:
            return run_pipeline_command(args)
    except BrokenPipeError:
        # The reader went away (``metaquorum demo --json | head``): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    raise AssertionError(args.command)  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
