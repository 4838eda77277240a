"""Online membership: voters are added and removed one at a time (issue 17).

The rules, pure (no sockets, threads or clocks); ``QuorumNode`` runs them and
``membership_port`` applies the member lists to pysyncobj:

1. **The committed voter set is the authority.** It is the last KRAFT_VOTERS
   record applied (``image.voters``; each voter with its Raft host and port).
   pysyncobj's member list on every node is that set, taken when the record
   is applied (as etcd/raft applies a ConfChange), so pysyncobj's majority
   arithmetic is the voter set's. ``--voters`` only bootstraps a new cluster
   and tells a joiner where the cluster is. At start, a set the journal holds
   past the stored commit index counts until it is applied (the index on
   disk lags the journal; KIP-853 reads the set from the whole log).
2. **A joiner is a learner on the leader only.** The leader streams the log to
   it as to one of pysyncobj's read-only nodes: it is in no member list, so it
   never counts toward a commit, an election or check-quorum, and a voter
   that fails while it catches up costs nothing more than without it.
3. **One change at a time**, made only by the active controller (its
   LEADER_CHANGE is applied, so every earlier record, voter sets included, is
   committed), and the next only once the last has applied on the leader:
   any two successive voter sets differ by one voter, so a majority of one
   and a majority of the other always share a voter.
4. **Add**: refused while another change is in flight, before the first voter
   set is written, or when the node id or its address is already a voter's.
   The record naming the joiner (its directory id from its hello) is written
   once it is connected and holds the log up to the commit index seen a
   moment before; it commits under the old set (the joiner does not count).
5. **Remove**: refused while another change is in flight, for a node that is
   not a voter, for the last voter, for the active controller itself (move
   leadership first), and when the voters left would not have a connected
   majority. The record without it is written first; the leader keeps the
   removed node as a learner until it holds that record (so it learns it was
   removed and stops standing for election), for a few seconds at most.
"""

from __future__ import annotations

from metadata_records.errors import ApiError, Errors
from metadata_records.records import Voter


def parse_address(text: str, what: str = "address") -> tuple[str, int]:
    """``"host:port"`` -> (host, port); ValueError names ``what`` and the text."""
    host, colon, port = str(text).strip().rpartition(":")
    if not colon or not host or any(c in host for c in " /@,"):
        raise ValueError(f"{what}: {text!r} is not HOST:PORT")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"{what}: {text!r} is not HOST:PORT") from None
    if not 1 <= number <= 65535:
        raise ValueError(f"{what}: port {number} is out of range 1-65535")
    return host, number


def address_of(voter: Voter) -> str:
    """pysyncobj's node id: "host:port", spelled as the voter set spells it."""
    return f"{voter.host}:{voter.port}"


def addresses(voters: tuple[Voter, ...]) -> dict[int, str]:
    return {v.voter_id: address_of(v) for v in voters}


def describe(voters: tuple[Voter, ...]) -> str:
    return ", ".join(f"{v.voter_id}@{address_of(v)}" for v in sorted(voters)) or "none"


def with_voter(voters: tuple[Voter, ...], voter: Voter) -> tuple[Voter, ...]:
    return tuple(sorted((*(v for v in voters if v.voter_id != voter.voter_id), voter)))


def without_voter(voters: tuple[Voter, ...], node_id: int) -> tuple[Voter, ...]:
    return tuple(v for v in voters if v.voter_id != node_id)


def already_added(voters: tuple[Voter, ...], node_id: int, address: str) -> Voter | None:
    """The voter, when ``node_id`` is already a voter at ``address``: a retried
    add that finished (its answer was lost, or the leader changed after it)."""
    for v in voters:
        if v.voter_id == node_id and address_of(v) == address:
            return v
    return None


def in_flight(change: str | None) -> ApiError | None:
    if change is None:
        return None
    return ApiError(
        Errors.REQUEST_TIMED_OUT,
        f"another voter change is in flight ({change}): one change at a time; retry "
        "once it has finished (metaquorum status shows the voter set)",
    )


def check_add(
    voters: tuple[Voter, ...], node_id: int, address: str, change: str | None
) -> ApiError | None:
    """Why adding ``node_id`` at ``address`` is refused now, or None (rule 4)."""
    refused = in_flight(change)
    if refused is not None:
        return refused
    if not voters:
        return ApiError(
            Errors.REQUEST_TIMED_OUT,
            "the first voter set is not written yet (the cluster is still forming): retry",
        )
    for v in voters:
        if v.voter_id == node_id:
            return ApiError(
                Errors.DUPLICATE_VOTER,
                f"node {node_id} is already a voter, at {address_of(v)} (directory "
                f"{v.voter_directory_id}); to move it to {address}, remove it first",
            )
        if address_of(v) == address:
            return ApiError(
                Errors.DUPLICATE_VOTER,
                f"address {address} is already voter {v.voter_id}'s; every voter needs "
                "its own Raft address",
            )
    return None


def check_remove(
    voters: tuple[Voter, ...],
    node_id: int,
    leader_id: int,
    connected: set[int],
    change: str | None,
) -> ApiError | None:
    """Why removing ``node_id`` is refused now, or None (rule 5). ``connected``:
    the voters the leader hears now (their votes and acknowledgements count)."""
    refused = in_flight(change)
    if refused is not None:
        return refused
    ids = sorted(v.voter_id for v in voters)
    if node_id not in ids:
        return ApiError(
            Errors.VOTER_NOT_FOUND, f"node {node_id} is not a voter (voters: {describe(voters)})"
        )
    if len(ids) == 1:
        return ApiError(
            Errors.INVALID_REQUEST,
            f"node {node_id} is the last voter: a cluster cannot remove its last voter",
        )
    if node_id == leader_id:
        return ApiError(
            Errors.INVALID_REQUEST,
            f"node {node_id} is the active controller: move leadership first "
            "(metaquorum transfer-leadership), then remove it through the new leader",
        )
    left = [i for i in ids if i != node_id]
    up = [i for i in left if i == leader_id or i in connected]
    if len(up) <= len(left) / 2:
        down = [i for i in left if i not in up]
        return ApiError(
            Errors.INVALID_REQUEST,
            f"removing node {node_id} would leave voters {left} with only {up} connected "
            f"to the leader, not a majority: bring back {down} first",
        )
    return None


# The kraft.version this cluster finalizes once its first VotersRecord is
# written (docs/decisions.md 155): what an updated voter must support.
KRAFT_VERSION = 1


def check_update(
    voters: tuple[Voter, ...],
    node_id: int,
    directory_id: str | None,
    address: str,
    *,
    committed_in_term: bool,
    change: str | None,
    set_uncommitted: bool,
    kraft_versions: tuple[int, int] = (0, KRAFT_VERSION),
    cluster_ids: tuple[str, str] | None = None,
    running_at: str | None = None,
) -> ApiError | None:
    """Why updating voter ``node_id`` (directory ``directory_id``) to Raft
    ``address`` is refused now, or None (rule 6). The order is Kafka's:
    ``KafkaRaftClient.handleUpdateVoterRequest`` checks the request (a voter
    key with a directory id, an endpoint, a valid kraft.version range), then
    ``UpdateVoterHandler.handleUpdateVoterRequest`` the state: another change
    pending, the leader not yet committed in its term, kraft.version 0, a
    voter set not yet committed, the range without the finalized version,
    then the voter (``VoterSet.updateVoter``: its id and its directory).
    ``cluster_ids``: (the sender's, this cluster's), for a voter's own ask
    over the Raft port; None for an operator's (it came to this cluster).
    ``running_at``: for an operator's, the address the voter calls itself
    while it is connected to the leader with that directory (its hello), or
    None: a running voter's own address wins, as it does in Kafka."""
    if cluster_ids is not None and cluster_ids[0] != cluster_ids[1]:
        return _refuse(
            Errors.INCONSISTENT_CLUSTER_ID,
            f"the voter asking is of cluster {cluster_ids[0]!r}, this is {cluster_ids[1]!r}",
            "kip-853.cluster-id-mismatch",
        )
    if directory_id is None or not directory_id.strip():
        return _refuse(
            Errors.INVALID_REQUEST,
            f"the update of node {node_id} names no directory id: a voter is a (node id, "
            "directory id) pair (metaquorum status shows each voter's)",
            "kip-853.voter-directory-id-missing",
        )
    try:
        parse_address(address, "raftAddress")
    except ValueError as e:
        return _refuse(Errors.INVALID_REQUEST, str(e), "kip-853.voter-endpoint-invalid")
    low, high = kraft_versions
    if low < 0 or high < 0 or high < low:
        return _refuse(
            Errors.INVALID_REQUEST,
            f"supported kraft.version range {low}-{high} is not a range of versions (0 or "
            "more, min at most max)",
            "kip-853.kraft-version-range-invalid",
        )
    if change is not None:
        return _refuse(
            Errors.REQUEST_TIMED_OUT,
            f"another voter change is in flight ({change}): one change at a time; retry "
            "once it has finished",
            "kip-853.voter-change-pending",
        )
    if not committed_in_term:
        return _refuse(
            Errors.REQUEST_TIMED_OUT,
            "the leader has not yet committed an entry of its term (its LEADER_CHANGE): "
            "retry in a moment",
            "kip-853.leader-not-committed",
        )
    if not voters:
        return _refuse(
            Errors.UNSUPPORTED_VERSION,
            "kraft.version is 0 (no voter set written yet: the cluster is still forming); "
            "a voter can be updated once the first voter set is committed",
            "kip-853.kraft-version-0",
        )
    if set_uncommitted:
        return _refuse(
            Errors.REQUEST_TIMED_OUT,
            "the last voter set is not committed yet: retry once it is",
            "kip-853.voter-set-uncommitted",
        )
    if not low <= KRAFT_VERSION <= high:
        return _refuse(
            Errors.INVALID_REQUEST,
            f"the update's supported kraft.version range {low}-{high} must include the "
            f"cluster's kraft.version {KRAFT_VERSION}",
            "kip-853.kraft-version-unsupported",
        )
    old = next((v for v in voters if v.voter_id == node_id), None)
    if old is None:
        return _refuse(
            Errors.VOTER_NOT_FOUND,
            f"node {node_id} is not a voter (voters: {describe(voters)}); add it with "
            "metaquorum add-voter",
            "kip-853.voter-not-found",
        )
    if old.voter_directory_id is not None and old.voter_directory_id != directory_id:
        return _refuse(
            Errors.VOTER_NOT_FOUND,
            f"voter {node_id} votes with directory {old.voter_directory_id}, not "
            f"{directory_id}: only that data dir may move (a new data dir is a new voter: "
            "it catches up and the leader names it on its own)",
            "kip-853.voter-directory-mismatch",
        )
    for v in voters:
        if v.voter_id != node_id and address_of(v) == address:
            return _refuse(
                Errors.INVALID_REQUEST,
                f"address {address} is voter {v.voter_id}'s; every voter needs its own "
                "Raft address (the Raft library names a node by it)",
                "kip-853.voter-endpoint-taken",
            )
    if running_at is not None and running_at != address:
        return _refuse(
            Errors.INVALID_REQUEST,
            f"voter {node_id} is running and connected at {running_at} (its --raft-address): "
            f"moving its entry to {address} would cut it off, and it would ask to be moved "
            f"back; restart it with --raft-address {address} instead (it asks the leader "
            "itself), or update it while it is down",
            "kip-853.voter-running-elsewhere",
        )
    return None


def updated(voters: tuple[Voter, ...], node_id: int, host: str, port: int) -> tuple[Voter, ...]:
    """The voter set with ``node_id`` at (host, port), its directory id kept."""
    return tuple(v._replace(host=host, port=port) if v.voter_id == node_id else v for v in voters)


def _refuse(error: Errors, message: str, rule: str) -> ApiError:
    return ApiError(error, message, rule)


def lagging(node_id: int, address: str, hello_seen: bool, held: int, target: int) -> ApiError:
    """Why a joiner was not added within the request's time (rule 4)."""
    if not hello_seen:
        return ApiError(
            Errors.REQUEST_TIMED_OUT,
            f"node {node_id} at {address} has not connected to the leader: start it "
            f"(metaquorum serve --node-id {node_id} --raft-address {address} --voters ...) "
            "with this cluster's id and Raft secret, and check that every voter can "
            "reach that address",
        )
    return ApiError(
        Errors.REQUEST_TIMED_OUT,
        f"node {node_id} at {address} is connected but lags: it holds the log up to "
        f"Raft entry {held}, the commit index is {target}; retry when it has caught up "
        "(the retry goes on from where it is)",
    )


def misspelled(node_id: int, address: str, own: str | None) -> ApiError | None:
    """A joiner must be known by the address it calls itself: pysyncobj names
    a node by its "host:port" string, and two spellings are two nodes."""
    if own is None or own == address:
        return None
    return ApiError(
        Errors.INVALID_REQUEST,
        f"node {node_id} calls itself {own} (its --raft-address), not {address}: "
        "every voter must spell a voter's address the same way; add it as "
        f"{own}, or restart it with --raft-address {address}",
    )
