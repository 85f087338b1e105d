"""Checking a contender's output: what admission promises for a backlog, counted exactly.

Every contender of section 1 is held to the same counts: one outcome per delivery, one
``RunAdmitted`` per occurrence, one ``BranchLaunched`` per run and slot. A contender whose
counts differ failed its run (:class:`CountsWrong`), whatever its speed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from bench.backlog import Backlog
from schemas.codec import decode
from schemas.events import (
    BranchLaunched,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RunAdmitted,
)

OUTCOMES = (RunAdmitted, DeliveryDeduplicated, OccurrenceConflict, DeliveryRejected)


class CountsWrong(AssertionError):
    """A contender's output is not what admission promises: the run failed."""


def counted(
    values: Iterable[bytes | None],
) -> tuple[Counter[str], Counter[str], Counter[tuple[str, str]]]:
    """Of admission's records ``values``: outcomes by delivery id, runs by admission key,
    launches by (run, slot)."""
    outcomes: Counter[str] = Counter()
    admitted: Counter[str] = Counter()
    launches: Counter[tuple[str, str]] = Counter()
    for value in values:
        if value is None:
            continue
        record = decode(value)
        if isinstance(record, OUTCOMES):
            outcomes[record.delivery_id] += 1
        if isinstance(record, RunAdmitted):
            admitted[record.admission_key] += 1
        elif isinstance(record, BranchLaunched):
            launches[(record.run_id, record.slot)] += 1
    return outcomes, admitted, launches


def expect_outcomes(
    outcomes: Counter[str],
    admitted: Counter[str],
    launches: Counter[tuple[str, str]],
    backlog: Backlog,
) -> None:
    ids = {d.delivery_id for d in backlog.deliveries}
    keys = {d.admission_key for d in backlog.deliveries}
    wrong = []
    if set(outcomes) != ids or set(outcomes.values()) != {1}:
        wrong.append(f"outcomes: {sum(outcomes.values())} for {len(outcomes)} of {len(ids)}")
    if set(admitted) != keys or set(admitted.values()) != {1}:
        wrong.append(f"runs: {sum(admitted.values())} for {len(admitted)} of {len(keys)} keys")
    want = len(keys) * len(backlog.slots)
    if len(launches) != want or set(launches.values()) != {1}:
        wrong.append(f"launches: {sum(launches.values())} distinct {len(launches)} of {want}")
    if wrong:
        raise CountsWrong("; ".join(wrong))
