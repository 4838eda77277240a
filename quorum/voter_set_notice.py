"""How a voter removed while it was down learns it was removed (issue 42).

A node removed while running holds the record that removes it (the leader
keeps it as a learner until it does; quorum/membership.py rule 5). One that
was down misses it: it comes back with a log whose voter set still names it,
and the voters no longer list its address, so pysyncobj drops its every
connection before any hello or entry, and it would wait, never ready and
saying nothing, as ``role: voter``.

So a voter that is reached from an address it does not list answers, before
pysyncobj drops the connection, with a *voter-set notice*: the voter set of
its applied image and the offset it has applied (quorum/raft/raft_port.py).
pysyncobj dials only from the larger address to the smaller, so a node also
asks for a notice, on a connection of its own, each voter it never dials
while that voter is not connected to it and it holds itself a voter.
The notice travels as every Raft message does, under the Raft secret: a peer
without it cannot send one. The node believes it (``refusal`` is None) only if

1. this data dir is formed (a new or wiped one is an observer or a joiner,
   never removed) and its own voter set still names it (one that holds the
   record removing it knows already);
2. the sender is of this cluster and is who the connection says it is;
3. the sender's word counts here: the voter set this node holds names it
   with the directory it reports (as a vote or an acknowledgement counts);
4. the sender has applied past this node: an applied set is committed, so it
   is the set in force at that offset of the one log, later than anything
   this node holds; a stale peer (partitioned, lagging) is never believed;
5. that set does not name this node.

A belief holds only while this node has applied less than the notice's
offset: past it, its own log says who the voters are (a node removed and
added again learns that from the log as it catches up). Believing wrongly
could only keep a node from voting or standing, never break a majority.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NOTICE = "metaquorum_voter_set"
# A voter's question for a notice, on a connection of its own: pysyncobj dials
# only from the larger address, so a removed voter with the smaller one would
# otherwise never hear from the voters that no longer list it.
NOTICE_REQUEST = "metaquorum_voter_set?"


@dataclass(frozen=True)
class VoterSetNotice:
    cluster_id: str
    node_id: int  # the sender
    directory_id: str  # the sender's
    offset: int  # the last offset the sender applied
    voters: dict[int, str | None]  # the voter set of that image: node id -> directory id
    book: dict[int, str] = field(default_factory=dict)  # their Raft addresses, for the log

    def to_message(self) -> dict:
        return {
            "type": NOTICE,
            "clusterId": self.cluster_id,
            "nodeId": self.node_id,
            "directoryId": self.directory_id,
            "offset": self.offset,
            "voters": [[k, v] for k, v in sorted(self.voters.items())],
            "book": [[k, v] for k, v in sorted(self.book.items())],
        }

    @classmethod
    def from_message(cls, message: dict) -> VoterSetNotice:
        """Raises ValueError for anything that is not a well-formed notice."""
        try:
            return cls(
                str(message["clusterId"]),
                int(message["nodeId"]),
                str(message["directoryId"]),
                int(message["offset"]),
                {int(k): (None if v is None else str(v)) for k, v in message["voters"]},
                {int(k): str(v) for k, v in message.get("book") or ()},
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed voter-set notice: {e!r}") from None

    def describe(self) -> str:
        return ", ".join(f"{nid}@{self.book.get(nid, '?')}" for nid in sorted(self.voters))


def refusal(
    notice: VoterSetNotice,
    sender: int | None,
    *,
    cluster_id: str,
    node_id: int,
    directory_id: str,
    formed: bool,
    voters: dict[int, str | None],
    applied_offset: int,
) -> str | None:
    """Why this node does not believe ``notice`` from the peer it knows as
    ``sender``, or None: it believes it was removed (rules 1-5 above).
    ``voters`` is the set this node holds, ``applied_offset`` what it applied."""
    if not formed:
        return "this data dir is not formed (new or wiped): an observer, not a removed voter"
    if node_id not in voters:
        return "the voter set this node holds already leaves it out: its own log says so"
    if notice.cluster_id != cluster_id:
        return f"the sender is of cluster {notice.cluster_id}, this node of {cluster_id}"
    if sender is None or notice.node_id != sender:
        return f"the sender says it is node {notice.node_id}, but its address is node {sender}'s"
    if sender not in voters or voters[sender] not in (None, notice.directory_id):
        return (
            f"node {sender} (directory {notice.directory_id}) is not a voter of the set "
            "this node holds: its word does not count here"
        )
    if notice.offset <= applied_offset:
        return (
            f"node {sender} has applied up to offset {notice.offset}, this node up to "
            f"{applied_offset}: its voter set is not newer"
        )
    if not notice.voters:
        return f"node {sender} holds no voter set yet"
    if node_id in notice.voters:
        return f"node {sender}'s voter set names node {node_id}"
    return None
