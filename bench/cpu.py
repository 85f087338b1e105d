"""CPU time of the processes a benchmark watches, read from ``/proc`` (Linux only).

Every reader returns CPU seconds so far (user + system), or None when what it reads is not on
this machine (the broker runs elsewhere, a process is gone, not Linux): a meter then leaves
that part out instead of reporting zero.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from bench.backlog import ROOT

Reader = Callable[[], float | None]
_TICKS = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def read_stat(pid: int | str, proc: Path = PROC) -> tuple[str, list[str]] | None:
    """The command name and the fields after it of ``<proc>/<pid>/stat`` (None if gone); a
    thread's with ``proc`` its process's ``task`` directory."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    return head.partition("(")[2], rest.split()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far (None if it is gone or not on Linux)."""
    found = read_stat(pid)
    return None if found is None else own_cpu_seconds(found[1])


def own_cpu_seconds(fields: list[str]) -> float:
    """User + system CPU seconds from the fields :func:`read_stat` returns."""
    return (int(fields[11]) + int(fields[12])) / _TICKS


def of_pid(pid: int | None) -> Reader:
    """A reader of one process's CPU seconds (always None for ``pid`` None)."""
    return lambda: None if pid is None else cpu_seconds(pid)


def wait_seconds(pid: int, *, main_thread: bool = False, proc: Path = PROC) -> float | None:
    """Seconds the threads of ``pid`` (only its main thread with ``main_thread``) have spent
    runnable but waiting for a CPU so far: the second field of each thread's ``schedstat``
    (nanoseconds), summed, so that threads waiting at the same time count each. A thread that
    ended takes its share with it. None if the process is gone or the kernel keeps no such
    figures."""
    task = proc / str(pid) / "task"
    try:
        threads = [str(pid)] if main_thread else [entry.name for entry in os.scandir(task)]
        waited = sum(int((task / t / "schedstat").read_text().split()[1]) for t in threads)
    except (OSError, IndexError, ValueError):
        return None  # gone (a thread ending mid-read counts as a missed reading, not a zero)
    return waited / 1e9


def waits_of(pid: int | None, *, main_thread: bool = False) -> Reader:
    """A reader of :func:`wait_seconds` (always None for ``pid`` None)."""
    return lambda: None if pid is None else wait_seconds(pid, main_thread=main_thread)


def of_pids(pids: list[int]) -> Reader:
    """A reader of several processes' CPU seconds together (None once any is gone)."""
    return summed([of_pid(pid) for pid in pids])


def summed(readers: list[Reader]) -> Reader:
    """A reader of several readers' figures together (None once any reads None)."""

    def read() -> float | None:
        figures = [read_one() for read_one in readers]
        return None if None in figures else sum(f or 0.0 for f in figures)

    return read


def broker_pid() -> int | None:
    """The local broker's pid (``make up`` writes it), None when Kafka runs elsewhere."""
    try:
        return int((ROOT / "var" / "kafka" / "kafka.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def postgres_cpu_seconds(proc: Path = PROC) -> float | None:
    """CPU seconds of every PostgreSQL process on this machine so far: the server's own
    processes, every backend and autovacuum worker, and (through the postmaster's counts of
    its waited-for children) those that have exited. None when none runs here."""
    if not proc.is_dir():
        return None
    total, seen = 0.0, False
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        found = read_stat(entry.name, proc)
        if found is None or found[0] != "postgres":
            continue
        fields = found[1]
        seen = True
        total += sum(int(f) for f in fields[11:15]) / _TICKS
    return total if seen else None


class CpuMeter:
    """CPU used by named parts (each a :data:`Reader`) between :meth:`start` and a reading;
    with readers of :func:`waits_of`, the time they waited for a CPU."""

    def __init__(self, readers: dict[str, Reader]) -> None:
        self.readers = readers
        self._before: dict[str, float] = {}
        self.started = 0.0

    def start(self) -> None:
        self.started = time.monotonic()
        self._before = {n: c for n, read in self.readers.items() if (c := read()) is not None}

    def seconds(self) -> dict[str, float]:
        """CPU seconds of each part since :meth:`start` (parts unreadable then or now left out)."""
        used = {}
        for name, before in self._before.items():
            after = self.readers[name]()
            if after is not None:
                used[name] = after - before
        return used

    def cores(self) -> dict[str, float]:
        """Each part's CPU since :meth:`start` per second elapsed (1.0: one core busy)."""
        elapsed = time.monotonic() - self.started
        if elapsed <= 0:
            return {}
        return {name: round(s / elapsed, 3) for name, s in self.seconds().items()}
