"""When a node believes a peer that says it was removed while it was down
(quorum/voter_set_notice.py), and what the voter guard does then: pure, no sockets."""

import logging

import pytest

from metadata_records.records import Voter
from quorum.voter_guard import VoterGuard
from quorum.voter_set_notice import VoterSetNotice, refusal

THREE = (Voter(0, "d0", "h", 1), Voter(1, "d1", "h", 2), Voter(2, "d2", "h", 3))
HELD = {0: "d0", 1: "d1", 2: "d2"}  # the set node 2 holds: it still names node 2


def notice(**changes) -> VoterSetNotice:
    """Voter 0 has applied offset 100 of a set without node 2."""
    fields = dict(
        cluster_id="c",
        node_id=0,
        directory_id="d0",
        offset=100,
        voters={0: "d0", 1: "d1"},
        book={0: "h:1", 1: "h:2"},
    )
    return VoterSetNotice(**{**fields, **changes})


def why(n: VoterSetNotice, sender: int | None = 0, **mine) -> str | None:
    """Node 2's answer: formed, applied up to 50, holding HELD."""
    state = dict(
        cluster_id="c",
        node_id=2,
        directory_id="d2",
        formed=True,
        voters=HELD,
        applied_offset=50,
    )
    return refusal(n, sender, **{**state, **mine})


def test_a_voter_that_counts_and_applied_past_this_node_is_believed():
    assert why(notice()) is None
    assert why(notice(), voters={**HELD, 0: None}) is None  # a set from before directory ids


@pytest.mark.parametrize(
    ("n", "sender", "mine", "reason"),
    [
        (notice(), 0, {"formed": False}, "not formed (new or wiped)"),
        (notice(), 0, {"voters": {0: "d0", 1: "d1"}}, "already leaves it out"),
        (notice(cluster_id="other"), 0, {}, "of cluster other"),
        (notice(), 1, {}, "its address is node 1's"),
        (notice(), None, {}, "its address is node None's"),
        (notice(directory_id="d0-new"), 0, {}, "its word does not count here"),
        (notice(node_id=5), 5, {}, "its word does not count here"),
        (notice(offset=50), 0, {}, "its voter set is not newer"),  # a stale peer
        (notice(offset=40), 0, {}, "its voter set is not newer"),
        (notice(voters={}), 0, {}, "holds no voter set yet"),
        (notice(voters={0: "d0", 1: "d1", 2: "d2"}), 0, {}, "names node 2"),  # added again
    ],
)
def test_a_notice_is_refused_and_says_why(n, sender, mine, reason):
    assert reason in why(n, sender, **mine)


def test_a_notice_goes_over_the_wire_and_back():
    n = notice()
    assert VoterSetNotice.from_message(n.to_message()) == n
    with pytest.raises(ValueError, match="malformed voter-set notice"):
        VoterSetNotice.from_message({"type": "metaquorum_voter_set", "nodeId": "x"})


def guard(applied: list) -> VoterGuard:
    """Node 2, formed, whose log still names it; ``applied[0]`` is its image."""
    g = VoterGuard(
        cluster_id="c",
        node_id=2,
        directory_id="d2",
        addresses={0: "h:1", 1: "h:2", 2: "h:3"},
        formed=True,
        bootstrap=None,
        committed_voters=lambda: applied[0][1],
        persist_formation=lambda voters: None,
        applied=lambda: applied[0],
    )
    return g


def test_a_voter_removed_while_down_says_so_once_and_never_votes(caplog):
    applied = [(50, THREE)]
    g = guard(applied)
    assert g.admitted and g.role() == "voter" and g.removed_reason() is None
    with caplog.at_level(logging.WARNING, logger="quorum.voter_guard"):
        g.on_notice(0, notice().to_message())
        g.on_notice(1, notice(node_id=1, directory_id="d1", offset=120).to_message())
    assert not g.admitted and g.role() == "removed"
    assert g.filter(0, {"type": "request_vote"}) is None  # it never votes
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines  # one line per change, not one per notice
    assert "was removed from the voter set, as voter 0 says" in lines[0], lines
    assert "stop it and clear its data dir" in lines[0]
    assert "metaquorum add-voter --node-id 2 --address h:3" in lines[0]
    assert "0@h:1, 1@h:2" in g.removed_reason()
    # Added again: its log, caught up past the notice, names it again.
    applied[0] = (130, THREE)
    assert g.admitted and g.role() == "voter" and g.removed_reason() is None


def test_a_stale_or_foreign_notice_changes_nothing():
    g = guard([(50, THREE)])
    g.on_notice(0, notice(offset=10).to_message())
    g.on_notice(0, notice(cluster_id="other").to_message())
    g.on_notice(0, {"type": "metaquorum_voter_set"})
    assert g.admitted and g.role() == "voter" and g.removal is None


def test_removed_by_its_own_log_says_what_to_do():
    g = guard([(50, THREE[:2])])
    assert g.role() == "removed"
    assert "node 2 is no longer in the voter set (0@h:1, 1@h:2)" in g.removed_reason()
    g.on_notice(0, notice().to_message())  # its own log says so already
    assert g.removal is None
