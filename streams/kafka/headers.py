"""Record headers: the names Sluicegate writes, and reading any header as text.

A dead letter (``schemas.topics.DEAD_LETTERS``) says why and where from in two headers,
:data:`REASON` and :data:`ORIGIN`; ``sluicegate replay`` prints every header and the read
model keeps those two (``projections/rows.py``).
"""

from __future__ import annotations

REASON = "sluicegate.reason"
"""Why a stream app could not decide the record (a dead letter's)."""
ORIGIN = "sluicegate.origin"
"""Where the record came from: ``topic[partition]@offset``, ``@first..last`` for a gap."""

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
