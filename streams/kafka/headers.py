"""Record headers: the names Sluicegate writes, and reading any header as text.

A dead letter (``schemas.topics.DEAD_LETTERS``) says why, where from and what kind of
failure in three headers, :data:`REASON`, :data:`ORIGIN` and :data:`KIND`; ``sluicegate
replay`` prints every header and the read model keeps those three (``projections/rows.py``).
"""

from __future__ import annotations

REASON = "sluicegate.reason"
"""Why a stream app could not decide the record (a dead letter's)."""
ORIGIN = "sluicegate.origin"
"""Where the record came from: ``topic[partition]@offset``, ``@first..last`` for a gap."""

KIND = "sluicegate.kind"
"""What went wrong, one of :data:`KINDS` (a dead letter written before 0.2.0 has none)."""
UNDECODABLE = "undecodable"
"""An input record the app cannot decode; its bytes are the dead letter's value."""
UNRECORDABLE = "unrecordable"
"""A record, timer or answer whose outputs the broker refuses (too large, say), isolated."""
UNREAD = "unread"
"""Input offsets that left retention before the instance read them: never decided."""
MOVED = "moved"
"""An input partition read again from its start (its topic deleted and created again, or
found shorter than the position): nothing went unread."""
KINDS = (UNDECODABLE, UNRECORDABLE, UNREAD, MOVED)

Headers = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]]
"""A consumed message's headers, as confluent-kafka gives them."""


def as_text(headers: Headers | None) -> dict[str, str]:
    """Each header's value as text (UTF-8, undecodable bytes replaced; none as ``""``); of
    a name given twice, the last."""
    if not headers:
        return {}
    pairs = headers.items() if isinstance(headers, dict) else headers
    return {
        name: value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")
        for name, value in pairs
    }
