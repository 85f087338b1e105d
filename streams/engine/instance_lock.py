"""One process per instance state directory: an exclusive ``flock`` held while it runs.

An instance's stores live in ``<state dir>/<app>/<instance id>``. Two processes started on
one host with the same ``--instance-id`` (a supervisor that restarts an instance it thinks
hung, an operator who starts it twice) would share that directory: the second wipes, opens
and checkpoints the store directories the first has open, and its ``init_transactions``
fences the first. Kafka's fence keeps the outputs exactly-once, but not the first's local
files, and the fence takes the work from the instance that was doing it.

:class:`InstanceLock` is taken before anything else (before the producer is initialised,
before a store is opened) and held until the instance has closed everything; the second
process stops at once with :class:`InstanceAlreadyRunning`, naming the process that holds
the directory. The lock belongs to the open file, not to the file's presence: the kernel
releases it when the process ends, however it ends (SIGKILL included), so a stale
``instance.lock`` never blocks a restart. A frozen process (SIGSTOP, or not answering) still
holds it: the operator ends it (``kill -9 PID``) before starting another.

This guards one host (one filesystem). Instances with the same id on two hosts do not share
a directory; there the transactional fence is what stops the older one.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from pathlib import Path

from streams.errors import InstanceAlreadyRunning, StateStoreFailed

LOCK_FILE = "instance.lock"

log = logging.getLogger("sluicegate.processor")


class InstanceLock:
    """The exclusive lock of the instance directory ``directory``; ``who`` names the
    instance (``app/instance-id``) in messages."""

    def __init__(self, directory: Path, who: str) -> None:
        self.path = directory / LOCK_FILE
        self.who = who
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`InstanceAlreadyRunning` if another process (or
        another :class:`InstanceLock` in this one) holds it; :class:`StateStoreFailed` if the
        directory cannot be created or the file opened. Writes this process's pid into the
        file, for the next one's message."""
        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StateStoreFailed(
                f"{self.who}: cannot open its lock file {self.path}: {e.strerror or e}; "
                "check that the state directory (SLUICEGATE_STATE_DIR) is writable"
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_pid(fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StateStoreFailed(
                    f"{self.who}: cannot lock {self.path}: {e.strerror or e}"
                ) from e
            raise InstanceAlreadyRunning(self._refusal(holder)) from None
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:  # a full disk: the pid only names us in the next one's refusal
            log.warning("%s: could not write its pid into %s: %s", self.who, self.path, e)

    def release(self) -> None:
        """Give the lock up (closing the file releases it); nothing if not held. The file
        stays: a process that opened it just before it was removed would lock the removed
        file while the next one locks a new file, and both would run."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _refusal(self, holder: int | None) -> str:
        by = f"pid {holder}" if holder is not None else "another process"
        if holder == os.getpid():
            by += " (this process)"
        return (
            f"{self.who} is already running on this host: {by} holds its state directory "
            f"{self.path.parent}; this one stops without touching "
            "Kafka or the stores. Give this instance another --instance-id, or, if that "
            "process is hung, end it (kill -9) and start this one again"
        )


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() else None
