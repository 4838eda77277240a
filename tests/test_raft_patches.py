"""quorum/raft/patches.py: every target exists in the pinned pysyncobj, install()
puts the table's wrappers in place in the table's order, and a second call
changes nothing."""

import importlib.metadata
import re
import tomllib
from pathlib import Path

from quorum.raft import patches
from quorum.raft.patches import PATCHES

ROOT = Path(__file__).resolve().parent.parent


def _pinned() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = [d for d in project["dependencies"] if re.match(r"pysyncobj\b", d)]
    assert len(pins) == 1, pins
    return pins[0].partition("==")[2]


def _chains() -> dict[str, list[int]]:
    """Target -> the indexes in PATCHES of its entries, in the table's order."""
    chains: dict[str, list[int]] = {}
    for i, patch in enumerate(PATCHES):
        chains.setdefault(patch.target, []).append(i)
    return chains


def test_the_installed_pysyncobj_is_the_pinned_one():
    assert _pinned() == patches.PYSYNCOBJ_VERSION == "0.3.17"
    assert importlib.metadata.version("pysyncobj") == patches.PYSYNCOBJ_VERSION


def test_every_target_exists_in_pysyncobj():
    for patch in PATCHES:
        assert patch.target.startswith("pysyncobj."), patch.target
        owner, attr = patches.resolve(patch.target)
        assert attr in vars(owner), f"{patch.target}: no such attribute in pysyncobj"
        assert patch.why and patch.relies_on, patch.target


def test_install_puts_the_outermost_wrapper_of_each_chain_in_place():
    patches.install()
    installed = patches.installed()
    assert sorted(installed) == list(range(len(PATCHES)))
    chains = _chains()
    assert len(chains["pysyncobj.syncobj.SyncObj._onTick"]) == 4
    assert len(chains["pysyncobj.syncobj.SyncObj._SyncObj__onMessageReceived"]) == 2
    for target, indexes in chains.items():
        assert patches.current(target) is installed[indexes[-1]], target
    # Functions put in place are metaquorum's, not pysyncobj's.
    for i, replacement in installed.items():
        module = getattr(replacement, "__module__", None)
        assert module is None or module.startswith("quorum.raft."), (PATCHES[i].target, module)


def test_a_second_install_changes_nothing():
    patches.install()
    before = {p.target: patches.current(p.target) for p in PATCHES}
    installed = patches.installed()
    patches.install()
    assert {p.target: patches.current(p.target) for p in PATCHES} == before
    assert all(patches.installed()[i] is fn for i, fn in installed.items())


class _Tick:
    """The least of a SyncObj that the _onTick wrappers read: a follower with
    no leader, no peers and no own address, whose tick does nothing."""

    _SyncObj__raftState = 0  # _RAFT_STATE.FOLLOWER
    _SyncObj__selfNode = None
    _SyncObj__raftLeader = None
    _SyncObj__raftCurrentTerm = 1
    _SyncObj__transferInProgress = False
    _SyncObj__otherNodes = ()
    _SyncObj__raftElectionDeadline = float("inf")


def test_chained_wrappers_run_in_the_table_order():
    """Each entry wraps what the earlier ones installed: the entry listed last
    is entered first, and each calls through to the one listed before it,
    down to pysyncobj's own method (here a recorder on a tiny fake)."""
    seen: list[str] = []

    def recording(name, fn):
        def call(*args, **kwargs):
            seen.append(name)
            return fn(*args, **kwargs)

        return call

    target = "pysyncobj.syncobj.SyncObj._onTick"
    chain = [PATCHES[i] for i in _chains()[target]]
    tick = recording("pysyncobj", lambda self, timeToWait=0.0: None)  # noqa: N803
    for patch in chain:
        tick = recording(patch.name, patch.wrap(tick))
    tick(_Tick(), 0.0)
    assert seen == [p.name for p in reversed(chain)] + ["pysyncobj"]
    assert seen == [
        "leader_liveness.tick_on_time",
        "leader_liveness.check_quorum",
        "leader_liveness.forget_silent_leader",
        "raft_port.listen_before_electing",
        "pysyncobj",
    ]

    seen.clear()
    target = "pysyncobj.syncobj.SyncObj._SyncObj__onMessageReceived"
    chain = [PATCHES[i] for i in _chains()[target]]
    on_message = recording("pysyncobj", lambda self, node, message: None)
    for patch in chain:
        on_message = recording(patch.name, patch.wrap(on_message))
    on_message(_Tick(), None, {"type": "ping"})
    assert seen == [
        "divergence.fail_stop_on_divergence",
        "raft_port.keep_next_index_forward",
        "pysyncobj",
    ]


def test_the_installed_chains_end_in_pysyncobj_own_methods():
    """The chain installed on the real SyncObj ends in pysyncobj's method: each
    wrapper's closure holds the replacement installed before it."""
    patches.install()
    installed = patches.installed()
    for target, indexes in _chains().items():
        if len(indexes) < 2:
            continue
        for outer, inner in zip(indexes[1:], indexes[:-1], strict=True):
            cells = [c.cell_contents for c in installed[outer].__closure__ or ()]
            assert installed[inner] in cells, (target, PATCHES[outer].name)
        cells = [c.cell_contents for c in installed[indexes[0]].__closure__ or ()]
        assert any(getattr(c, "__module__", "") == "pysyncobj.syncobj" for c in cells), target
