"""Voter identity: a voter that lost its disk never votes or counts toward a commit.

Raft's safety rests on every voter keeping its vote and its log. A data dir
that was wiped (a replaced PVC) and comes back under the same node id would
vote again in a term it already voted in and count its empty log toward
commits: with another voter lagging, acknowledged writes were lost. So, as in
Kafka's KIP-853, a voter is a (node id, directory id) pair, and the directory
id is drawn at random when a data dir is formatted (quorum/node_config.py).

Rules (each enforced here, on pysyncobj's tick thread, by filtering the Raft
messages that reach it; ``GuardedTransport`` calls ``filter``):

1. Every connection starts with a hello in both directions: cluster id, node
   id, directory id, whether the sender is *formed* (a voter of a cluster that
   exists), and the voter set it holds.
2. The voter set is the last KRAFT_VOTERS record of the log (the image's
   ``voters``); before the first one is committed, the *bootstrap* set agreed
   when the cluster formed (kept in the identity file).
3. A cluster forms only from empty voters that all hear each other: an empty
   voter becomes formed when every voter of ``--voters`` said hello unformed
   (the bootstrap set is then every directory id heard, its own included), or
   when a formed peer's voter set already names its own (node id, directory
   id). A peer that is formed without naming it means the cluster exists and
   this data dir is new to it: it stays an *observer* (it replicates the log
   but never votes) until a committed voter set names it; the leader commits
   that once it has caught up (``QuorumNode`` replaces the old directory).
4. A vote request is answered only by an admitted voter (formed, and named in
   its own voter set with its own directory id), only to a candidate whose
   hello matches the voter set; a granted vote and an append acknowledgement
   count only from a peer whose hello matches. An observer's acknowledgements
   still move its next index, so it catches up, but never the commit index.
5. A voter that is not admitted never stands for election.
6. Who is who on the Raft port (``node_id_of``) follows the committed voter
   set and the learners the leader streams to (quorum/membership.py), not
   ``--voters``, which only says who forms a new cluster. A node started
   outside ``--voters`` (a joiner) never forms a cluster: it is an observer
   until a committed voter set names it (``metaquorum add-voter``). A formed
   node the committed set no longer names is ``removed``: never admitted.
   So is one a voter tells it was removed while it was down (a voter-set
   notice, believed only from a voter that counts and has applied past it:
   quorum/voter_set_notice.py).
7. A node that is not admitted also stays connected to every voter its formed
   peers' hellos name (``heard_of``). The set it holds may predate its leader:
   a replaced voter's empty disk knows only ``--voters``, and a joiner catching
   up through the log applies every older set on its way. Without this, a
   leader added after that set was refused as an unknown address and the
   node never caught up (tests/test_k8s_membership.py, decisions.md 54).

A voter set entry with no directory id (``None``) comes from a data dir made
before directory ids existed: it accepts any formed peer, and the first
leader that has heard every voter writes the full set.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from metadata_records.records import Voter

from .membership import address_of, describe
from .voter_set_notice import VoterSetNotice, refusal

log = logging.getLogger(__name__)

HELLO = "metaquorum_hello"
# How often the same complaint about a peer is logged.
COMPLAINT_INTERVAL_S = 30.0


@dataclass(frozen=True)
class Hello:
    cluster_id: str
    node_id: int
    directory_id: str
    formed: bool
    voters: dict[int, str | None]  # the voter set the sender holds
    # Its own Raft address as it spells it (a joiner's must match add-voter's);
    # None from a voter that predates it.
    address: str | None = None
    # The Raft addresses of the voter set it holds, by node id (empty from a
    # voter that predates it): how a node whose own set is older finds voters
    # added since, its leader among them (rule 7).
    book: dict[int, str] = field(default_factory=dict)

    def to_message(self) -> dict:
        message = {
            "type": HELLO,
            "clusterId": self.cluster_id,
            "nodeId": self.node_id,
            "directoryId": self.directory_id,
            "formed": self.formed,
            "voters": [[k, v] for k, v in sorted(self.voters.items())],
        }
        if self.address is not None:
            message["address"] = self.address
        if self.book:
            message["book"] = [[k, v] for k, v in sorted(self.book.items())]
        return message

    @classmethod
    def from_message(cls, message: dict) -> Hello:
        """Raises ValueError for anything that is not a well-formed hello."""
        try:
            voters = {int(k): (None if v is None else str(v)) for k, v in message["voters"]}
            hello = cls(
                str(message["clusterId"]),
                int(message["nodeId"]),
                str(message["directoryId"]),
                bool(message["formed"]),
                voters,
                None if message.get("address") is None else str(message["address"]),
                {int(k): str(v) for k, v in message.get("book") or ()},
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed hello: {e!r}") from None
        return hello


class VoterGuard:
    """The voter-identity state of one node and the rules above. Runs on the
    tick thread; readers on other threads see whole dicts, replaced, never
    mutated (``peers``, ``progress``)."""

    def __init__(
        self,
        *,
        cluster_id: str,
        node_id: int,
        directory_id: str,
        addresses: dict[int, str],
        formed: bool,
        bootstrap: dict[int, str | None] | None,
        committed_voters: Callable[[], tuple[Voter, ...]],
        persist_formation: Callable[[dict[int, str | None]], None],
        clock: Callable[[], float] = time.monotonic,
        joining: bool = False,
        applied: Callable[[], tuple[int, tuple[Voter, ...]]] = lambda: (-1, ()),
    ) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.directory_id = directory_id
        # --voters: who forms a new cluster (rule 3) and the first voter set.
        self.bootstrap_addresses = dict(addresses)
        # Who is who on the Raft port: the voter set, joiners, this node
        # (set_book follows the committed set; quorum/membership.py).
        self.addresses = dict(addresses)
        self._by_address = {addr: nid for nid, addr in addresses.items()}
        # A node started outside --voters to be added to a running cluster:
        # it never forms one; it waits for a committed voter set to name it.
        self.joining = joining
        # Joiners (and a voter being removed) the leader streams the log to,
        # by node id; replaced whole by the event loop, read by the tick thread.
        self.learners: dict[int, str] = {}
        lone = len(addresses) == 1 and not joining
        if bootstrap is None:
            # A lone voter forms alone; a data dir from before directory ids
            # knows its voters but not their directories.
            bootstrap = {node_id: directory_id} if lone else dict.fromkeys(addresses)
        self.bootstrap: dict[int, str | None] = bootstrap
        self.formed = formed
        self._committed_voters = committed_voters
        self._persist_formation = persist_formation
        self._clock = clock
        self._voter_set_cache: tuple[tuple[Voter, ...] | None, dict] = (None, {})
        self.peers: dict[int, Hello] = {}
        # Voters named by formed peers' hellos (rule 7), by node id; grows, and
        # is replaced whole when it does.
        self.heard_of: dict[int, str] = {}
        self.progress: dict[int, int] = {}  # observers: highest index they hold
        # The applied image's last offset and voter set, read together.
        self._applied = applied
        # The notice of a voter that said this node was removed (while it was
        # down), believed (quorum/voter_set_notice.py); void once applied past.
        self.removal: VoterSetNotice | None = None
        self._said_removed = False
        self._complained: dict[tuple[int, str], float] = {}
        self.send_hello: Callable[[], None] | None = None  # set by the transport
        if lone and not formed:
            self._become_formed(bootstrap)

    # ------------------------------------------------------------ what we hold

    def voter_set(self) -> dict[int, str | None]:
        """Node id -> directory id of the set in force; shared, not to be changed.
        Asked for every vote and acknowledgement: the dict is built once per
        voter set (the image's tuple), not per message."""
        committed = self._committed_voters()
        if not committed:
            return self.bootstrap
        built_from, voters = self._voter_set_cache
        if built_from is not committed:
            voters = {v.voter_id: v.voter_directory_id for v in committed}
            self._voter_set_cache = (committed, voters)  # one assignment: readers on other threads
        return voters

    def set_book(self, book: dict[int, str]) -> None:
        """The Raft addresses by node id, replaced whole (readers on other
        threads see the old book or the new one)."""
        if book != self.addresses:
            self._by_address = {addr: nid for nid, addr in book.items()}
            self.addresses = dict(book)

    def hello(self) -> Hello:
        return Hello(
            self.cluster_id,
            self.node_id,
            self.directory_id,
            self.formed,
            self.voter_set(),
            self.addresses.get(self.node_id),
            {v.voter_id: address_of(v) for v in self._committed_voters()},
        )

    def moved(self) -> tuple[str, str] | None:
        """(the Raft address the voter set names for this voter, its own) when
        they differ: it was restarted at a new address with its data dir, and
        asks the leader to move it (quorum/membership.py rule 6); else None."""
        if not self.admitted:
            return None
        own = self.addresses.get(self.node_id)
        for v in self._committed_voters():
            if v.voter_id == self.node_id:
                listed = address_of(v)
                return (listed, own) if own is not None and listed != own else None
        return None

    def update_request(self) -> dict | None:
        """What a moved voter sends the leader (Kafka's UpdateRaftVoterRequest:
        cluster id, voter key, endpoint, supported kraft.version), or None."""
        moved = self.moved()
        if moved is None:
            return None
        return {
            "clusterId": self.cluster_id,
            "nodeId": self.node_id,
            "directoryId": self.directory_id,
            "raftAddress": moved[1],
            "kraftVersion": [0, 1],
        }

    @property
    def admitted(self) -> bool:
        """May vote and stand for election: formed, and named with this directory."""
        if not self.formed or self.removed_while_down():
            return False
        voters = self.voter_set()
        if self.node_id not in voters:
            return False
        expected = voters[self.node_id]
        return expected is None or expected == self.directory_id

    def role(self, node_id: int | None = None) -> str:
        """This node's role, or a peer's as this node sees it. ``voter``: its
        votes and acknowledgements count; ``observer``: a new data dir catching
        up before a voter set names it; ``replaced``: a formed data dir the
        voter set no longer names; ``unknown``: a peer not heard from since
        this node started; ``removed``: a formed data dir whose node the voter
        set no longer names, or (itself) one a voter says was removed while
        it was down (it never votes or stands again)."""
        if node_id is None or node_id == self.node_id:
            if self.removed_while_down():
                return "removed"
            node_id, formed, counts = self.node_id, self.formed, self.admitted
        else:
            hello = self.peers.get(node_id)
            if hello is None:
                return "unknown"
            formed, counts = hello.formed, self.counts(node_id)
        if counts:
            return "voter"
        if not formed:
            return "observer"
        return "replaced" if node_id in self.voter_set() else "removed"

    def removed_while_down(self) -> bool:
        """A voter told it that it was removed, and its log has not caught up."""
        removal = self.removal
        return removal is not None and self._applied()[0] < removal.offset

    def removed_reason(self) -> str | None:
        """Why this node is removed and what to do, or None (for /readyz)."""
        if self.role() != "removed":
            return None
        removal = self.removal if self.removed_while_down() else None
        if removal is not None:
            why = (
                f"node {self.node_id} was removed from the voter set, as voter "
                f"{removal.node_id} says (it has applied voters {removal.describe()} at "
                f"offset {removal.offset}; this node's log, behind it, still names it)"
            )
        else:
            why = (
                f"node {self.node_id} is no longer in the voter set "
                f"({describe(self._committed_voters())})"
            )
        return (
            f"{why}: it never votes or stands for election; stop it and clear its data "
            f"dir, or add it again with metaquorum add-voter --node-id {self.node_id} "
            f"--address {self.addresses.get(self.node_id, '<its Raft address>')}"
        )

    def directory_of(self, node_id: int) -> str | None:
        """The directory id of the data dir now running as ``node_id``."""
        if node_id == self.node_id:
            return self.directory_id
        hello = self.peers.get(node_id)
        return None if hello is None else hello.directory_id

    def counts(self, node_id: int | None) -> bool:
        """A peer's vote and acknowledgements count: its hello matches the set."""
        if node_id is None:
            return False
        voters = self.voter_set()
        if node_id not in voters:
            return False
        hello = self.peers.get(node_id)
        if hello is None:
            return False
        expected = voters[node_id]
        if expected is None:
            return hello.formed
        return hello.directory_id == expected

    # ------------------------------------------------------------ messages

    def node_id_of(self, address: str) -> int | None:
        return self._by_address.get(address)

    def on_hello(self, node_id: int | None, message: dict) -> bool:
        """Takes a peer's hello; False: drop the connection (wrong cluster or node)."""
        try:
            hello = Hello.from_message(message)
        except ValueError as e:
            self._complain(node_id, "hello", "a peer sent %s; dropping it", e)
            return False
        if hello.cluster_id != self.cluster_id:
            self._complain(
                node_id,
                "cluster",
                "the voter at %s belongs to cluster %s, this one to %s: check --voters "
                "and --cluster-id; its messages are refused",
                self.addresses.get(node_id, "?"),
                hello.cluster_id,
                self.cluster_id,
            )
            return False
        if hello.node_id != node_id:
            self._complain(
                node_id,
                "node",
                "the voter at %s says it is node %d, but --voters names node %s there: "
                "every voter must be given the same --voters; its messages are refused",
                self.addresses.get(node_id, "?"),
                hello.node_id,
                node_id,
            )
            return False
        self.peers = {**self.peers, node_id: hello}
        if hello.formed:
            heard = {**self.heard_of, **hello.book}
            heard.pop(self.node_id, None)
            if heard != self.heard_of:
                self.heard_of = heard
        self._maybe_form()
        return True

    def notice(self) -> VoterSetNotice | None:
        """What this node tells a peer it no longer lists (one removed while it
        was down): the applied voter set and offset; None before it has one."""
        offset, voters = self._applied()
        if not self.formed or not voters:
            return None
        return VoterSetNotice(
            self.cluster_id,
            self.node_id,
            self.directory_id,
            offset,
            {v.voter_id: v.voter_directory_id for v in voters},
            {v.voter_id: address_of(v) for v in voters},
        )

    def on_notice(self, node_id: int | None, message: dict) -> None:
        """A peer says which voter set it applied: believed or not (refusal)."""
        try:
            notice = VoterSetNotice.from_message(message)
        except ValueError as e:
            self._complain(node_id, "notice", "a peer sent %s; ignoring it", e)
            return
        why = refusal(
            notice,
            node_id,
            cluster_id=self.cluster_id,
            node_id=self.node_id,
            directory_id=self.directory_id,
            formed=self.formed,
            voters=self.voter_set(),
            applied_offset=self._applied()[0],
        )
        if why is not None:
            log.debug("not believing node %s's voter set: %s", node_id, why)
            return
        if self.removal is None or notice.offset > self.removal.offset:
            self.removal = notice
        self.say_if_removed()

    def say_if_removed(self) -> None:
        """One log line when this node becomes removed (by a notice or by its
        own log; the one after the other is no change), none per tick."""
        removed = self.role() == "removed"
        if removed and not self._said_removed:
            log.warning("%s", self.removed_reason())
        self._said_removed = removed

    def forget(self, node_id: int | None) -> None:
        """A peer disconnected: the process that comes back may have a new disk."""
        if node_id in self.peers:
            self.peers = {k: v for k, v in self.peers.items() if k != node_id}
        if node_id in self.progress:
            self.progress = {k: v for k, v in self.progress.items() if k != node_id}

    def filter(self, node_id: int | None, message):
        """The message to hand to pysyncobj, or None to drop it (rule 4)."""
        if not isinstance(message, dict):
            return message
        kind = message.get("type")
        if kind == "request_vote":
            return message if self.admitted and self.counts(node_id) else None
        if kind == "response_vote":
            return message if self.counts(node_id) else None
        if kind == "timeout_now":
            return message if self.admitted else None
        if kind == "next_node_idx" and not self.counts(node_id):
            if node_id is not None and message.get("success"):
                held = message.get("next_node_idx", 1) - 1
                if held > self.progress.get(node_id, 0):
                    self.progress = {**self.progress, node_id: held}
            if message.get("reset"):
                return {**message, "success": False}
            return None
        return message

    def on_applied(self) -> None:
        """After an apply: an observer named by the committed set is admitted."""
        if self.formed:
            return
        committed = self._committed_voters()
        if any(
            v.voter_id == self.node_id and v.voter_directory_id == self.directory_id
            for v in committed
        ):
            self._become_formed({v.voter_id: v.voter_directory_id for v in committed})
            log.info(
                "this data dir (directory %s) is now a voter of cluster %s",
                self.directory_id,
                self.cluster_id,
            )

    # ------------------------------------------------------------ formation

    def _maybe_form(self) -> None:
        if self.formed:
            return
        # A formed peer naming this directory: the formation of a new cluster
        # (its voters formed first). A node that already holds a voter set of
        # the log is an observer re-admitted by applying one (on_applied), not
        # by a peer's word (hellos are re-sent when a peer's set changes).
        forming = not self._committed_voters()
        for hello in self.peers.values():
            if forming and hello.formed and hello.voters.get(self.node_id) == self.directory_id:
                self._become_formed(dict(hello.voters))
                log.info("joined the new cluster %s as formed by its voters", self.cluster_id)
                return
        formed_sets = [h.voters for h in self.peers.values() if h.formed]
        if self.joining or (formed_sets and all(self.node_id not in v for v in formed_sets)):
            self._complain(
                self.node_id,
                "joining",
                "node %d is not a voter of cluster %s: it catches up as an observer once "
                "the leader streams the log to it (metaquorum add-voter --node-id %d "
                "--address %s) and becomes a voter when that change commits",
                self.node_id,
                self.cluster_id,
                self.node_id,
                self.addresses.get(self.node_id, "?"),
            )
            return
        others = [nid for nid in self.bootstrap_addresses if nid != self.node_id]
        if any(self.peers.get(nid) is not None and self.peers[nid].formed for nid in others):
            self._complain(
                self.node_id,
                "observer",
                "cluster %s exists and this data dir (directory %s) is new to it: it "
                "catches up as an observer and becomes a voter when the leader has "
                "replaced this node's old directory (it never votes before)",
                self.cluster_id,
                self.directory_id,
            )
            return
        if all(nid in self.peers for nid in others):
            voters = {nid: self.peers[nid].directory_id for nid in others}
            voters[self.node_id] = self.directory_id
            self._become_formed(voters)
            log.info(
                "formed cluster %s with voters %s",
                self.cluster_id,
                ", ".join(f"{nid}/{d}" for nid, d in sorted(voters.items())),
            )
        else:
            missing = sorted(nid for nid in others if nid not in self.peers)
            self._complain(
                self.node_id,
                "forming",
                "this data dir is empty: waiting to hear from voters %s (a new cluster "
                "forms only when every voter of --voters is up with an empty data dir)",
                missing,
            )

    def _become_formed(self, voters: dict[int, str | None]) -> None:
        self._persist_formation(voters)  # on disk before anything reflects it
        self.bootstrap = voters
        self.formed = True
        if self.send_hello is not None:
            self.send_hello()

    def _complain(self, node_id, what: str, fmt: str, *args) -> None:
        key = (node_id if node_id is not None else -1, what)
        now = self._clock()
        if now - self._complained.get(key, -1e18) >= COMPLAINT_INTERVAL_S:
            self._complained[key] = now
            log.warning(fmt, *args)


def replacement(
    voters: tuple[Voter, ...], guard: VoterGuard, caught_up_index: int
) -> tuple[Voter, ...] | None:
    """The voter set with one replaced directory, or None: the first voter whose
    node is connected with another, unformed directory (its disk was replaced)
    that holds the log up to ``caught_up_index``. One change at a time."""
    for v in voters:
        hello = guard.peers.get(v.voter_id)
        if hello is None or hello.formed or hello.directory_id == v.voter_directory_id:
            continue
        if guard.progress.get(v.voter_id, 0) < caught_up_index:
            continue
        return tuple(
            w._replace(voter_directory_id=hello.directory_id) if w is v else w for w in voters
        )
    return None


def bootstrap_voters(guard: VoterGuard) -> tuple[Voter, ...] | None:
    """The first KRAFT_VOTERS record's set, once every voter's directory is known."""
    voters = guard.voter_set()
    out = []
    for nid, addr in sorted(guard.bootstrap_addresses.items()):
        directory = voters.get(nid)
        if directory is None:
            if nid == guard.node_id:
                directory = guard.directory_id
            else:
                hello = guard.peers.get(nid)
                if hello is None or not hello.formed:
                    return None
                directory = hello.directory_id
        host, _, port = addr.rpartition(":")
        out.append(Voter(nid, directory, host, int(port)))
    return tuple(out)
