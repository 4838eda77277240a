"""``metaquorum``: the operator's command line."""

from __future__ import annotations

import argparse
import os
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metaquorum",
        description="A Raft-replicated cluster-metadata service in the style of Kafka's KRaft controller.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="watch the controller decide a small cluster's life, record by record",
        description="Runs the pure controller over an in-memory log: registration, unfencing, "
        "a topic, a KIP-903 rejection and a KIP-841 controlled shutdown.",
    )
    demo.add_argument("--json", action="store_true", help="print only the log, as NDJSON")

    from .dev import add_dev_flags
    from .serve import add_serve_flags

    serve = commands.add_parser(
        "serve",
        help="run one voter: the Raft quorum and the HTTP API",
        description="Runs one voter. Every flag is also an environment variable "
        "(--node-id = METAQUORUM_NODE_ID). Exit codes: 0 clean stop, 2 bad configuration, "
        "3 refused to serve (corrupt data).",
    )
    add_serve_flags(serve)
    dev = commands.add_parser(
        "dev",
        help="a local cluster on 127.0.0.1 (1 voter, or --nodes 3), with curl recipes",
    )
    add_dev_flags(dev)

    from .ops import add_ops_commands

    add_ops_commands(commands)
    from .pipeline_cli import add_pipeline_commands

    add_pipeline_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(as_json=args.json)
        if args.command == "serve":
            from .serve import run_serve

            return run_serve(args)
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
