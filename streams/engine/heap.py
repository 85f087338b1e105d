"""How a processor's heap gives memory back to the system (glibc's malloc; a no-op elsewhere).

Two controls, both about the same problem: RocksDB's compactions and reads and librdkafka's
fetches allocate large buffers on their own threads, and glibc keeps what they free inside its
arenas unless told otherwise, so a process's RSS after a restore or a burst depended on where
those buffers happened to land rather than on the state it holds.

* :func:`map_large_blocks`: blocks of :data:`MMAP_THRESHOLD` bytes or more are mapped on their
  own and unmapped when freed. glibc's default starts there too but raises the threshold each
  time such a block is freed (up to 32 MiB), after which the buffers come from the arenas and
  their freed pages stay resident. Measured (3 runs each, one processor restoring 1,000,000
  admission records, 2 cores): RSS once RocksDB's post-restore compaction had finished
  107-129 MiB with the default, 78-81 MiB with this; the largest RSS in the 3 s after the
  restore 136-143 and 105-116 MiB.
* :func:`release_freed_memory`: return what is free now (after a large restore).
* :class:`Release` (:data:`RELEASE`): while a process has a RocksDB store open
  (``store.py`` holds it), return what is free every :data:`RELEASE_EVERY_S`. Smaller
  blocks (below the threshold) freed by RocksDB's compaction threads stay in those threads'
  arenas, fragmented by the blocks still alive beside them, until someone trims. Measured
  (one processor restoring 5,000,000 admission records, 2 cores, 3 interleaved pairs): RSS
  6 s after the restore, once the compaction that follows it had finished, 70 to 71 MiB
  with this and 79 to 83 without; one ``malloc_trim`` took 1.8 ms, 0.06 to 0.12 ms when
  nothing was free.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("sluicegate.heap")

MMAP_THRESHOLD = 128 * 1024
"""glibc's own initial threshold, kept fixed instead of growing."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h

_done = False
_lock = threading.Lock()


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def map_large_blocks() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` (once per process; later calls do
    nothing). True when glibc accepted it (or had already); False without glibc."""
    global _done  # noqa: PLW0603 - a process-wide allocator setting, made once
    with _lock:
        if _done:
            return True
        libc = _libc()
        try:
            accepted = libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        except AttributeError:  # a C library without mallopt
            accepted = False
        _done = accepted
        return accepted


def release_freed_memory() -> None:
    """Give the heap that a large restore freed back to the system (glibc only).

    The fetch buffers and message objects of a restore are freed when it ends, but glibc keeps
    the pages in its arenas (librdkafka's threads allocate, the main thread frees), so the
    process stayed at its peak: 470 MiB after restoring 1,000,000 records, 112 MiB after this.
    Elsewhere (another C library) it does nothing.
    """
    libc = _libc()
    try:
        if libc is not None:
            libc.malloc_trim(0)
    except AttributeError:
        return


RELEASE_EVERY_S = 1.0
"""How often :class:`Release` returns free memory (read at each wait)."""


class ReleaseNotHeld(RuntimeError):
    """:meth:`Release.let_go` without a :meth:`Release.hold` to match (a holder let go twice)."""


class Release:
    """Returns the heap's free memory to the system every :data:`RELEASE_EVERY_S` while at
    least one holder holds it (one daemon thread, started by the first :meth:`hold`, stopped
    by the last :meth:`let_go`).

    Guarantees: RSS no longer keeps what RocksDB's background threads freed (it follows what
    the process holds, within one interval); the cost is one ``release`` call per interval,
    which locks each arena for as long as it takes (measured 0.06 to 1.8 ms). It does not
    bound what is in use: the block cache and memtables have their own caps (``rocks.py``).
    """

    def __init__(self, release: Callable[[], None] = release_freed_memory) -> None:
        self._release = release
        self._lock = threading.Lock()
        self._holders = 0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def holders(self) -> int:
        return self._holders

    def hold(self) -> None:
        with self._lock:
            self._holders += 1
            if self._holders == 1:
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop,), name="heap-release", daemon=True
                )
                self._thread.start()

    def let_go(self) -> threading.Thread | None:
        """Drop one hold; the last one stops the thread (returned, for a caller that waits)."""
        with self._lock:
            if self._holders == 0:
                raise ReleaseNotHeld("the heap release was let go more often than held")
            self._holders -= 1
            if self._holders or self._stop is None:
                return None
            self._stop.set()
            stopped, self._stop, self._thread = self._thread, None, None
            return stopped

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(RELEASE_EVERY_S):
            try:
                self._release()
            except Exception:  # memory left resident is no reason to stop releasing it
                log.exception("returning freed memory to the system failed")


RELEASE = Release()
"""The process's: every open :class:`~streams.engine.store.PartitionStore` holds it."""
