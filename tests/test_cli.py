import argparse
import subprocess
import sys

import orjson

from metadata_records.codec import record_from_obj
from metaquorum.cli import LOCAL_COMMANDS, _command_of, _parser, main


def test_demo_prints_a_dense_log_of_a_controlled_shutdown(capsys):
    assert main(["demo", "--json"]) == 0
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["offset"] for r in lines] == list(range(len(lines)))
    records = [record_from_obj(r) for r in lines]
    types = [r.TYPE for r in records]
    assert types[0] == "LEADER_CHANGE" and types.count("REGISTER_BROKER_RECORD") == 3
    shutdown = next(
        r
        for r in records
        if getattr(r, "in_controlled_shutdown", 0) == 1 and r.TYPE.startswith("BROKER")
    )
    assert shutdown.broker_id == 1
    last = records[-1]
    assert last.TYPE == "BROKER_REGISTRATION_CHANGE_RECORD" and last.fenced == 1


def test_demo_for_people_explains_each_step(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "broker 2 epoch mismatch" in out or "epoch mismatch" in out
    assert "broker 1 is in controlled shutdown" in out
    assert "shouldShutDown=True" in out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    return commands.choices


def _flags(parser: argparse.ArgumentParser) -> list[tuple]:
    return [
        (tuple(a.option_strings), a.dest, a.default, a.nargs, a.choices, a.required, a.help)
        for a in parser._actions
    ]


def test_a_command_alone_parses_exactly_as_in_the_whole_parser():
    """``main`` builds only the named command's parser (each command's flags
    import its module): that parser is the whole parser's, flag for flag."""
    whole = _subcommands(_parser())
    assert set(LOCAL_COMMANDS) < set(whole)
    for name, sub in whole.items():
        command = _command_of([name, "--help"])
        if name == "completion":
            assert command is None  # it prints the whole parser's completions
            continue
        assert command == name
        alone = _subcommands(_parser(command))
        assert _flags(alone[name]) == _flags(sub), name
        assert sub.description == alone[name].description, name
    assert _command_of(["--version"]) is None and _command_of([]) is None
    assert _command_of(["no-such-command"]) is None  # argparse lists every command


def test_status_does_not_import_the_simulator_nor_the_server():
    """``metaquorum status`` starts in about half the time of the whole parser's."""
    code = (
        "import sys; from metaquorum.cli import _parser, _command_of; "
        "_parser(_command_of(['status'])); "
        "print(sorted(m for m in ('metaquorum.sim', 'metaquorum.serve', 'metaquorum.dev', "
        "'brokers.sim', 'metaquorum.synth_log') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
