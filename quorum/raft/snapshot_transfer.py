"""A snapshot keeps streaming to a follower while the next one is written.

A follower behind the leader's first log entry (a replaced disk, a new
voter) gets the leader's snapshot file in pieces, sent from the leader's
tick. pysyncobj sends nothing while its Serializer says a snapshot is being
written, which with our serializer (quorum/state_machine.py forks its own
writer and reports through ``serializeChecker``) is the whole time that
writer runs: pysyncobj then holds a marker pid (its own rename of a ``.tmp``
file our writer never makes fails), until the checker reports the end. At
2,000,000 partitions a snapshot takes 7-15 s to write on two busy cores, and
a voter writing one every few thousand entries left the transfer paused most
of the time: a replaced disk took 136 s to be a voter again.

Nothing needs the pause here: the file pysyncobj opens for a transfer is
whole (our writer renames a complete, synced file over it), and a transfer
keeps the file it opened, so a snapshot finished meanwhile does not change
what a follower receives. Pieces are ``TRANSFER_PIECE`` bytes
(``logCompactionBatchSize``; pysyncobj's default, 64 KiB, made 1,400
messages of an 87 MB snapshot, each waiting for the tick that sends it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Bytes of a snapshot a transfer message carries (SyncObjConf.logCompactionBatchSize).
TRANSFER_PIECE = 1 << 20

# pysyncobj's Serializer.__pid while no writer of its own runs but the last
# serialize() call did not end in its own rename: -1 (it did), -2 (it failed).
_MARKERS = (-1, -2)


def send_while_writing(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Serializer.getTransmissionData`` that sends while our writer runs."""

    def getTransmissionData(self, transmissionID):  # noqa: N802 - pysyncobj's name
        marker = self._Serializer__pid
        if marker not in _MARKERS or self._Serializer__serializeChecker is None:
            return original(self, transmissionID)
        self._Serializer__pid = 0  # the tick thread's alone: nothing reads it meanwhile
        try:
            return original(self, transmissionID)
        finally:
            self._Serializer__pid = marker

    getTransmissionData.__wrapped__ = original
    return getTransmissionData
