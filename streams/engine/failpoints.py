"""Failpoints: a real ``kill -9`` (or ``SIGSTOP``) from inside, at a named commit boundary.

The crash drills need the process to die at an exact point: after a transaction holding a
given record committed and before anything else happened, or just before it commits, or
between a venue request and the feedback of its answer. A signal sent from outside can only
land somewhere near such a point; a failpoint lands on it. ``SLUICEGATE_FAILPOINTS`` arms them,
comma-separated::

    SLUICEGATE_FAILPOINTS="after_commit:AttemptStarted[slot=entry],before_send:SendRequest!stop"

Each entry is ``POINT:TYPE[FIELD=VALUE]...[!ACTION]``:

* ``POINT`` is where the engine (or a shell) checks: ``before_commit`` (the transaction's
  records and offsets are sent, the commit is not), ``after_commit`` (committed; no effect
  of it performed yet), ``before_effect`` / ``after_effect`` (an effect about to be
  performed / performed, its answer not fed back yet) and ``before_send`` (the gateway's own
  point: every check passed, the venue request is about to leave);
* ``TYPE`` is the class name of a record of that transaction (or of the effect), and each
  ``[FIELD=VALUE]`` must equal ``str(getattr(record, FIELD))``;
* ``ACTION`` is ``kill`` (default: ``SIGKILL`` to this process, exactly what ``kill -9``
  does) or ``stop`` (``SIGSTOP``: the process freezes until someone sends ``SIGCONT``).

Every failpoint fires at most once per process. Unset, :func:`from_env` returns an empty set
whose :meth:`Failpoints.check` is one falsy test; nothing else is done on the hot path.
A malformed entry is a :class:`FailpointError` at start-up, never ignored.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streams.errors import StreamsError

log = logging.getLogger("sluicegate.failpoints")

ENV = "SLUICEGATE_FAILPOINTS"
POINTS = frozenset(
    {"before_commit", "after_commit", "before_effect", "after_effect", "before_send"}
)
ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}
_ENTRY = re.compile(
    r"(?P<point>[a-z_]+):(?P<type>[A-Za-z][A-Za-z0-9_]*)"
    r"(?P<fields>(?:\[[A-Za-z_][A-Za-z0-9_]*=[^\]]*\])*)(?:!(?P<action>[a-z]+))?"
)
_FIELD = re.compile(r"\[([A-Za-z_][A-Za-z0-9_]*)=([^\]]*)\]")


class FailpointError(StreamsError):
    """``SLUICEGATE_FAILPOINTS`` holds an entry that cannot be used; the message names it."""


@dataclass(frozen=True)
class Failpoint:
    """One armed failpoint (see the module docstring)."""

    point: str
    record_type: str
    fields: tuple[tuple[str, str], ...]
    action: str
    text: str

    def matches(self, record: object) -> bool:
        if type(record).__name__ != self.record_type:
            return False
        return all(str(getattr(record, name, None)) == value for name, value in self.fields)


class Failpoints:
    """The armed failpoints of this process."""

    def __init__(self, armed: Iterable[Failpoint] = ()) -> None:
        self._armed = list(armed)

    def __bool__(self) -> bool:
        return bool(self._armed)

    def check(self, point: str, records: Iterable[object]) -> None:
        """Fire the first armed failpoint of ``point`` that one of ``records`` matches."""
        if not self._armed:
            return
        for failpoint in self._armed:
            if failpoint.point != point:
                continue
            if any(failpoint.matches(record) for record in records):
                self._armed.remove(failpoint)
                _fire(failpoint)
                return


def _fire(failpoint: Failpoint) -> None:
    log.warning(
        "failpoint %s: %s this process (pid %d)", failpoint.text, failpoint.action, os.getpid()
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    if failpoint.action == "stop":
        # Sent to the process, SIGSTOP may be taken by another thread, and this one runs on
        # (into its venue request) until the group stop reaches it; sent to this thread, it
        # stops here, on its way back from the call, and the whole process with it.
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        return
    os.kill(os.getpid(), ACTIONS[failpoint.action])


def parse(text: str) -> Failpoints:
    """The failpoints of a ``SLUICEGATE_FAILPOINTS`` value (empty text: none)."""
    armed: list[Failpoint] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        match = _ENTRY.fullmatch(entry)
        if match is None:
            raise FailpointError(
                f"{ENV}: {entry!r} is not POINT:TYPE[FIELD=VALUE]...[!kill|!stop] "
                "(for example after_commit:AttemptStarted[slot=entry])"
            )
        point, action = match["point"], match["action"] or "kill"
        if point not in POINTS:
            raise FailpointError(f"{ENV}: {entry!r}: point must be one of {sorted(POINTS)}")
        if action not in ACTIONS:
            raise FailpointError(f"{ENV}: {entry!r}: action must be kill or stop")
        fields = tuple(_FIELD.findall(match["fields"]))
        armed.append(Failpoint(point, match["type"], fields, action, entry))
    return Failpoints(armed)


def from_env(env: Mapping[str, str] | None = None) -> Failpoints:
    """The failpoints ``SLUICEGATE_FAILPOINTS`` arms (none when unset)."""
    return parse((os.environ if env is None else env).get(ENV, ""))
