"""Timestamps of a write's stages through a voter, for bench/lone_request.py.

Off unless the voter's environment names a directory in
``METAQUORUM_STAGE_TRACE``; off, every marking point is one module
attribute read (``if stage_trace.TRACE is not None``) and nothing else.
On, ``mark(stage, idx)`` appends ``(monotonic ns, stage, Raft index or
-1)`` to a deque, and a thread writes what was marked to
``<dir>/stages-<pid>.tsv`` every ``FLUSH_EVERY_S``; while a file named
``off`` is in that directory, that thread sets ``TRACE`` to None, so a
bench can run its load without the marking's cost and its files.

The clock is ``time.monotonic_ns`` (CLOCK_MONOTONIC): one clock for every
process of the machine, so the bench lines up its own send and receive
with the leader's and the followers' stages without any exchange. The
stages, in the order a lone write passes them (docs/performance.md, "One
write alone"):

==============  ==============================================  =======
stage           where                                           thread
==============  ==============================================  =======
``route``       api/direct_routes.py, the request's first step  loop
``submit``      quorum/orderer.py, the request queued           loop
``propose``     quorum/node.py ``append``, handed to pysyncobj  loop
``append``      quorum/raft/durability.py, an entry journaled   Raft
``sent``        quorum/raft/raft_port.py, AppendEntries out     Raft
``synced``      quorum/raft/durability.py, the journal synced   Raft/sync
``received``    raft_port.py, AppendEntries in (follower)       Raft
``acked``       raft_port.py, a follower's answer out           Raft
``ack_in``      raft_port.py, a follower's answer in (leader)   Raft
``commit``      durability.py, the commit index moved           Raft
``applied``     quorum/state_machine.py, the batch applied      Raft
``settled``     quorum/node.py, the write's future settled      loop
``answer``      api/direct_routes.py, the answer goes out       loop
==============  ==============================================  =======
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque

ENV = "METAQUORUM_STAGE_TRACE"
FLUSH_EVERY_S = 0.1


class StageTrace:
    def __init__(self, directory: str) -> None:
        self.off = os.path.join(directory, "off")
        self.path = os.path.join(directory, f"stages-{os.getpid()}.tsv")
        self._events: deque[tuple[int, str, int]] = deque()
        self._thread = threading.Thread(target=self._flush_forever, name="stage-trace", daemon=True)
        self._thread.start()

    def mark(self, stage: str, idx: int = -1) -> None:
        self._events.append((time.monotonic_ns(), stage, idx))  # list.append: atomic

    def flush(self) -> None:
        events = []
        while self._events:  # deque: append and popleft are thread-safe
            events.append(self._events.popleft())
        if events:
            with open(self.path, "a") as f:
                f.writelines(f"{t}\t{stage}\t{idx}\n" for t, stage, idx in events)

    def _flush_forever(self) -> None:
        global TRACE
        while True:
            time.sleep(FLUSH_EVERY_S)
            self.flush()
            TRACE = None if os.path.exists(self.off) else self


def _from_environment() -> StageTrace | None:
    directory = os.environ.get(ENV)
    return StageTrace(directory) if directory else None


TRACE: StageTrace | None = _from_environment()


def read(path: str) -> list[tuple[int, str, int]]:
    """The events one process wrote (the bench's side)."""
    with open(path) as f:
        return [(int(t), stage, int(idx)) for t, stage, idx in (line.split("\t") for line in f)]
