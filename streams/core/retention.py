"""Retention periods of a destination, and the horizon a delivery is judged against.

A run's record is evicted ``retention + 1 h`` after its source time, under the retention of
the revision that admitted it. A delivery that finds no record is either the first copy of
its occurrence or a late copy of an evicted one, and admission cannot tell which. So it is
judged against the **smallest retention in effect at any time between its source time and
now** (:func:`smallest_retention`): whatever the retention was when a copy could have been
admitted, the record outlived the horizon this rule applies, so an evicted occurrence is
never admissible again.

Consequences: **a lowering narrows the horizon at once** (for every occurrence); **a raise
widens it only for occurrences whose source time is later than the raise** (by more than
:data:`CHANGE_MARGIN_MS`). The margin covers the difference between the clock of the machine
that applied a revision and the processor's, and the time a processor takes to read a new
revision: each period is counted from that long before it began to that long after it ended.

``WorkflowRevised.retention_history`` carries the periods (``"<from ms>:<retention ms>"``,
oldest first, the last one being ``retention_ms``); :func:`next_history` computes it for a
new revision, drops periods too old to matter, and, should a destination flap its retention
more than :data:`MAX_PERIODS` times within a horizon, merges the oldest two into one with the
smaller retention (stricter, never looser). A v1 record has no history: its retention counts
as in effect since ever.
"""

from __future__ import annotations

import re
from functools import lru_cache

from schemas.events import WorkflowRevised
from streams.core.durations import MS_PER_MINUTE
from streams.core.limits import MAX_CLOCK_UNCERTAINTY_MS

CHANGE_MARGIN_MS = 5 * MS_PER_MINUTE
"""How far a retention period is stretched at both ends (clock skew + revision propagation)."""
MAX_PERIODS = 64
"""Most periods a revision carries."""

Period = tuple[int, int]
"""``(from epoch ms, retention ms)``."""
_ENTRY_RE = re.compile(r"(-?[0-9]{1,18}):([0-9]{1,18})")
"""A ``retention_history`` entry; ASCII digits only (``str.isdigit`` accepts ``"²"``, which
``int`` refuses), few enough for an Avro long."""


def periods(workflow: WorkflowRevised) -> tuple[Period, ...]:
    """The revision's retention periods, oldest first; the last is ``retention_ms``.

    Entries that do not read as ``"<int>:<int>"`` (a record not written by :func:`revise`)
    are skipped; a history that does not end with the current retention gets it appended.
    """
    return _periods(workflow.retention_history, workflow.applied_at_ms, workflow.retention_ms)


@lru_cache(maxsize=1024)
def _periods(history: tuple[str, ...], applied_at_ms: int, retention_ms: int) -> tuple[Period, ...]:
    parsed: list[Period] = []
    for entry in history:
        match = _ENTRY_RE.fullmatch(entry)
        if match:
            parsed.append((int(match[1]), int(match[2])))
    if not parsed or parsed[-1][1] != retention_ms:
        parsed.append(
            (max(applied_at_ms, parsed[-1][0]) if parsed else applied_at_ms, retention_ms)
        )
    return tuple(parsed)


def smallest_retention(workflow: WorkflowRevised, source_time_ms: int, now: int) -> int:
    """The smallest retention in effect at any time from ``source_time_ms`` to ``now``.

    The window starts :data:`~streams.core.limits.MAX_CLOCK_UNCERTAINTY_MS` before the source
    time (a copy may have been admitted that early) and both ends are widened by
    :data:`CHANGE_MARGIN_MS`. The first period counts as in effect since ever, the last one
    (the current retention) always counts.
    """
    spans = periods(workflow)
    low = source_time_ms - MAX_CLOCK_UNCERTAINTY_MS - CHANGE_MARGIN_MS
    high = now + CHANGE_MARGIN_MS
    smallest = spans[-1][1]
    for i in range(len(spans) - 1):
        start, retention = spans[i]
        end = spans[i + 1][0]
        if end > low and (i == 0 or start <= high):
            smallest = min(smallest, retention)
    return smallest


def next_history(current: WorkflowRevised | None, retention_ms: int, now: int) -> tuple[str, ...]:
    """``retention_history`` of a revision applied at ``now`` with ``retention_ms``.

    A new period starts only when the retention changes (never before the previous one began,
    whatever the applying clock says). A period that ended before
    ``now - retention_ms - 2 * CHANGE_MARGIN_MS - MAX_CLOCK_UNCERTAINTY_MS`` is dropped: any
    delivery whose window reaches back that far is older than the current retention allows
    and is rejected whatever the history says.
    """
    spans = list(periods(current)) if current is not None else []
    if not spans or spans[-1][1] != retention_ms:
        spans.append((max(now, spans[-1][0]) if spans else now, retention_ms))
    cutoff = now - retention_ms - 2 * CHANGE_MARGIN_MS - MAX_CLOCK_UNCERTAINTY_MS
    while len(spans) > 1 and spans[1][0] <= cutoff:
        del spans[0]
    while len(spans) > MAX_PERIODS:
        (first_start, first), (_, second) = spans[0], spans[1]
        spans[0:2] = [(first_start, min(first, second))]
    return tuple(f"{start}:{retention}" for start, retention in spans)
