"""The voter-change rules of quorum/membership.py, without sockets."""

import pytest

from controller.rules import RULES
from metadata_records.errors import Errors
from metadata_records.records import Voter
from quorum.membership import (
    addresses,
    already_added,
    check_add,
    check_remove,
    check_update,
    lagging,
    misspelled,
    parse_address,
    updated,
    with_voter,
    without_voter,
)
from quorum.voter_guard import Hello, VoterGuard

THREE = (Voter(0, "d0", "h", 1), Voter(1, "d1", "h", 2), Voter(2, "d2", "h", 3))


def test_adding_a_new_node_at_a_new_address_is_allowed():
    assert check_add(THREE, 3, "h:4", None) is None


def test_adding_waits_for_the_change_in_flight():
    refusal = check_add(THREE, 3, "h:4", "removing node 2 at h:3")
    assert refusal.error is Errors.REQUEST_TIMED_OUT
    assert "another voter change is in flight (removing node 2 at h:3)" in refusal.message


def test_adding_before_the_first_voter_set_is_refused():
    refusal = check_add((), 3, "h:4", None)
    assert refusal.error is Errors.REQUEST_TIMED_OUT and "first voter set" in refusal.message


def test_a_node_id_already_a_voter_is_a_duplicate():
    refusal = check_add(THREE, 1, "h:9", None)
    assert refusal.error is Errors.DUPLICATE_VOTER
    assert refusal.message.startswith("node 1 is already a voter, at h:2 (directory d1)")


def test_an_address_already_a_voters_is_a_duplicate():
    refusal = check_add(THREE, 7, "h:3", None)
    assert refusal.error is Errors.DUPLICATE_VOTER
    assert refusal.message.startswith("address h:3 is already voter 2's")


def test_a_finished_add_is_recognised_by_id_and_address():
    assert already_added(THREE, 2, "h:3") == THREE[2]
    assert already_added(THREE, 2, "h:9") is None
    assert already_added(THREE, 5, "h:3") is None


def test_removing_a_connected_follower_is_allowed():
    assert check_remove(THREE, 2, leader_id=0, connected={1, 2}, change=None) is None


def test_removing_a_node_that_is_not_a_voter():
    refusal = check_remove(THREE, 7, 0, {1, 2}, None)
    assert refusal.error is Errors.VOTER_NOT_FOUND
    assert refusal.message == "node 7 is not a voter (voters: 0@h:1, 1@h:2, 2@h:3)"


def test_the_last_voter_is_never_removed():
    refusal = check_remove(THREE[:1], 0, 0, set(), None)
    assert refusal.error is Errors.INVALID_REQUEST and "is the last voter" in refusal.message


def test_the_leader_moves_leadership_before_it_is_removed():
    refusal = check_remove(THREE, 0, 0, {1, 2}, None)
    assert refusal.error is Errors.INVALID_REQUEST
    assert "node 0 is the active controller: move leadership first" in refusal.message


def test_removing_is_refused_when_the_voters_left_have_no_connected_majority():
    # 1 is down: removing 2 leaves {0, 1} with only the leader connected.
    refusal = check_remove(THREE, 2, 0, {2}, None)
    assert refusal.error is Errors.INVALID_REQUEST
    assert "would leave voters [0, 1] with only [0] connected" in refusal.message
    assert "bring back [1] first" in refusal.message
    # Removing the one that is down is fine: {0, 2} are both there.
    assert check_remove(THREE, 1, 0, {2}, None) is None


def test_removing_waits_for_the_change_in_flight():
    refusal = check_remove(THREE, 2, 0, {1, 2}, "adding node 3 at h:4")
    assert refusal.error is Errors.REQUEST_TIMED_OUT


def test_two_successive_voter_sets_differ_by_one_voter():
    four = with_voter(THREE, Voter(3, "d3", "h", 4))
    assert [v.voter_id for v in four] == [0, 1, 2, 3]
    assert without_voter(four, 3) == THREE
    assert addresses(four) == {0: "h:1", 1: "h:2", 2: "h:3", 3: "h:4"}


def test_a_joiner_that_never_connected_or_lags_is_told_which():
    never = lagging(4, "h:5", hello_seen=False, held=0, target=90)
    assert never.error is Errors.REQUEST_TIMED_OUT
    assert "node 4 at h:5 has not connected to the leader" in never.message
    behind = lagging(4, "h:5", hello_seen=True, held=12, target=90)
    assert "holds the log up to Raft entry 12, the commit index is 90" in behind.message


@pytest.mark.parametrize(
    ("text", "why"),
    [("nohost", "is not HOST:PORT"), (":12", "is not HOST:PORT"), ("h:x", "is not HOST:PORT"),
     ("h:0", "out of range"), ("h:70000", "out of range"), ("a b:1", "is not HOST:PORT")],
)  # fmt: skip
def test_a_bad_address_is_named(text, why):
    with pytest.raises(ValueError, match=why) as info:
        parse_address(text, "address")
    assert str(info.value).startswith("address:")


def joiner_guard(committed=()):
    return VoterGuard(
        cluster_id="c",
        node_id=3,
        directory_id="d3",
        addresses={0: "h:1", 1: "h:2", 2: "h:3"},
        formed=False,
        bootstrap=None,
        committed_voters=lambda: committed,
        persist_formation=lambda v: None,
        joining=True,
    )


def test_a_joiner_never_forms_a_cluster_with_empty_peers():
    g = joiner_guard()
    for nid in (0, 1, 2):
        assert g.on_hello(nid, Hello("c", nid, f"d{nid}", False, {}).to_message())
    assert not g.formed and not g.admitted and g.role() == "observer"


def test_a_joiner_is_admitted_when_a_committed_set_names_it():
    committed = []
    g = joiner_guard()
    g._committed_voters = lambda: tuple(committed)
    committed.extend((*THREE, Voter(3, "d3", "h", 4)))
    g.on_applied()
    assert g.formed and g.admitted and g.role() == "voter"


def test_a_formed_node_the_set_no_longer_names_is_removed():
    g = joiner_guard(committed=THREE)
    g.formed = True
    assert not g.admitted and g.role() == "removed"
    g.on_hello(1, Hello("c", 1, "d1", True, {}).to_message())
    assert g.role(1) == "voter"


def test_the_address_book_follows_the_set():
    g = joiner_guard()
    assert g.node_id_of("h:4") is None
    g.set_book({0: "h:1", 3: "h:4"})
    assert g.node_id_of("h:4") == 3 and g.node_id_of("h:2") is None


def test_an_empty_node_the_voter_set_does_not_name_waits_to_be_added(caplog):
    g = VoterGuard(
        cluster_id="c",
        node_id=2,
        directory_id="new",
        addresses={0: "h:1", 1: "h:2", 2: "h:3"},
        formed=False,
        bootstrap=None,
        committed_voters=lambda: (),
        persist_formation=lambda v: None,
    )
    g.set_book({0: "h:1", 1: "h:2", 2: "h:3"})
    with caplog.at_level("WARNING"):
        g.on_hello(0, Hello("c", 0, "d0", True, {0: "d0", 1: "d1"}).to_message())
        g.on_hello(1, Hello("c", 1, "d1", False, {}).to_message())
    assert not g.formed and g.role() == "observer"
    assert "node 2 is not a voter of cluster c" in caplog.text
    assert "metaquorum add-voter --node-id 2 --address h:3" in caplog.text


def test_a_joiner_spelled_another_way_is_refused():
    assert misspelled(4, "h:5", None) is None and misspelled(4, "h:5", "h:5") is None
    refusal = misspelled(4, "localhost:5", "127.0.0.1:5")
    assert refusal.error is Errors.INVALID_REQUEST
    assert refusal.message.startswith("node 4 calls itself 127.0.0.1:5 (its --raft-address)")


def test_a_hello_carries_the_senders_address_and_reads_without_it():
    hello = Hello("c", 3, "d3", False, {}, "h:4")
    assert Hello.from_message(hello.to_message()) == hello
    old = Hello("c", 3, "d3", False, {}).to_message()
    assert "address" not in old and Hello.from_message(old).address is None


def _config(**kw):
    from quorum.node_config import NodeConfig

    kw.setdefault("raft_secret", "s" * 16)
    return NodeConfig(data_dir="/nonexistent", advertised_url="http://x:1", **kw)


def test_a_node_outside_voters_needs_its_raft_address_and_says_so():
    from quorum.node_config import ConfigError

    with pytest.raises(ConfigError, match=r"--node-id 3 is not among --voters .*--raft-address"):
        _config(node_id=3, voters={0: "h:1"})
    joiner = _config(node_id=3, voters={0: "h:1"}, own_raft_address="h:4")
    assert joiner.joining and joiner.raft_address == "h:4"
    with pytest.raises(ConfigError, match="differs from node 0's entry in --voters"):
        _config(node_id=0, voters={0: "h:1"}, own_raft_address="h:9")
    with pytest.raises(ConfigError, match="is another voter's in --voters"):
        _config(node_id=3, voters={0: "h:1"}, own_raft_address="h:1")


def test_an_observer_has_no_raft_address_and_is_no_voter():
    from quorum.node_config import ConfigError

    observer = _config(node_id=9, voters={0: "h:1"}, observer=True)
    assert observer.raft_address is None and observer.joining
    with pytest.raises(ConfigError, match="--observer: node 0 must not be among --voters"):
        _config(node_id=0, voters={0: "h:1"}, observer=True)
    with pytest.raises(ConfigError, match="nor have --raft-address"):
        _config(node_id=9, voters={0: "h:1"}, own_raft_address="h:4", observer=True)


def _journal_entry(index, records, epoch=1):
    """A pysyncobj journal entry of apply_batch(payload), as the journal holds it."""
    import pickle

    from metadata_records.codec import encode_batch
    from metadata_records.records import Batch

    payload = encode_batch(Batch(epoch, 0, tuple(records)))
    return (b"\x00" + pickle.dumps((0, (payload,)), protocol=2), index, 1)


def test_the_last_voter_set_past_the_commit_index_is_found():
    from metadata_records.records import NoOpRecord, VotersRecord
    from metadata_records.uuids import random_uuid
    from quorum.data_dir_reader import last_voter_set

    three = tuple(v._replace(voter_directory_id=random_uuid()) for v in THREE)
    four = with_voter(three, Voter(3, random_uuid(), "h", 4))
    entries = [
        _journal_entry(5, [VotersRecord(voters=three)]),
        _journal_entry(6, [NoOpRecord()]),
        (b"\x01", 7, 1),  # pysyncobj's own no-op
        _journal_entry(8, [VotersRecord(voters=four), NoOpRecord()]),
        _journal_entry(9, [NoOpRecord()]),
    ]
    assert last_voter_set(entries, after_index=4) == (8, four)
    assert last_voter_set(entries, after_index=5) == (8, four)
    assert last_voter_set(entries, after_index=8) is None  # applied: the image says
    assert last_voter_set([(b"\x00garbage", 10, 1)], after_index=0) is None


def test_the_journal_tail_is_read_backwards_to_the_commit_index(tmp_path):
    """read_journal_tail agrees with reading the whole journal forwards."""
    import struct

    from quorum.data_dir_reader import _HEADER, read_journal, read_journal_tail

    records = b""
    for index in range(1, 8):
        command = b"\x00" + bytes([index]) * index
        size = 16 + len(command)
        records += struct.pack("<IQQ", size, index, 1) + command + struct.pack("<I", size)
    header = b"PYSYNCOBJ".ljust(24, b"\x00") + b"\x00" * 8 + struct.pack("<II", 1, 0)
    end = _HEADER + len(records)
    header = header[: _HEADER - 4] + struct.pack("<I", end)
    path = tmp_path / "raft.journal"
    path.write_bytes(header + records + b"\x00" * 64)  # zero-filled room after the end
    forwards = list(read_journal(str(path)))
    assert [e.raft_index for e in forwards] == list(range(1, 8))
    assert read_journal_tail(str(path), 4) == forwards[4:]
    assert read_journal_tail(str(path), 0) == forwards
    assert read_journal_tail(str(path), 7) == []


# ---------------------------------------------------------------- update-voter (rule 6)
# The cases of Kafka's KafkaRaftClientReconfigTest (testUpdateVoter*), decided by
# check_update without sockets; each refusal names its rule (controller/rules.py).


def update(voters=THREE, node_id=2, directory_id="d2", address="h:9", **kw):
    state = {"committed_in_term": True, "change": None, "set_uncommitted": False, **kw}
    return check_update(voters, node_id, directory_id, address, **state)


def test_update_voter_moves_it_and_keeps_its_directory():
    """testUpdateVoter / testLeaderUpdatesVoter: the set keeps its ids and directories."""
    assert update() is None
    moved = updated(THREE, 2, "h", 9)
    assert moved == (THREE[0], THREE[1], Voter(2, "d2", "h", 9))
    assert [(v.voter_id, v.voter_directory_id) for v in moved] == [
        (v.voter_id, v.voter_directory_id) for v in THREE
    ]
    # The leader may move itself (a lone voter restarted at a new address).
    assert update(node_id=0, directory_id="d0") is None


def test_update_voter_of_another_cluster_is_refused():
    """testUpdateVoterInvalidClusterId (a voter's own ask over the Raft port)."""
    for sender in ("", "invalid-uuid"):
        refusal = update(cluster_ids=(sender, "c"))
        assert (refusal.error, refusal.rule) == (
            Errors.INCONSISTENT_CLUSTER_ID,
            "kip-853.cluster-id-mismatch",
        )
    assert update(cluster_ids=("c", "c")) is None


def test_update_voter_without_fenced_previous_leaders_times_out():
    """testUpdateVoterWithoutFencedPreviousLeaders: no entry of the leader's term committed."""
    refusal = update(committed_in_term=False)
    assert (refusal.error, refusal.rule) == (
        Errors.REQUEST_TIMED_OUT,
        "kip-853.leader-not-committed",
    )


def test_update_voter_with_kraft_version_0_is_unsupported():
    """testUpdateVoterWithKraftVersion0: no voter set in the log yet."""
    refusal = update(voters=())
    assert (refusal.error, refusal.rule) == (Errors.UNSUPPORTED_VERSION, "kip-853.kraft-version-0")


def test_update_voter_with_none_voter_directory_is_not_found():
    """testUpdateVoterWithNoneVoter: the id is a voter's, the directory another."""
    refusal = update(directory_id="another")
    assert (refusal.error, refusal.rule) == (
        Errors.VOTER_NOT_FOUND,
        "kip-853.voter-directory-mismatch",
    )
    assert "votes with directory d2, not another" in refusal.message


def test_update_voter_with_none_voter_id_is_not_found():
    """testUpdateVoterWithNoneVoterId: the directory is a voter's, the id no voter's."""
    refusal = update(node_id=3, directory_id="d2")
    assert (refusal.error, refusal.rule) == (Errors.VOTER_NOT_FOUND, "kip-853.voter-not-found")


def test_update_voter_with_pending_change_times_out():
    """testUpdateVoterWithPendingAddVoter, and a voter set written but not committed."""
    refusal = update(change="adding node 3 at h:4")
    assert (refusal.error, refusal.rule) == (
        Errors.REQUEST_TIMED_OUT,
        "kip-853.voter-change-pending",
    )
    assert "adding node 3 at h:4" in refusal.message
    refusal = update(set_uncommitted=True)
    assert (refusal.error, refusal.rule) == (
        Errors.REQUEST_TIMED_OUT,
        "kip-853.voter-set-uncommitted",
    )


@pytest.mark.parametrize(
    ("versions", "rule"),
    [
        ((-1, 1), "kip-853.kraft-version-range-invalid"),
        ((1, 0), "kip-853.kraft-version-range-invalid"),
        ((0, 0), "kip-853.kraft-version-unsupported"),
        ((2, 3), "kip-853.kraft-version-unsupported"),
    ],
)
def test_update_voter_must_support_the_finalized_kraft_version(versions, rule):
    """UpdateVoterHandler.validVersionRange, KafkaRaftClient's range check."""
    refusal = update(kraft_versions=versions)
    assert (refusal.error, refusal.rule) == (Errors.INVALID_REQUEST, rule)
    assert update(kraft_versions=(1, 1)) is None


@pytest.mark.parametrize(
    ("directory_id", "address", "rule"),
    [
        (None, "h:9", "kip-853.voter-directory-id-missing"),
        ("  ", "h:9", "kip-853.voter-directory-id-missing"),
        ("d2", "h", "kip-853.voter-endpoint-invalid"),
        ("d2", "h:0", "kip-853.voter-endpoint-invalid"),
        ("d2", "h:3:x", "kip-853.voter-endpoint-invalid"),
        ("d2", "h:1", "kip-853.voter-endpoint-taken"),
    ],
)
def test_update_voter_request_must_name_a_voter_key_and_an_endpoint(directory_id, address, rule):
    """KafkaRaftClient.handleUpdateVoterRequest: a directory id and the default
    listener's endpoint; and (ours) no other voter's address."""
    refusal = update(directory_id=directory_id, address=address)
    assert (refusal.error, refusal.rule) == (Errors.INVALID_REQUEST, rule)


def test_an_operator_does_not_move_a_voter_running_elsewhere():
    """A running voter's own address wins (Kafka's voter sends UpdateRaftVoter
    itself): moving its entry would cut it off, and it would ask to be moved back."""
    refusal = update(running_at="h:3")
    assert (refusal.error, refusal.rule) == (
        Errors.INVALID_REQUEST,
        "kip-853.voter-running-elsewhere",
    )
    assert "restart it with --raft-address h:9" in refusal.message
    assert update(running_at="h:9") is None  # it runs there already: only the set is behind
    assert update(running_at=None) is None  # down: its next start is at the new address


def test_update_voter_refusals_come_in_kafkas_order():
    """The request's own faults first, then the leader's state, then the voter."""
    everything_wrong = {
        "voters": THREE,
        "node_id": 7,
        "directory_id": None,
        "address": "nope",
        "committed_in_term": False,
        "change": "removing node 1 at h:2",
        "set_uncommitted": True,
        "kraft_versions": (3, 2),
        "cluster_ids": ("other", "c"),
    }
    order = [
        ("cluster_ids", ("c", "c")),
        ("directory_id", "d2"),
        ("address", "h:1"),
        ("kraft_versions", (2, 3)),
        ("change", None),
        ("committed_in_term", True),
        ("set_uncommitted", False),
        ("kraft_versions", (0, 1)),
        ("node_id", 2),
        ("address", "h:9"),
    ]
    rules = []
    state = dict(everything_wrong)
    for key, fixed in order:
        refusal = check_update(
            state["voters"], state["node_id"], state["directory_id"], state["address"],
            **{k: state[k] for k in ("committed_in_term", "change", "set_uncommitted",
                                     "kraft_versions", "cluster_ids")},
        )  # fmt: skip
        rules.append(refusal.rule)
        state[key] = fixed
    assert rules == [
        "kip-853.cluster-id-mismatch",
        "kip-853.voter-directory-id-missing",
        "kip-853.voter-endpoint-invalid",
        "kip-853.kraft-version-range-invalid",
        "kip-853.voter-change-pending",
        "kip-853.leader-not-committed",
        "kip-853.voter-set-uncommitted",
        "kip-853.kraft-version-unsupported",
        "kip-853.voter-not-found",
        "kip-853.voter-endpoint-taken",
    ]
    assert check_update(state["voters"], 2, "d2", "h:9", committed_in_term=True, change=None,
                        set_uncommitted=False) is None  # fmt: skip


def test_a_voter_set_entry_without_a_directory_accepts_any():
    """VoterNode.isVoter: a voter named without a directory id (a data dir from
    before directory ids) is the voter whatever directory the update names."""
    old = (Voter(0, "d0", "h", 1), Voter(1, None, "h", 2))
    assert update(voters=old, node_id=1, directory_id="whatever") is None


def test_every_update_voter_rule_is_in_the_table():
    ids = {
        "kip-853.cluster-id-mismatch",
        "kip-853.voter-directory-id-missing",
        "kip-853.voter-endpoint-invalid",
        "kip-853.kraft-version-range-invalid",
        "kip-853.voter-change-pending",
        "kip-853.leader-not-committed",
        "kip-853.kraft-version-0",
        "kip-853.voter-set-uncommitted",
        "kip-853.kraft-version-unsupported",
        "kip-853.voter-not-found",
        "kip-853.voter-directory-mismatch",
        "kip-853.voter-endpoint-taken",
        "kip-853.voter-running-elsewhere",
    }
    assert ids == {r for r in RULES if r.startswith("kip-853.")}
    for rule in ids:
        assert RULES[rule].codes and RULES[rule].checks


def moved_guard(own_address: str, committed=THREE, formed=True):
    g = VoterGuard(
        cluster_id="c",
        node_id=2,
        directory_id="d2",
        addresses={0: "h:1", 1: "h:2", 2: own_address},
        formed=formed,
        bootstrap={0: "d0", 1: "d1", 2: "d2"},
        committed_voters=lambda: committed,
        persist_formation=lambda v: None,
    )
    g.set_book({**addresses(committed), 2: own_address})  # as QuorumNode._book does
    return g


def test_a_voter_restarted_at_a_new_address_asks_to_be_moved():
    """KafkaRaftClient: a voter whose endpoints differ from the voter set's
    sends UpdateRaftVoter (testFollowerSendsUpdateVoterWhenDifferent)."""
    g = moved_guard("h:9")
    assert g.moved() == ("h:3", "h:9")
    assert g.update_request() == {
        "clusterId": "c",
        "nodeId": 2,
        "directoryId": "d2",
        "raftAddress": "h:9",
        "kraftVersion": [0, 1],
    }
    # What it sends is what the leader accepts.
    request = g.update_request()
    assert check_update(
        THREE, request["nodeId"], request["directoryId"], request["raftAddress"],
        committed_in_term=True, change=None, set_uncommitted=False,
        kraft_versions=tuple(request["kraftVersion"]), cluster_ids=(request["clusterId"], "c"),
    ) is None  # fmt: skip


def test_a_voter_at_its_address_or_not_admitted_asks_nothing():
    assert moved_guard("h:3").update_request() is None  # where the set names it
    moved = updated(THREE, 2, "h", 9)
    assert moved_guard("h:9", committed=moved).update_request() is None  # already moved
    # A new data dir under that id (another directory) is not the voter: no ask.
    other = (THREE[0], THREE[1], Voter(2, "other", "h", 3))
    assert moved_guard("h:9", committed=other).update_request() is None
    assert moved_guard("h:9", committed=(THREE[0], THREE[1])).update_request() is None  # removed


def test_an_update_keeps_every_majority_of_the_old_set_in_the_new():
    """One node id, one data dir, one vote: the set moved by one update has the
    same ids, so any majority of ids in the old set meets any in the new."""
    from itertools import combinations

    moved = updated(THREE, 2, "h", 9)
    old_ids = [v.voter_id for v in THREE]
    new_ids = [v.voter_id for v in moved]
    assert old_ids == new_ids and len(set(addresses(moved).values())) == 3
    for a in combinations(old_ids, 2):
        for b in combinations(new_ids, 2):
            assert set(a) & set(b)
