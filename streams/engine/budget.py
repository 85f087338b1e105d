"""How many records the next transaction may take: a pure rule over measured times.

A transaction costs its *work* (deciding the records and producing their events: grows with
the records) plus its *commit* (flushing and the two-phase commit: about fixed per
transaction, and slow when the broker is). The budget sizes the work to one target time:
the commit interval, or the commit's own duration when that is longer, because a slow commit
is amortised by bigger batches. So a slow broker never shrinks batches (that would multiply
the slow commits per record); only slow deciding does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchBudget:
    """The rule's constants: target work time per transaction and the budget's bounds."""

    interval_s: float
    minimum: int
    maximum: int


def next_budget(
    rule: BatchBudget, *, current: int, handled: int, work_s: float, commit_s: float
) -> int:
    """The budget after a transaction of ``handled`` records took ``work_s`` + ``commit_s``.

    Moves halfway from ``current`` towards the records whose work fits the target time
    ``max(interval, commit_s)``. A partial batch (``handled < current``) may only shrink the
    budget: it shows what the records cost, not that more of them were waiting. The result
    is always within ``[minimum, maximum]``.
    """
    bounded = min(rule.maximum, max(rule.minimum, current))
    if handled <= 0:
        return bounded
    target_s = max(rule.interval_s, commit_s)
    if work_s * rule.maximum <= handled * target_s:
        goal = rule.maximum  # (also when work_s is 0: too fast to measure)
    else:
        goal = max(rule.minimum, int(handled * target_s / work_s))
    # Halfway, rounded towards the goal so that the bounds are reached.
    proposal = -(-(bounded + goal) // 2) if goal > bounded else (bounded + goal) // 2
    if handled < bounded:
        proposal = min(proposal, bounded)
    return min(rule.maximum, max(rule.minimum, proposal))
