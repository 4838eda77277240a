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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run_demo

            return run_demo(as_json=args.json)
    except BrokenPipeError:
        # The reader went away (``metaquorum demo --json | head``): not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    raise AssertionError(args.command)  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
