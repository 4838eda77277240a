"""What an operator command is: an entry of the command table (metaquorum/ops.py),
the exit codes it ends with, and the one line on stderr that a failure is.

The exit code says which kind of failure it was, so that a script can tell a
refusal (do not retry) from no answer (retry elsewhere) from a lost answer
(read before retrying); docs/cli.md lists them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Console

from brokers.client import MetaquorumClient
from brokers.tls import ClientTls

# Exit codes of the operator commands (docs/cli.md); 2 is also argparse's own.
EXIT_REFUSED = 1  # the cluster answered with an error (named on stderr)
EXIT_BAD_INPUT = 2  # a bad flag or file: fix the command line
EXIT_NO_ANSWER = 2  # no voter answered (down, unreachable, no leader, TLS refused)
EXIT_UNKNOWN_OUTCOME = 3  # a write was sent but its answer lost: read to see if it applied
EXIT_INTERRUPTED = 130
READ_EXITS = (
    "Exit codes: 0 done; 1 the cluster answered with an error (named on stderr); "
    "2 a bad flag or file, or no voter answered (down, unreachable, no leader, TLS refused)."
)
WRITE_EXITS = (
    READ_EXITS.removesuffix(".") + "; 3 the write was sent but its answer was lost: it may "
    "have applied (read before retrying)."
)


def fail(line: str, code: int = EXIT_REFUSED) -> int:
    """The failure's one line on stderr; its exit code."""
    print(f"metaquorum: {line}", file=sys.stderr)
    return code


def default_http_timeout_s(args: argparse.Namespace) -> float:
    """Most calls are answered at once (add-voter's waits for the node to catch up)."""
    return 10.0


@dataclass(frozen=True)
class OpCommand:
    """One operator command, read in one place: its help, how its own flags are
    added (after the connection flags and ``--json`` that every command takes),
    and the call that does it: it reads or writes through the client, renders
    the answer (metaquorum/ops_render.py) and returns the exit code."""

    help: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[MetaquorumClient, argparse.Namespace, Console, ClientTls | None], Awaitable[int]]
    exits: str = READ_EXITS
    # How long one HTTP call of the command may take.
    http_timeout_s: Callable[[argparse.Namespace], float] = default_http_timeout_s
