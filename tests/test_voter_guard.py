"""The voter-identity rules of quorum/voter_guard.py, without sockets."""

from metadata_records.records import Voter
from quorum.voter_guard import Hello, VoterGuard, bootstrap_voters, replacement

ADDRS = {0: "h:1", 1: "h:2", 2: "h:3"}


def guard(node_id=0, directory="d0", formed=False, bootstrap=None, committed=()):
    persisted = []
    g = VoterGuard(
        cluster_id="c",
        node_id=node_id,
        directory_id=directory,
        addresses=ADDRS,
        formed=formed,
        bootstrap=bootstrap,
        committed_voters=lambda: committed,
        persist_formation=persisted.append,
    )
    return g, persisted


def hello(node_id, directory, formed=False, voters=None):
    return Hello("c", node_id, directory, formed, voters or {}).to_message()


def test_an_empty_voter_forms_only_when_every_voter_said_hello_empty():
    g, persisted = guard()
    assert g.on_hello(1, hello(1, "d1"))
    assert not g.formed and not g.admitted and not persisted
    assert g.on_hello(2, hello(2, "d2"))
    assert g.formed and g.admitted
    assert persisted == [{0: "d0", 1: "d1", 2: "d2"}]


def test_an_empty_voter_facing_a_formed_cluster_stays_an_observer():
    g, persisted = guard()
    g.on_hello(1, hello(1, "d1", formed=True, voters={0: "old", 1: "d1", 2: "d2"}))
    g.on_hello(2, hello(2, "d2"))
    assert not g.formed and not g.admitted and g.role() == "observer" and not persisted


def test_a_voter_named_by_a_formed_peer_joins_the_formation():
    g, persisted = guard()
    g.on_hello(1, hello(1, "d1", formed=True, voters={0: "d0", 1: "d1", 2: "d2"}))
    assert g.formed and persisted == [{0: "d0", 1: "d1", 2: "d2"}]


def test_an_observer_is_admitted_when_a_committed_voter_set_names_it():
    committed = []
    g = VoterGuard(
        cluster_id="c",
        node_id=0,
        directory_id="new",
        addresses=ADDRS,
        formed=False,
        bootstrap=None,
        committed_voters=lambda: tuple(committed),
        persist_formation=lambda v: None,
    )
    g.on_applied()
    assert not g.admitted
    committed.extend([Voter(0, "new", "h", 1), Voter(1, "d1", "h", 2), Voter(2, "d2", "h", 3)])
    g.on_applied()
    assert g.admitted


def test_votes_and_acknowledgements_count_only_from_the_named_directory():
    g, _ = guard(formed=True, bootstrap={0: "d0", 1: "d1", 2: "d2"})
    g.on_hello(1, hello(1, "d1", formed=True))
    g.on_hello(2, hello(2, "wiped"))
    vote = {"type": "request_vote", "term": 3}
    assert g.filter(1, vote) is vote
    assert g.filter(2, vote) is None
    assert g.filter(2, {"type": "response_vote", "term": 3}) is None
    ack = {"type": "next_node_idx", "next_node_idx": 9, "reset": False, "success": True}
    assert g.filter(1, ack) is ack
    assert g.filter(2, ack) is None and g.progress[2] == 8  # tracked, not counted
    reset = {**ack, "reset": True}
    assert g.filter(2, reset) == {**reset, "success": False}  # next index moves, match not
    append = {"type": "append_entries", "term": 3}
    assert g.filter(2, append) is append


def test_a_voter_that_is_not_admitted_answers_no_vote():
    g, _ = guard(formed=False)
    g.on_hello(1, hello(1, "d1", formed=True, voters={0: "gone", 1: "d1", 2: "d2"}))
    assert g.filter(1, {"type": "request_vote", "term": 9}) is None
    assert g.filter(1, {"type": "timeout_now", "term": 9}) is None


def test_a_peer_of_another_cluster_or_node_is_refused():
    g, _ = guard(formed=True, bootstrap={0: "d0", 1: "d1", 2: "d2"})
    assert not g.on_hello(1, {**hello(1, "d1"), "clusterId": "other"})
    assert not g.on_hello(1, hello(2, "d1"))
    assert not g.on_hello(1, {"type": "metaquorum_hello"})
    assert 1 not in g.peers


def test_legacy_voters_accept_any_formed_peer_until_the_set_is_written():
    g, _ = guard(formed=True, bootstrap=None)
    assert g.admitted
    g.on_hello(1, hello(1, "d1", formed=True))
    g.on_hello(2, hello(2, "fresh"))
    assert g.counts(1) and not g.counts(2)
    assert bootstrap_voters(g) is None  # voter 2's directory is not known yet
    g.on_hello(2, hello(2, "d2", formed=True))
    assert bootstrap_voters(g) == (
        Voter(0, "d0", "h", 1),
        Voter(1, "d1", "h", 2),
        Voter(2, "d2", "h", 3),
    )


def test_a_replaced_disk_is_named_only_once_it_caught_up():
    voters = (Voter(0, "d0", "h", 1), Voter(1, "d1", "h", 2), Voter(2, "d2", "h", 3))
    g, _ = guard(formed=True, committed=voters)
    g.on_hello(1, hello(1, "d1", formed=True))
    g.on_hello(2, hello(2, "new"))
    g.filter(2, {"type": "next_node_idx", "next_node_idx": 50, "reset": False, "success": True})
    assert replacement(voters, g, caught_up_index=60) is None
    g.filter(2, {"type": "next_node_idx", "next_node_idx": 61, "reset": False, "success": True})
    assert replacement(voters, g, caught_up_index=60) == (
        voters[0],
        voters[1],
        Voter(2, "new", "h", 3),
    )


def test_a_node_hears_of_the_voters_its_formed_peers_hold_rule_7():
    """A replaced voter's empty disk knows only --voters: the hellos of formed
    peers name the voters added since (its leader may be one of them)."""
    g, _ = guard(directory="new")
    book = {0: "h:1", 1: "h:2", 2: "h:3", 3: "h:4", 4: "h:5"}
    g.on_hello(2, Hello("c", 2, "d2", False, {}, "h:3", {7: "h:8"}).to_message())
    assert g.heard_of == {}  # an empty peer's book is only its --voters
    voters = {0: "d0", 1: "d1", 2: "d2", 3: "d3", 4: "d4"}
    g.on_hello(1, Hello("c", 1, "d1", True, voters, "h:2", book).to_message())
    assert g.heard_of == {1: "h:2", 2: "h:3", 3: "h:4", 4: "h:5"}  # never itself
    before = g.heard_of
    g.on_hello(1, Hello("c", 1, "d1", True, voters, "h:2", {3: "h:4"}).to_message())
    assert g.heard_of is before  # it only grows


def test_a_hello_names_the_raft_addresses_of_the_set_it_holds():
    g, _ = guard(formed=True, committed=(Voter(0, "d0", "h", 1), Voter(1, "d1", "h", 2)))
    assert g.hello().book == {0: "h:1", 1: "h:2"}
    again = Hello.from_message(g.hello().to_message())
    assert again == g.hello()
    old = {k: v for k, v in g.hello().to_message().items() if k != "book"}
    assert Hello.from_message(old).book == {}  # from a voter that predates it
