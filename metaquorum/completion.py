"""``metaquorum completion bash|zsh``: a completion script made from the
argparse parser itself (shtab), so it offers exactly the subcommands, flags
and choices of this version and never drifts from them."""

from __future__ import annotations

import argparse
import sys

SHELLS = ("bash", "zsh")
# Flags that take a path: the shell completes file or directory names there.
_DIRECTORY_FLAGS = {"--data-dir", "--out", "--input", "--output"}
_FILE_FLAGS = {"--cacert", "--cert", "--key", "--report"}


def add_completion_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "completion",
        help="print a bash or zsh completion script for metaquorum",
        description="Prints a completion script for SHELL on stdout, made from this version's "
        "own flags. bash: metaquorum completion bash > ~/.local/share/bash-completion/"
        "completions/metaquorum (or source <(metaquorum completion bash) in ~/.bashrc). "
        "zsh: metaquorum completion zsh > a directory of your $fpath as _metaquorum, then "
        "compinit. Exit codes: 0 printed, 2 an unknown shell.",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab  # noqa: PLC0415 - only this command needs it

    for action in _actions(parser):
        flags = set(action.option_strings)
        if flags & _DIRECTORY_FLAGS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif flags & _FILE_FLAGS or any(f.endswith("-file") for f in flags):
            action.complete = shtab.FILE  # type: ignore[attr-defined]
    return shtab.complete(parser, shell=shell)


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)


def run_completion(parser: argparse.ArgumentParser, shell: str) -> int:
    sys.stdout.write(completion_script(parser, shell))
    return 0
