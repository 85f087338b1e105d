"""When ``sluicegate serve`` restarts a child, and when it calls a silent one frozen.

Pure arithmetic on monotonic seconds: the liveness window and its parsing, the grace for a
child's first beat, and the back-off between restarts (``supervisor.py`` applies them).
"""

from __future__ import annotations

from sluicegate.errors import SluicegateError
from streams.core.durations import parse_duration
from streams.core.errors import InvalidValue
from streams.text import parse_whole

LIVENESS_ENV = "SLUICEGATE_SERVE_LIVENESS"
DEFAULT_LIVENESS_S = 30.0
DEFAULT_LIVENESS = f"{DEFAULT_LIVENESS_S:.0f}s"


def parse_liveness(text: str) -> float | None:
    """A liveness window in seconds (``30s``, ``2m``, ``5000`` ms...), ``None`` for ``off``
    or ``0``; :class:`SluicegateError` naming the accepted forms otherwise. Less than 3 s is
    refused: beats come every second, and a window of fewer would kill children that a
    moment's load delayed."""
    cleaned = text.strip().lower()
    if cleaned in ("off", "0", "none"):
        return None
    try:
        milliseconds = parse_whole(cleaned, 10**15)
        seconds = parse_duration(cleaned if milliseconds is None else milliseconds) / 1000
    except InvalidValue as e:
        raise SluicegateError(f"liveness window {text!r}: {e}; or off") from None
    if seconds < 3:
        raise SluicegateError(f"liveness window {text!r}: at least 3s, or off")
    return seconds


FIRST_BEAT_S = 60.0
"""The least a child is given for its first beat: starting (imports, clients, the first
connection) takes seconds, and many children start at once on a small machine."""


STEADY_S = 60.0
"""A child that ran this long before it exited is restarted after 1 s again, however often it
exited before: the back-off is for a child that cannot start, not for one that crashes once
a day (without the reset, its sixth exit in a week would keep its component down for 30 s)."""


def back_off(in_a_row: int, ran_s: float) -> tuple[int, int]:
    """After a child's exit: its exits in a row (``in_a_row`` before this one, unless it ran
    :data:`STEADY_S`) and the seconds to wait before starting it again (1, 2, 4 ... 30)."""
    exits = 1 if ran_s >= STEADY_S else in_a_row + 1
    return exits, min(2 ** min(exits - 1, 5), 30)


def silent_for(now: float, started_at: float, heard_at: float | None) -> float:
    """Seconds since a child last beat (since it started, before its first beat)."""
    return now - (started_at if heard_at is None else heard_at)


def overdue(now: float, started_at: float, heard_at: float | None, liveness_s: float) -> bool:
    """Whether a child has been silent too long: ``liveness_s`` after its last beat, or
    ``max(liveness_s, FIRST_BEAT_S)`` after its start when it never beat."""
    allowed = liveness_s if heard_at is not None else max(liveness_s, FIRST_BEAT_S)
    return silent_for(now, started_at, heard_at) > allowed
