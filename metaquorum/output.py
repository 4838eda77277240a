"""How the operator commands print: rich for a person at a terminal, plain
text for everything else.

Plain (stdout not a terminal, ``NO_COLOR`` set to anything non-empty as
no-color.org says, or ``TERM=dumb``): no ANSI escapes, no box drawing and no
wrapping at 80 columns, so a log collector, ``grep`` or ``awk`` sees each row
on one line with its columns aligned by spaces, as Kafka's tools print them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table


def plain() -> bool:
    return (
        bool(os.environ.get("NO_COLOR"))
        or os.environ.get("TERM") == "dumb"
        or not sys.stdout.isatty()
    )


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich exits with 1 here; cli.main treats a reader that went away
        # (``metaquorum status | head -1``) as no error.
        raise BrokenPipeError


def make_console() -> Console:
    if plain():
        # color_system=None: rich renders styles (bold, dim) as plain text.
        return _Console(color_system=None, highlight=False, emoji=False, soft_wrap=True)
    return _Console()


def print_table(
    console: Console, title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> None:
    """One table: rich's for a terminal; for plain output the title on a line
    of its own, then columns padded to their widest cell, two spaces apart,
    without trailing spaces."""
    if not plain():
        table = Table(title=title)
        for header in headers:
            table.add_column(header)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]
    lines = [title] if title else []
    for row in (headers, *rows):
        cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")
