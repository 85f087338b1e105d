"""Python's cyclic garbage collector paused around the bulk loops (restore, projector).

Those loops make and drop a few objects per record, none of them in a reference cycle:
reference counting frees every one of them. The cyclic collector still runs whenever
allocations outnumber frees by a few hundred, and each of its passes walks every object the
loop is holding (a batch in flight, the rows a rebuild holds back), over and over. Measured
here (py-spy, 2 cores): 11% of a rebuild's samples in ``gc_collect_main``; the same rebuild
of 83,148 records ran 17,500 to 24,300 records/s with the collector on and 24,200 to 28,800
with it paused, and the live projector 16,300 to 19,600 against 18,000 to 22,700 (interleaved
runs). A restore spent a tenth of its time in it.

:func:`paused` turns automatic collection off while at least one holder is inside (it is
process-wide: two projectors in one process share it) and back on when the last one leaves,
if it was on when the first one came in. Cycles made meanwhile, by the loop or by anything
else in the process, are not lost: :meth:`Pause.tick` runs a full collection every
:data:`COLLECT_EVERY_S` seconds, so memory held by cyclic garbage is bounded by what the
process makes in that interval, and what is left when the pause ends is in the youngest
generation, which the collector, on again, goes through at its next allocations. Leaving
runs no full collection itself: one takes about 45 ms in a processor (60,000 objects), and a
processor's assignment restores partition after partition.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

COLLECT_EVERY_S = 30.0
"""Seconds between the full collections a long pause runs (:meth:`Pause.tick`)."""

_lock = threading.Lock()
_holders = 0
_was_enabled = False


class Pause:
    """A holder's handle: :meth:`tick` collects when :data:`COLLECT_EVERY_S` have passed."""

    def __init__(self, every_s: float, clock: Callable[[], float]) -> None:
        self._every_s = every_s
        self._clock = clock
        self._last = clock()
        self.collections = 0
        """Full collections this holder ran (for tests and operators)."""

    def tick(self) -> None:
        """Call between batches: a full collection once the interval has passed."""
        now = self._clock()
        if now - self._last >= self._every_s:
            gc.collect()
            self.collections += 1
            self._last = self._clock()


@contextmanager
def paused(
    every_s: float = COLLECT_EVERY_S, clock: Callable[[], float] = time.monotonic
) -> Iterator[Pause]:
    """Automatic cyclic collection off inside (see the module docstring); nests and may be
    held by several threads at once."""
    global _holders, _was_enabled  # noqa: PLW0603 - the collector is one per process
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield Pause(every_s, clock)
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
