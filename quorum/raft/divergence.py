"""Fail-stop on divergence: a voter never serves an image built from entries
the cluster did not commit.

Invariant: an entry this voter has applied is never replaced by an entry of
another term at the same Raft index. Raft guarantees that an applied (so
committed) entry is in every later leader's log with the same index and term;
when a leader sends another term there, that guarantee was broken outside
Raft (voters restored from backups of different moments, a data dir from
another run of the cluster, a disk that lied about fsync), and this voter's
image holds records the cluster does not. It must stop at once: never apply
the leader's version over it, never answer from it, never vote with it.

pysyncobj 0.3.17 truncates whatever follows ``prevLogIdx`` when the follower
holds more, applied or not, logs ``truncating already-applied log entries``
at CRITICAL, and carries on serving the old image. Most of those truncations
are benign: a late or re-sent AppendEntries carries entries this voter
already holds with the same terms (docs/pysyncobj.md 6.5), or none, and the leader
sends them again. So the check compares terms: an applied entry that the
message replaces with another term is divergence; applied entries the message
cuts without replacing are remembered (index -> term) and compared when the
leader sends them again. Patched by name, like quorum/raft/raft_port.py.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable

log = logging.getLogger(__name__)

_ON_DIVERGED = "_metaquorum_on_diverged"
_DIVERGED = "_metaquorum_diverged"
_CUT = "_metaquorum_cut_applied"  # Raft index -> term of applied entries cut, not yet re-sent


class Divergence(Exception):
    """This voter's applied log conflicts with the leader's."""


def first_conflict(
    applied_terms: dict[int, int], new_entries: list[tuple]
) -> tuple[int, int, int] | None:
    """(index, our term, the leader's term) of the first new entry whose index
    is in ``applied_terms`` with another term; None if every one agrees."""
    for entry in new_entries:
        index, term = entry[1], entry[2]
        ours = applied_terms.get(index)
        if ours is not None and ours != term:
            return index, ours, term
    return None


def _incoming_entries(syncobj, message: dict) -> list[tuple] | None:
    """The entries an AppendEntries carries, as pysyncobj will read them; None
    while a large entry is still arriving in pieces."""
    transmission = message.get("transmission")
    if transmission is None:
        return message.get("entries", [])
    if transmission == "finish":
        buffered = syncobj._SyncObj__recvTransmission + message["data"]
        return [pickle.loads(buffered)]  # noqa: S301 - a decrypted frame of a peer with the secret
    return None


def _check(syncobj, node, message: dict) -> None:
    """Raises Divergence if the leader holds another term than this voter at
    an applied index: at ``prevLogIdx`` (pysyncobj would answer "reset"), or
    where pysyncobj would replace an applied entry; remembers the applied
    entries it would only cut."""
    cut: dict[int, int] | None = getattr(syncobj, _CUT, None)
    last_applied = syncobj._SyncObj__raftLastApplied
    prev_index = message["prevLogIdx"]
    if prev_index > last_applied and not cut:
        return  # appending after what is applied: Raft's own checks suffice
    entries = _incoming_entries(syncobj, message)
    if entries is None:
        return
    get_entries = syncobj._SyncObj__getEntries  # the journal's entries are in memory
    conflict = None
    truncates = False
    if prev_index <= last_applied:
        prev = get_entries(prev_index, 1)
        if prev and prev[0][2] != message["prevLogTerm"]:
            conflict = prev_index, prev[0][2], message["prevLogTerm"]
        truncates = (
            bool(prev)
            and conflict is None
            and prev_index < syncobj._SyncObj__getCurrentLogIndex()
            and prev_index < last_applied
        )
    if truncates:
        applied = get_entries(prev_index + 1, last_applied - prev_index)
        terms = {entry[1]: entry[2] for entry in applied}
        conflict = first_conflict(terms, entries)
        sent = {entry[1] for entry in entries}
        cut = {**(cut or {}), **{i: t for i, t in terms.items() if i not in sent}}
    elif cut and conflict is None:
        conflict = first_conflict(cut, entries)
    if conflict is not None:
        index, ours, theirs = conflict
        raise Divergence(
            f"this voter's Raft log diverged from the leader's ({getattr(node, 'id', node)}): "
            f"entry {index}, already applied here at term {ours}, is of term {theirs} on the "
            f"leader (last applied here: {last_applied}). Its image holds records the cluster "
            f"did not commit, so it stops serving. To recover: move its data dir aside (keep "
            f"it for analysis) and start it again with an empty data dir and the same flags; "
            f"it catches up from the leader and is a voter again once it holds the log"
        )
    if cut:
        for entry in entries:
            cut.pop(entry[1], None)
    setattr(syncobj, _CUT, cut or None)


def fail_stop_on_divergence(original: Callable) -> Callable:
    """Checks each AppendEntries before pysyncobj truncates applied entries.

    On divergence the voter calls its ``on_diverged`` (``watch_divergence``)
    once, logs one CRITICAL line, and from then on drops every Raft message
    unread and never stands for election: it neither truncates, appends,
    applies, answers nor votes. A
    snapshot install clears what was remembered (it replaces the log).
    What it changes in pysyncobj: nothing for a message that does not conflict.
    Wraps ``SyncObj.__onMessageReceived`` (quorum/raft/patches.py)."""

    def on_message(self, node, message):
        if getattr(self, _DIVERGED, False):
            return
        if (
            type(message) is dict
            and message.get("type") == "append_entries"
            and message.get("term", -1) >= self._SyncObj__raftCurrentTerm
        ):
            if "prevLogIdx" in message:
                try:
                    _check(self, node, message)
                except Divergence as e:
                    setattr(self, _DIVERGED, True)
                    # Never stand for election with this log (it would disturb
                    # the healthy voters until the process exits).
                    self._SyncObj__raftElectionDeadline = float("inf")
                    log.critical("%s", e)
                    callback = getattr(self, _ON_DIVERGED, None)
                    if callback is not None:
                        callback(str(e))
                    return
            elif message.get("serialized") is not None:
                setattr(self, _CUT, None)
        original(self, node, message)

    return on_message


def watch_divergence(syncobj, on_diverged: Callable[[str], None]) -> None:
    """``on_diverged(why)`` runs on the tick thread when this voter diverges;
    it must not raise."""
    setattr(syncobj, _ON_DIVERGED, on_diverged)


def diverged(syncobj) -> bool:
    return bool(getattr(syncobj, _DIVERGED, False))
