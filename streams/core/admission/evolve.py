"""Applying admission's events to the state of their admission key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    CandidateProposed,
    DeliveryDeduplicated,
    DeliveryRejected,
    DispatchRequested,
    DispatchWithdrawn,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
)
from streams.core.admission.commands import AdmissionEvent, BranchReport
from streams.core.admission.state import (
    EVICTION_MARGIN_MS,
    OccurrenceState,
    RunState,
    SlotState,
    build_run_state,
)
from streams.core.errors import InconsistentHistory
from streams.core.lifecycle import BRANCH, RUN, BranchStatus, RunStatus
from streams.core.records import changed


def evolve(state: OccurrenceState | None, event: AdmissionEvent) -> OccurrenceState | None:
    """Apply one event to the state of its admission key.

    Outcome events that do not change the record (deduplicated, conflict, rejected, rerun
    rejected) return ``state`` unchanged, including ``None``. ``AdmissionRecordEvicted``
    returns ``None``. Raises IllegalTransition / InconsistentHistory for an event that
    contradicts the state (see the module docstring).
    """
    if isinstance(
        event, DeliveryDeduplicated | OccurrenceConflict | DeliveryRejected | RerunRejected
    ):
        return state
    if isinstance(event, AdmissionRecordEvicted):
        return None
    if isinstance(event, RunAdmitted):
        return _evolve_admitted(state, event)
    if state is None:
        raise InconsistentHistory(
            f"{event.admission_key}: {type(event).__name__} for run {event.run_id} but the "
            "occurrence has no admission record"
        )
    if event.admission_key != state.admission_key:
        raise InconsistentHistory(
            f"{type(event).__name__} for {event.admission_key} applied to the record of "
            f"{state.admission_key}"
        )
    run = state.run(event.run_id)
    if run is None:
        raise InconsistentHistory(
            f"{state.admission_key}: {type(event).__name__} for unknown run {event.run_id}"
        )
    if isinstance(event, CandidateProposed):
        if run.action_propose_slot is None or run.proposed_kind is not None:
            raise InconsistentHistory(
                f"{state.admission_key}: run {run.run_id} proposed {event.candidate_id} but "
                "it has no proposing slot or proposed already"
            )
        return _replace_run(state, changed(run, proposed_kind=event.kind))
    if isinstance(event, DispatchRequested | DispatchWithdrawn):
        if run.proposed_kind is None:
            raise InconsistentHistory(
                f"{state.admission_key}: {type(event).__name__} for {event.candidate_id} "
                "before the run proposed it"
            )
        return state  # written once, on the step that finished the approvals
    if isinstance(event, RunStatusChanged):
        if event.previous_status != run.status.value:
            raise InconsistentHistory(
                f"{state.admission_key}: run {run.run_id} is {run.status.value}, event says "
                f"it was {event.previous_status}"
            )
        status = RUN.transition(run.status, _run_status(event.status))
        return _replace_run(state, changed(run, status=status))
    return _replace_run(state, _evolve_slot(state.admission_key, run, event))


def evolve_all(
    state: OccurrenceState | None, events: Sequence[AdmissionEvent]
) -> OccurrenceState | None:
    """``state`` after ``events`` in order: exactly what :func:`evolve` returns applied to them
    one at a time, and the same error where that raises.

    A new occurrence's events (``RunAdmitted`` followed by its ``BranchLaunched``, what
    admitting a delivery decides) are folded in one step: one ``RunState`` with every launched
    slot instead of a copy of the run and of the state per launch. Any other sequence, and any
    such sequence that is not consistent (another run or key, a slot the run does not have or
    launched twice), is evolved event by event, so its error is the one ``evolve`` raises.
    """
    if state is None and len(events) > 1:
        admitted = events[0]
        if isinstance(admitted, RunAdmitted) and admitted.rerun_number == 0:
            launched = _admitted_with_launches(admitted, events)
            if launched is not None:
                return launched
    result = state
    for event in events:
        result = evolve(result, event)
    return result


def _admitted_with_launches(
    admitted: RunAdmitted, events: Sequence[AdmissionEvent]
) -> OccurrenceState | None:
    """The state after ``events`` (``admitted`` first, then only its launches, each slot of
    the run once), or ``None`` when they are anything else."""
    slots: list[SlotState] = []
    names: set[str] = set()
    timeout = 0
    for event in events[1:]:
        if (
            type(event) is not BranchLaunched
            or event.run_id != admitted.run_id
            or event.admission_key != admitted.admission_key
            or event.slot not in admitted.slots
            or event.slot in names
        ):
            return None
        names.add(event.slot)
        slots.append(
            SlotState(event.slot, BranchStatus.LAUNCHED, event.attempt, event.timeout_at_ms)
        )
        # evolve keeps the first launch's timeout that is not zero.
        timeout = timeout or event.timeout_at_ms - event.launched_at_ms
    return _evolve_admitted(None, admitted, tuple(slots), timeout)


def fold(state: OccurrenceState, events: Iterable[AdmissionEvent]) -> OccurrenceState:
    """``state`` after ``events``; ``InconsistentHistory`` if they would evict it."""
    result: OccurrenceState | None = state
    for event in events:
        result = evolve(result, event)
    if result is None:  # decide never folds an eviction into a further decision
        raise InconsistentHistory(f"{state.admission_key}: state vanished while deciding")
    return result


_SLOT_OUTCOME: dict[type, BranchStatus] = {
    BranchStarted: BranchStatus.STARTED,
    BranchCompleted: BranchStatus.COMPLETED,
    BranchFailed: BranchStatus.FAILED,
    BranchSkipped: BranchStatus.SKIPPED,
}


def _evolve_slot(
    key: str,
    run: RunState,
    event: BranchLaunched | BranchRelaunched | BranchReport,
) -> RunState:
    if event.slot not in run.slot_names:
        raise InconsistentHistory(
            f"{key}: {type(event).__name__} for slot {event.slot!r}, which run {run.run_id} "
            "does not have"
        )
    slot = run.slot(event.slot)
    if isinstance(event, BranchLaunched):
        if slot is not None:
            BRANCH.transition(slot.status, BranchStatus.LAUNCHED)  # finished: IllegalTransition
            raise InconsistentHistory(f"{key}: slot {event.slot!r} of {run.run_id} launched twice")
        timeout = event.timeout_at_ms - event.launched_at_ms
        new_slot = SlotState(event.slot, BranchStatus.LAUNCHED, event.attempt, event.timeout_at_ms)
        return changed(
            run,
            slots=(*run.slots, new_slot),
            branch_timeout_ms=run.branch_timeout_ms or timeout,
        )
    if slot is None:
        raise InconsistentHistory(
            f"{key}: {type(event).__name__} for slot {event.slot!r} of {run.run_id}, which was "
            "never launched"
        )
    if isinstance(event, BranchRelaunched):
        status = BRANCH.transition(slot.status, BranchStatus.LAUNCHED)
        if event.attempt <= slot.attempt:
            raise InconsistentHistory(
                f"{key}: relaunch of {run.run_id}/{event.slot} as attempt {event.attempt} "
                f"after attempt {slot.attempt}"
            )
        moved = SlotState(slot.slot, status, event.attempt, event.timeout_at_ms)
    else:
        status = BRANCH.transition(slot.status, _SLOT_OUTCOME[type(event)])
        moved = changed(slot, status=status)
        if isinstance(event, BranchStarted) and event.slot == run.action_propose_slot:
            run = changed(run, proposal_dequeued_at_ms=event.started_at_ms)
    return changed(run, slots=tuple(moved if s.slot == slot.slot else s for s in run.slots))


def _evolve_admitted(
    state: OccurrenceState | None,
    event: RunAdmitted,
    slots: tuple[SlotState, ...] = (),
    branch_timeout_ms: int = 0,
) -> OccurrenceState:
    """``state`` with the run ``event`` admits; ``slots`` and ``branch_timeout_ms``: those of
    its launches folded in the same step (:func:`evolve_all`), none for ``evolve``."""
    expected = 0 if state is None else len(state.runs)
    if event.rerun_number != expected:
        raise InconsistentHistory(
            f"{event.admission_key}: RunAdmitted {event.run_id} is rerun "
            f"{event.rerun_number}, expected rerun {expected}"
        )
    if state is not None and event.admission_key != state.admission_key:
        raise InconsistentHistory(
            f"RunAdmitted for {event.admission_key} applied to the record of {state.admission_key}"
        )
    run = build_run_state(
        run_id=event.run_id,
        rerun_number=event.rerun_number,
        status=RunStatus.PENDING,
        workflow_revision=event.workflow_revision,
        delivery_id=event.delivery_id,
        subscription=event.subscription,
        environment=event.environment,
        source=event.source,
        event_id=event.event_id,
        content_digest=event.content_digest,
        source_time_ms=event.source_time_ms,
        expires_at_ms=event.expires_at_ms,
        validity_source_time=event.validity_source_time,
        validity_window_ms=event.validity_window_ms,
        scope_key=event.scope_key,
        sequence=event.sequence,
        payload_json=event.payload_json,
        slot_names=tuple(event.slots),
        slots=slots,
        branch_timeout_ms=branch_timeout_ms,
        retention_ms=event.retention_ms,  # None in v1 records: never evicted
        rerun_of=event.rerun_of,
        rerun_reason=event.rerun_reason,
        admitted_at_ms=event.admitted_at_ms,
        branch_attempts=event.branch_attempts,
        clock_uncertainty_ms=event.clock_uncertainty_ms,
        action_propose_slot=event.action_propose_slot,
        action_approve_slots=tuple(event.action_approve_slots),
        action_exit_window_ms=event.action_exit_window_ms,
        generation_kind=event.generation_kind,
    )
    runs = (run,) if state is None else (*state.runs, run)
    return OccurrenceState(event.admission_key, runs, _evict_at(runs))


def _evict_at(runs: tuple[RunState, ...]) -> int | None:
    retentions = [run.retention_ms for run in runs if run.retention_ms is not None]
    if not retentions:
        return None
    return runs[0].source_time_ms + max(retentions) + EVICTION_MARGIN_MS


def _replace_run(state: OccurrenceState, run: RunState) -> OccurrenceState:
    runs = tuple(run if r.run_id == run.run_id else r for r in state.runs)
    return changed(state, runs=runs)


def _run_status(value: str) -> RunStatus:
    try:
        return RunStatus(value)
    except ValueError as exc:
        raise InconsistentHistory(f"unknown run status {value!r}") from exc
