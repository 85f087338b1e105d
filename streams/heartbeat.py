"""Heartbeats from a component to the process that supervises it (``sluicegate serve``).

``serve`` starts each component with the write end of a pipe and names its descriptor in
``SLUICEGATE_HEARTBEAT_FD`` (:data:`ENV`). The component beats, one byte at a time, while it
is worth keeping; ``serve`` kills (SIGKILL) and restarts a component from which no beat came
for its liveness window. A process frozen by SIGSTOP beats no more, whatever its threads were
doing, and neither does one whose loop stopped coming round.

What "worth keeping" means is each component's to say, and it must be said from the work
itself, never from a thread that beats whatever the work does:

- an engine instance (processor, gate, gateway) beats while its status is healthy
  (:func:`streams.engine.status.healthy`: running with a loop that came round within its
  stall limit, or starting, restoring or starting over);
- the projector and the branch worker beat while their loop came round within their stall
  limit (or, for the projector, while it waits for PostgreSQL);
- the webhook and the paper venue beat from their event loop (:meth:`Heartbeat.beat_async`),
  so a blocked event loop beats no more.

A component also stops when ``serve`` dies, however it dies: :func:`stop_with_supervisor`
asks the kernel to send it SIGTERM then (``PR_SET_PDEATHSIG``), so a ``serve`` killed with
SIGKILL leaves no component running on, holding the webhook's port or a partition's work.

Guarantees: :meth:`Heartbeat.beat` never blocks and never raises. A full pipe (a supervisor
that stopped reading) drops the beat; a closed one (the supervisor gone) ends the heartbeat
for good. Without :data:`ENV` (a component started by hand, or by another supervisor) there is
no heartbeat and nothing is beaten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping

from streams.text import parse_whole

log = logging.getLogger("sluicegate.heartbeat")

ENV = "SLUICEGATE_HEARTBEAT_FD"
"""The variable naming the inherited descriptor a component beats on."""

SUPERVISOR_ENV = "SLUICEGATE_SUPERVISOR_PID"
"""The variable naming the pid of the ``serve`` that started this process."""

_PR_SET_PDEATHSIG = 1

INTERVAL_S = 1.0
"""Seconds between beats: the supervisor's liveness window is many of them."""

MIN_GAP_S = INTERVAL_S / 2
"""Beats closer than this to the last one are not written (a loop may call :meth:`beat` on
every turn); half the interval, so a beat every :data:`INTERVAL_S` is never dropped."""


class Heartbeat:
    """Beats on the pipe descriptor ``fd`` (its write end, owned by this object)."""

    def __init__(self, fd: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.fd = fd
        self.clock = clock
        self.beats = 0
        """Beats written (dropped ones not counted)."""
        self.closed = False
        self._last = float("-inf")
        with contextlib.suppress(OSError):
            os.set_blocking(fd, False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Heartbeat | None:
        """The heartbeat :data:`ENV` names, or ``None`` when it names none: unset, not a
        number, or not an open pipe of this process (logged, never fatal: a component runs
        the same with or without a supervisor).

        Read from this process's environment, :data:`ENV` is removed from it: a process this
        one starts does not inherit the descriptor, and must not take whatever else later
        holds its number for a heartbeat."""
        raw = (os.environ.pop(ENV, "") if environ is None else environ.get(ENV, "")).strip()
        if not raw:
            return None
        fd = parse_whole(raw, 2**31 - 1)
        if fd is None:
            log.warning("%s=%r is not a file descriptor; no heartbeat", ENV, raw)
            return None
        try:
            is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError as e:
            log.warning("%s=%d is not open (%s); no heartbeat", ENV, fd, e.strerror)
            return None
        if not is_pipe:
            log.warning("%s=%d is not a pipe; no heartbeat", ENV, fd)
            return None
        return cls(fd)

    def beat(self) -> None:
        """One beat, unless one was written less than :data:`MIN_GAP_S` ago."""
        if self.closed:
            return
        now = self.clock()
        if now - self._last < MIN_GAP_S:
            return
        try:
            os.write(self.fd, b".")
        except BlockingIOError:
            return  # the supervisor is not reading; it will hear the next one
        except OSError:
            # EPIPE (the supervisor exited) or EBADF: nobody will ever read another beat.
            self.close()
            return
        self._last = now
        self.beats += 1

    def keep_beating(
        self, alive: Callable[[], bool], stop: threading.Event | None = None
    ) -> threading.Thread:
        """Beat from a daemon thread every :data:`INTERVAL_S` while ``alive()`` says so, until
        ``stop`` is set or the heartbeat closes. ``alive`` must judge the work itself (a loop
        that came round lately), or the thread would beat for a wedged component."""
        done = stop or threading.Event()

        def run() -> None:
            while not self.closed and not done.is_set():
                try:
                    worth_keeping = alive()
                except Exception:
                    log.exception("liveness check failed; not beating")
                    worth_keeping = False
                if worth_keeping:
                    self.beat()
                done.wait(INTERVAL_S)

        thread = threading.Thread(target=run, name="heartbeat", daemon=True)
        thread.start()
        return thread

    async def beat_async(self, stop: asyncio.Event) -> None:
        """Beat from the running event loop until ``stop`` is set: a loop blocked by a
        handler (or frozen with the process) beats no more."""
        while not self.closed and not stop.is_set():
            self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), INTERVAL_S)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                os.close(self.fd)


def signal_on_parent_death(signum: int, parent: int) -> bool:
    """Ask the kernel to send this process ``signum`` when its parent exits
    (``PR_SET_PDEATHSIG``, Linux only), and say whether ``parent`` is still its parent: if
    not, it died before the request could be made, and no signal will come."""
    if sys.platform.startswith("linux"):
        import ctypes  # only a supervised process pays for it, not every command's start

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
            log.warning(
                "cannot ask for a signal on the parent's death (errno %d)", ctypes.get_errno()
            )
    return os.getppid() == parent


def stop_with_supervisor(environ: MutableMapping[str, str] | None = None) -> bool:
    """Under ``serve`` (:data:`SUPERVISOR_ENV` set), have the kernel send this process
    SIGTERM when ``serve`` exits, and say whether ``serve`` is still there.

    ``False`` means it died before this process could ask (it is no longer the parent): the
    caller should not start. Read from this process's environment, the variable is removed
    from it, so a process this one starts is not taken for a child of ``serve``.
    """
    source = os.environ if environ is None else environ
    supervisor = parse_whole(source.pop(SUPERVISOR_ENV, "").strip(), 2**31)
    return supervisor is None or signal_on_parent_death(signal.SIGTERM, supervisor)
