"""The pid file of ``sluicegate serve --pid-file``: ``NAME PID`` lines, serve's own first.

It names each component *that is running now*; serve rewrites it (:func:`write`) within
0.2 s of a child starting or exiting and removes it (:func:`release`) when it stops. A
reader never sees half of it: it is written beside and renamed over. It is how a script
signals one component (``kill -9 "$(awk '$1 == "processor" {print $2}' FILE)"``) without
matching process names, which could hit any process on the machine. A file that names a
live serve is refused to a second one (:func:`claim`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from sluicegate.errors import SluicegateError
from streams.text import parse_whole

OWNER = "serve"


def claim(path: Path) -> None:
    """Make ``path`` this serve's: :class:`SluicegateError` if a live serve holds it."""
    owner = read(path).get(OWNER)
    if owner is not None and owner != os.getpid() and alive(owner):
        raise SluicegateError(
            f"{path} belongs to a running sluicegate serve (pid {owner}); stop it first or "
            "give this one another --pid-file"
        )
    path.parent.mkdir(parents=True, exist_ok=True)


def write(path: Path, running: Iterable[tuple[str, int]]) -> None:
    """Replace ``path`` with serve's line and one per ``(name, pid)`` of ``running``."""
    lines = [f"{OWNER} {os.getpid()}", *(f"{name} {pid}" for name, pid in running)]
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("\n".join(lines) + "\n")
    os.replace(temporary, path)


def release(path: Path) -> None:
    """Remove ``path`` if it is still this serve's."""
    if read(path).get(OWNER) == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read(path: Path) -> dict[str, int]:
    """Name to pid of each well-formed line of ``path`` (nothing when it does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, pid_text = line.partition(" ")
        pid = parse_whole(pid_text.strip(), 2**31)
        if pid:
            found[name] = pid
    return found


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
