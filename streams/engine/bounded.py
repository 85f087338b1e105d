"""Driver calls that cannot wedge the loop: each runs on a helper thread, waited for in bounds.

librdkafka's transactional calls take a timeout, and one of them does not always keep it:
``send_offsets_to_transaction`` can block for good while the group coordinator is away or
was replaced (librdkafka issues 5456 and 5511; seen here when the broker restarted while a
gateway's sends were in flight: the call had been blocked 90 s past its 20 s timeout, and
the instance processed nothing more). A call that never returns leaves no error to handle:
the loop just stops.

:meth:`BoundedCalls.call` runs ``call`` on a daemon helper thread and waits for it at most
``wait_s`` (not counting time the process spent stopped): its result or exception comes
back as if called here, and a call still running then raises :class:`CallHung`. The caller
must then treat the handle as lost (the transaction calls make it
:class:`~streams.errors.TransactionUnresolved`, and the processor starts over with a new
producer, whose ``init_transactions`` fences the old one). The hung call keeps its thread
and its handle alive (a handle destroyed under a call in progress would crash the process);
the next call gets a new helper thread. A daemon thread never holds up the exit.

Cost: a hand-over to the helper thread and back, 45 to 52 us a call measured (2 cores), made
twice per transaction (offsets, commit), never per record.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")

SLICE_S = 1.0
"""A call is waited for in slices of this much, so that time the process spent stopped
(SIGSTOP, a frozen VM) is told apart from time the call took."""
PAUSED_S = 1.0
"""A slice that ended this much later than it was given was a pause: it is not counted."""


class CallHung(Exception):
    """A call did not return within its wait; it may still be running, and may yet finish."""


class _Helper:
    """One daemon thread that runs the calls handed to it, one at a time."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="driver-call", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job()


class BoundedCalls:
    """Runs calls on a helper thread, each waited for at most its own ``wait_s``."""

    def __init__(self) -> None:
        self._helper: _Helper | None = None
        self._lock = threading.Lock()
        self.abandoned = 0
        """Helper threads left behind in a call that did not return in time."""

    def call(self, call: Callable[[], T], wait_s: float, what: str) -> T:
        """``call()``'s result (or its exception); :class:`CallHung` naming ``what`` if it
        has not returned ``wait_s`` seconds after it was handed over."""
        done: Future[T] = Future()

        def job() -> None:
            try:
                done.set_result(call())
            except BaseException as e:  # handed back to the caller, raised there
                done.set_exception(e)

        with self._lock:
            if self._helper is None:
                self._helper = _Helper()
            helper = self._helper
            helper.jobs.put(job)
        left = wait_s
        while True:
            piece = min(left, SLICE_S)
            started = time.monotonic()
            try:
                return done.result(piece)
            except FutureTimeout:
                pass
            if time.monotonic() - started <= piece + PAUSED_S:
                left -= piece  # a stretch this process spent stopped does not count
            if left <= 0:
                break
        with self._lock:
            if self._helper is helper:
                self._helper = None
                self.abandoned += 1
                helper.jobs.put(None)  # it ends once (if ever) the call returns
        raise CallHung(f"{what} did not return within {wait_s:.0f} s")
