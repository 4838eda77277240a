"""The list of speed switches (metaquorum/speed_switches.py) is whole and true:
each listed switch exists and is a bool, each listed agreement test is
defined, and every module-level switch in the product packages is listed."""

import ast
import functools
import importlib
from pathlib import Path

import pytest

from metaquorum.speed_switches import SWITCHES

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "metadata_records",
    "controller",
    "quorum",
    "api",
    "voter",
    "metaquorum",
    "brokers",
    "pipeline",
)


def module_level_bools(tree: ast.Module) -> list[str]:
    """Upper-case names a module binds to a bool literal at its top level
    (the convention of speed_switches' docstring)."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not (isinstance(value, ast.Constant) and type(value.value) is bool):
            continue
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


@functools.cache
def found_switches() -> frozenset[tuple[str, str]]:
    found = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            tree = ast.parse(path.read_text(), str(path))
            found |= {(module, name) for name in module_level_bools(tree)}
    return frozenset(found)


def test_every_module_level_switch_is_listed():
    listed = {(s.module, s.attribute) for s in SWITCHES}
    unlisted = found_switches() - listed
    assert not unlisted, f"speed switches missing from metaquorum/speed_switches.py: {unlisted}"


def test_the_scan_finds_every_listed_switch():
    listed = {(s.module, s.attribute) for s in SWITCHES}
    assert listed <= found_switches()
    assert len(listed) == len(SWITCHES)


def test_the_scan_reads_plain_and_annotated_bools_only():
    tree = ast.parse(
        "A = True\nB: bool = False\nc = True\nD = 1\nE = F = False\nif 1:\n    G = True\n"
    )
    assert module_level_bools(tree) == ["A", "B", "E", "F"]


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: f"{s.module}.{s.attribute}")
def test_each_listed_switch_is_a_bool_that_is_on(switch):
    value = getattr(importlib.import_module(switch.module), switch.attribute)
    assert value is True


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda s: f"{s.module}.{s.attribute}")
def test_each_listed_agreement_test_is_defined(switch):
    assert switch.speeds_up and switch.plain_twin and switch.agreement_tests
    for test in switch.agreement_tests:
        path, name = test.split("::")
        tree = ast.parse((ROOT / path).read_text())
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        assert name in defined, f"{test}: no such test function"
