"""The admission decision: one command, the state of its key, ``now`` -> the events."""

from __future__ import annotations

from streams.core.admission.admit import decide_admit
from streams.core.admission.branches import decide_report, decide_timers
from streams.core.admission.commands import (
    AdmissionEvent,
    Admit,
    CheckTimers,
    Command,
    RecordBranchReport,
)
from streams.core.admission.rerun import decide_rerun
from streams.core.admission.state import OccurrenceState
from streams.core.lifecycle import BRANCH


def decide(state: OccurrenceState | None, command: Command, now: int) -> list[AdmissionEvent]:
    """The events that ``command`` causes given ``state`` at ``now`` (epoch ms UTC).

    Never raises for bad input: deliveries that cannot be admitted become
    ``DeliveryRejected``, unusable reports produce no events. Apply the returned events in
    order with :func:`evolve`.
    """
    if isinstance(command, Admit):
        return decide_admit(state, command, now)
    if isinstance(command, RecordBranchReport):
        return decide_report(state, command.report, now)
    if isinstance(command, CheckTimers):
        return decide_timers(state, now)
    return decide_rerun(state, command, now)


def next_due_ms(state: OccurrenceState | None) -> int | None:
    """When :class:`CheckTimers` next has something to do for ``state`` (epoch ms), or None.

    While any slot is unfinished this is the earliest slot timeout (eviction waits for all
    slots to finish); otherwise it is ``evict_at_ms``. The engine should re-read it after
    every evolve of the state.
    """
    if state is None:
        return None
    due: list[int] = []
    for run in state.runs:
        launched = {s.slot: s for s in run.slots}
        for name in run.slot_names:
            slot = launched.get(name)
            if slot is None:
                due.append(run.admitted_at_ms)
            elif not BRANCH.is_terminal(slot.status):
                due.append(slot.timeout_at_ms)
    if due:
        return min(due)
    return state.evict_at_ms
