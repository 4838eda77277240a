"""pysyncobj's ticks run on the voter's event loop, in place of its tick thread.

A lone write used to cross two thread hops inside the leader's process
(docs/performance.md, "One write alone"): the event loop handed the
proposal to pysyncobj's tick thread through its pipe notifier (the tick
thread woke from its poll and took the interpreter lock), and the tick
thread handed the applied write back through ``call_soon_threadsafe`` (the
loop woke and took the lock again). With ``LOOP_TICK`` and the one-process
layout, the loop runs the ticks itself once the journal's replay is done:
the proposal is appended, sent and synced in the loop turn that decided
it, the followers' answers wake the loop through the sockets it watches,
and the commit's apply settles the write's future on the same thread. A
follower's loop reads an AppendEntries, appends, syncs and answers in one
turn, with no second thread asking for the interpreter lock meanwhile.

How: ``EpollPoller`` takes the place of pysyncobj's poller (its
``createPoller``, quorum/raft/patches.py). Its epoll descriptor is readable
while any descriptor pysyncobj watches is ready, so the loop watches that
one descriptor (``add_reader``): the events are dispatched to pysyncobj's
callbacks, then a tick runs if one has work now (a commit, an apply, a
proposal, a change of role or term); other events (a second answer to an
entry already committed) leave the periodic chores to the timer, so that
what the loop has ready (an answer) goes first. A tick's ``poll(wait)``
does not block on the loop and dispatches nothing: it keeps ``wait``, the
time the tick would have slept (leader_liveness.tick_on_time cuts it to the
next heartbeat or election deadline), and the loop's timer runs the next
tick then. A proposal made on the loop gets a tick in the same loop turn.

Until the hand-over, and for good in the layout with HTTP workers (whose
core serves the links on its loop), ``TickThread`` ticks as pysyncobj's
own tick thread does, blocking in the same poller. The hand-over waits for
the replay (a large journal or snapshot applies for seconds, which the
loop must not spend while probes wait) and for the thread's current tick
to end; the ticks then run on the loop until the SyncObj is destroyed.

What the loop gives up: a tick's own work runs between its callbacks (a
follower's journal sync, 0.1-0.4 ms, an apply), so the HTTP of a voter waits
for it, as it waits for any other callback. Snapshots are written in a
forked child (quorum/state_machine.py) and the meta file by a thread of its
own (durability.MetaStoreThread), so neither is on the loop; a snapshot a
follower installs is.

``LOOP_TICK = False``: pysyncobj's own tick thread and poller, as before
(the plain twin; tests/test_loop_tick.py checks both commit and answer
alike). Pinned to pysyncobj 0.3.17: ``SyncObj._onTick(timeToWait)`` ends
with ``self._poller.poll(timeToWait)``; ``doTick`` is ``_onTick`` with
``autoTick`` off; ``destroy()`` with ``autoTick`` off is ``_doDestroy()``.
"""

from __future__ import annotations

import asyncio
import logging
import select
import threading
import time
from collections.abc import Callable

from pysyncobj.poller import POLL_EVENT_TYPE, Poller

from .internals import SYNCOBJ_LOGGER

# The ticks of a voter in the one-process layout run on its event loop once
# its replay is done (this module's docstring); False: pysyncobj's tick thread.
LOOP_TICK = True

log = logging.getLogger(SYNCOBJ_LOGGER)  # pysyncobj's: its tick tracebacks are filtered there

_IN, _OUT, _ERR = select.EPOLLIN, select.EPOLLOUT, select.EPOLLERR | select.EPOLLHUP


def _epoll_mask(events: int) -> int:
    mask = 0
    if events & POLL_EVENT_TYPE.READ:
        mask |= _IN
    if events & POLL_EVENT_TYPE.WRITE:
        mask |= _OUT
    if events & POLL_EVENT_TYPE.ERROR:
        mask |= select.EPOLLERR
    return mask


class EpollPoller(Poller):
    """pysyncobj's poller over one epoll descriptor (level-triggered, as
    its ``PollPoller``). ``blocking``: ``poll(timeout)`` waits up to
    ``timeout`` and dispatches (a tick thread); not blocking, it only keeps
    ``timeout`` as ``wait_s``, and the loop calls ``dispatch(0)`` when the
    descriptor is readable. ``dispatched`` counts the events handed to
    pysyncobj since the caller last reset it."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._callbacks: dict[int, Callable[[int, int], None]] = {}
        self.blocking = True
        self.wait_s = 0.0
        self.dispatched = 0

    def fileno(self) -> int:
        return self._epoll.fileno()

    def subscribe(self, descr, callback, eventMask) -> None:  # noqa: N803 - pysyncobj's names
        mask = _epoll_mask(eventMask)
        if descr in self._callbacks:
            try:
                self._epoll.modify(descr, mask)
            except FileNotFoundError:  # closed and reused since: epoll forgot it
                self._epoll.register(descr, mask)
        else:
            try:
                self._epoll.register(descr, mask)
            except FileExistsError:  # still registered under a forgotten callback
                self._epoll.modify(descr, mask)
        self._callbacks[descr] = callback

    def unsubscribe(self, descr) -> None:
        self._callbacks.pop(descr, None)
        try:
            self._epoll.unregister(descr)
        except (OSError, ValueError):  # closed already: epoll dropped it
            pass

    def poll(self, timeout) -> None:
        if self.blocking:
            self.dispatch(timeout)
        else:
            self.wait_s = timeout  # the loop dispatches, when the descriptor is readable

    def dispatch(self, timeout: float) -> None:
        """Hands each ready descriptor's events to its callback, waiting up to ``timeout``."""
        try:
            events = self._epoll.poll(timeout)
        except InterruptedError:
            return
        callbacks = self._callbacks
        for descr, event in events:
            callback = callbacks.get(descr)
            if callback is None:  # unsubscribed by an earlier callback of this poll
                continue
            mask = 0
            if event & _IN:
                mask |= POLL_EVENT_TYPE.READ
            if event & _OUT:
                mask |= POLL_EVENT_TYPE.WRITE
            if event & _ERR:
                mask |= POLL_EVENT_TYPE.ERROR
            self.dispatched += 1
            callback(descr, mask)

    def close(self) -> None:
        self._epoll.close()


def poller_factory(original: Callable) -> Callable:
    """Takes the place of ``pysyncobj.syncobj.createPoller``
    (quorum/raft/patches.py): an ``EpollPoller`` while ``LOOP_TICK``, else
    pysyncobj's own."""

    def create_poller(poller_type):
        return EpollPoller() if LOOP_TICK else original(poller_type)

    return create_poller


class RaftReads:
    """What the loop's ticker reads of its SyncObj (quorum/raft/internals.py),
    on the loop's thread between ticks. The defaults tick at every event."""

    def __init__(
        self,
        queued: Callable[[], bool] = lambda: True,
        has_work: Callable[[], bool] = lambda: True,
        state: Callable[[], tuple] = tuple,
    ) -> None:
        self.queued = queued  # commands proposed, not yet in the log
        self.has_work = has_work  # a tick now would commit, apply or append
        self.state = state  # (state, term, leader): a change needs a tick


class TickThread:
    """Ticks a SyncObj built with ``autoTick`` off, as pysyncobj's tick
    thread does (until ``destroy`` or until the thread that built it ends),
    until ``hand_over`` moves the ticks to an event loop.

    ``tick(wait)`` is the SyncObj's ``_onTick``; ``period()`` its tick
    period; ``destroy()`` its ``_doDestroy``; ``wake()`` (any thread) ends a
    blocking poll. The ticks never run on two threads at once: the loop's
    first tick is scheduled by this thread after its last."""

    def __init__(
        self,
        tick: Callable[[float], None],
        period: Callable[[], float],
        destroy: Callable[[], None],
        wake: Callable[[], None],
        poller: EpollPoller,
    ) -> None:
        self._tick = tick
        self._period = period
        self._destroy = destroy
        self._wake = wake
        self._poller = poller
        self._builder = threading.current_thread()
        self._destroying = False
        self._hand_to: tuple[asyncio.AbstractEventLoop, Callable[[], bool]] | None = None
        self.loop_ticker: LoopTicker | None = None  # once handed over
        self._on_loop = threading.Event()
        self.notifier = None  # pysyncobj's pipe notifier, if any (set by the host)
        self.reads = RaftReads()  # what the loop's ticker reads of Raft (set by the host)
        self._thread = threading.Thread(target=self._run, name="raft-tick", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        if self.loop_ticker is not None:
            return self.loop_ticker.alive
        return self._thread.is_alive()

    def hand_over(self, loop: asyncio.AbstractEventLoop, when: Callable[[], bool]) -> None:
        """The ticks move to ``loop`` once ``when()`` (read on this thread,
        between ticks) is True; from the loop's thread."""
        self._hand_to = (loop, when)
        self._wake()

    def _run(self) -> None:
        try:
            while self._builder.is_alive() and not self._destroying:
                hand_to = self._hand_to
                if hand_to is not None and hand_to[1]():
                    if self._start_on(hand_to[0]):
                        return
                    self._hand_to = None  # the loop closed: keep ticking here
                try:
                    self._tick(self._period())
                except Exception:  # noqa: BLE001 - as pysyncobj's tick thread: log, wait, go on
                    log.exception("failed _onTick in _autoTickThread")
                    time.sleep(self._period())
            if self._destroying:
                self._destroy()
        except ReferenceError:  # the SyncObj is gone
            pass

    def _start_on(self, loop: asyncio.AbstractEventLoop) -> bool:
        ticker = LoopTicker(loop, self._tick, self._period, self._poller, self.notifier, self.reads)
        try:
            loop.call_soon_threadsafe(ticker.start)
        except RuntimeError:  # the loop closed
            return False
        self.loop_ticker = ticker
        self._on_loop.set()
        return True

    def destroy(self, timeout_s: float = 10.0) -> None:
        """Stops the ticks and destroys the SyncObj; returns once done. On
        the loop once handed over (its ticks stop first), else from any
        thread but the tick thread."""
        ticker = self.loop_ticker
        if ticker is not None:
            ticker.stop()
            self._destroy()
            return
        self._destroying = True
        self._wake()
        self._thread.join(timeout_s)
        ticker = self.loop_ticker  # handed over while we asked
        if ticker is not None:
            ticker.stop()
            self._destroy()


class LoopTicker:
    """The ticks on an event loop (the module's docstring). ``start`` and
    every other method on the loop's thread."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        tick: Callable[[float], None],
        period: Callable[[], float],
        poller: EpollPoller,
        notifier=None,
        raft: RaftReads | None = None,
    ) -> None:
        self.loop = loop
        self._notifier = notifier
        reads = raft or RaftReads()
        self._queued = reads.queued  # commands proposed, not yet in the log
        self._has_work = reads.has_work
        self._state = reads.state
        self._tick = tick
        self._period = period
        self._poller = poller
        self._timer: asyncio.Handle | None = None
        self._due = 0.0  # when the timer runs the next tick (the loop's clock)
        self._soon = False
        self.alive = False
        self._stopped = False
        self.thread_id: int | None = None
        self._pipe_notify: Callable[[], None] = lambda: None  # pysyncobj's, kept by start
        self.runs = 0  # loop callbacks that ticked (the bench's and the tests')

    def start(self) -> None:
        if self._stopped:  # destroyed before the loop got to it
            return
        self.thread_id = threading.get_ident()
        self._poller.blocking = False
        self.alive = True
        notifier = self._notifier
        if notifier is not None:
            self._pipe_notify = notifier.notify
            notifier.notify = self.notify  # internals.py lists this replacement
        self.loop.add_reader(self._poller.fileno(), self._on_ready)
        self.run()

    def on_loop_thread(self) -> bool:
        return self.alive and threading.get_ident() == self.thread_id

    def tick_soon(self) -> None:
        """A tick in this loop turn, after the callbacks already ready (a
        proposal: those of the same turn go out together)."""
        if not self._soon and self.alive:
            self._soon = True
            self.loop.call_soon(self.run)

    def _on_ready(self) -> None:
        if not self.alive:
            return
        poller = self._poller
        poller.dispatched = 0
        before = self._state()
        poller.dispatch(0)  # the events first: the tick then acts on them
        if not poller.dispatched:
            return
        if self._state() != before or self._has_work():
            self.run()
        else:
            # Nothing a tick must act on now (a second follower's answer to an
            # entry already committed, a heartbeat's): the periodic chores wait
            # for the timer, and the loop's ready callbacks (answers) go first.
            self._repoll()

    def _repoll(self) -> None:
        """The next tick as soon as the poll would wake for it (its wrappers
        compute when the leader's next AppendEntries is due)."""
        self._poller.poll(self._period())  # not blocking: keeps wait_s
        self._arm(self._poller.wait_s)

    def run(self) -> None:
        """One tick. Its poll dispatches nothing: events that came meanwhile
        keep the poller's descriptor readable, and the loop hands them to
        ``_on_ready`` after the callbacks this tick made ready (a settled
        write's answer goes first)."""
        self._soon = False
        if not self.alive:
            return
        self.runs += 1
        try:
            self._tick(self._period())  # ends in poller.poll: keeps wait_s
            wait = self._poller.wait_s
        except Exception:  # noqa: BLE001 - as pysyncobj's tick thread: log, wait, go on
            log.exception("failed _onTick in _autoTickThread")
            wait = self._period()
        self._arm(wait, sooner_only=False)

    def notify(self) -> None:
        """pysyncobj's pipe notifier, once the ticks run here. From another
        thread (the leader's sync thread): the pipe's write, which the loop
        watches. From the loop's thread: a proposal gets a tick in this
        loop turn; anything else (the orderer's word that a held commit push
        may go) only moves the next tick sooner, as the poll it would have
        woken computes it, after what the loop has ready (an answer)."""
        if not self.on_loop_thread():
            self._pipe_notify()
        elif self._queued():
            self.tick_soon()
        elif self.alive:
            self._repoll()

    def _arm(self, wait: float, sooner_only: bool = True) -> None:
        """The next tick ``wait`` seconds from now (or sooner, if one is due sooner)."""
        due = self.loop.time() + max(wait, 0.0)
        if self._timer is not None:
            if sooner_only and self._due <= due:
                return
            self._timer.cancel()
        # uvloop's call_at of a time already past is a plain Handle (no when()):
        # the due time is kept here.
        self._due = due
        self._timer = self.loop.call_at(due, self.run)

    def stop(self) -> None:
        self._stopped = True
        if not self.alive:
            return
        self.alive = False
        if self._notifier is not None:
            self._notifier.notify = self._pipe_notify
        if self._timer is not None:
            self._timer.cancel()
        self.loop.remove_reader(self._poller.fileno())
