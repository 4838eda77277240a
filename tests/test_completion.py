"""``metaquorum completion bash|zsh``: the scripts, run in the real shells."""

import os
import shutil
import subprocess
import sys

import pytest

from metaquorum.cli import _parser


def script(shell: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def complete_in_bash(completion: str, *words: str) -> list[str]:
    """What bash offers for ``metaquorum WORDS`` (the last word is being typed)."""
    line = " ".join(("metaquorum", *words))
    driver = (
        'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
        'COMP_LINE="${*}"; COMP_POINT=${#COMP_LINE}; '
        "_shtab_metaquorum; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    bash = shutil.which("bash")
    assert bash is not None
    r = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", driver, "bash", completion, "metaquorum", *words],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, (line, r.stderr)
    return [w for w in r.stdout.splitlines() if w]


def subcommands() -> set[str]:
    (commands,) = [a for a in _parser()._actions if a.dest == "command"]
    return set(commands.choices)


def test_bash_offers_the_subcommands_and_the_flags_of_one(tmp_path):
    path = tmp_path / "metaquorum.bash"
    path.write_text(script("bash"))
    assert set(complete_in_bash(str(path), "")) == subcommands()  # never drifts
    assert {"status", "completion"} <= subcommands()
    assert complete_in_bash(str(path), "st") == ["status"]
    flags = set(complete_in_bash(str(path), "status", "--"))
    assert {"--json", "--url", "--token-file", "--human-readable", "--cacert"} <= flags
    assert "--partitions" not in flags  # create-topic's, not status's
    assert complete_in_bash(str(path), "completion", "") == ["bash", "zsh"]
    assert complete_in_bash(str(path), "export", "--format", "") == ["parquet", "jsonl"]
    # A path flag completes file names.
    (tmp_path / "ca-bundle.pem").write_text("")
    offered = complete_in_bash(str(path), "status", "--cacert", str(tmp_path / "ca-"))
    assert offered == [str(tmp_path / "ca-bundle.pem")]


def test_the_zsh_script_parses_and_names_every_subcommand(tmp_path):
    zsh = shutil.which("zsh")
    if zsh is None:
        why = "zsh is not installed (apt-get install zsh): the zsh script is not checked"
        if os.environ.get("METAQUORUM_CI"):
            pytest.fail(why)
        pytest.skip(why)
    path = tmp_path / "_metaquorum"
    text = script("zsh")
    path.write_text(text)
    assert text.startswith("#compdef metaquorum")
    r = subprocess.run([zsh, "-n", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for name in subcommands():
        assert f"\n    {name}:'" in text, name  # _shtab_metaquorum_commands


def test_an_unknown_shell_is_refused_with_the_choices():
    r = subprocess.run(
        [sys.executable, "-m", "metaquorum.cli", "completion", "fish"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "invalid choice: 'fish'" in r.stderr
    assert "'bash', 'zsh'" in r.stderr
