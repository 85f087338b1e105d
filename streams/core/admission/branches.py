"""Deciding branch results and timers: accepted reports, relaunches, failures, eviction."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.commands import ReportBranchStarted
from schemas.events import (
    AdmissionRecordEvicted,
    BranchFailed,
    BranchRelaunched,
    RunStatusChanged,
)
from streams.core.admission.actions import action_events
from streams.core.admission.builders import launch
from streams.core.admission.commands import AdmissionEvent, WorkerReport, accepted
from streams.core.admission.evolve import fold
from streams.core.admission.state import OccurrenceState, RunState, SlotState
from streams.core.durations import format_duration
from streams.core.lifecycle import BRANCH, BranchStatus, run_status_from_slots
from streams.core.workflow import DEFAULT_BRANCH_TIMEOUT_MS

PROCESSOR_WORKER = "sluicegate-processor"
"""``worker`` of a ``BranchFailed`` written by the processor when a slot ran out of attempts."""


def decide_report(
    state: OccurrenceState | None, report: WorkerReport, now: int
) -> list[AdmissionEvent]:
    """A worker's claim as the accepted fact (plus the run's status change), or nothing for
    a finished slot, an unknown run, slot or attempt, or a stale start."""
    if state is None or report.admission_key != state.admission_key:
        return []
    run = state.run(report.run_id)
    if run is None:
        return []
    slot = run.slot(report.slot)
    if slot is None or BRANCH.is_terminal(slot.status):
        return []
    # An attempt number the processor never launched cannot come from a real worker.
    if not 1 <= report.attempt <= slot.attempt:
        return []
    # Only the current attempt's start is news; a late start from a superseded attempt would
    # not change anything the processor acts on.
    if isinstance(report, ReportBranchStarted) and (
        slot.status is not BranchStatus.LAUNCHED or report.attempt != slot.attempt
    ):
        return []
    return with_status_changes(state, [accepted(report)], now)


def decide_timers(state: OccurrenceState | None, now: int) -> list[AdmissionEvent]:
    """Relaunch or fail every slot past its timeout, launch a missing slot; once every slot of
    every run finished and ``evict_at_ms`` passed, evict the record."""
    if state is None:
        return []
    events: list[AdmissionEvent] = []
    current = state
    for run in state.runs:
        slot_events: list[AdmissionEvent] = []
        launched = {s.slot: s for s in run.slots}
        timeout = run.branch_timeout_ms or DEFAULT_BRANCH_TIMEOUT_MS
        for name in run.slot_names:
            slot = launched.get(name)
            if slot is None:
                # Admission and launches are written together, so this only happens if a
                # history lost its launches: launch the missing slot under the same run.
                slot_events.append(launch(state.admission_key, run, name, timeout, now))
            elif not BRANCH.is_terminal(slot.status) and slot.timeout_at_ms <= now:
                slot_events.append(_expire_slot(state.admission_key, run, slot, timeout, now))
        if slot_events:
            run_events = with_status_changes(current, slot_events, now)
            current = fold(current, run_events)
            events.extend(run_events)
    if events:
        return events
    if (
        state.evict_at_ms is not None
        and now >= state.evict_at_ms
        and not any(run.unfinished() for run in state.runs)
    ):
        return [
            AdmissionRecordEvicted(
                admission_key=state.admission_key,
                run_ids=tuple(run.run_id for run in state.runs),
                evicted_at_ms=now,
            )
        ]
    return []


def _expire_slot(
    key: str, run: RunState, slot: SlotState, timeout: int, now: int
) -> AdmissionEvent:
    if slot.attempt < run.branch_attempts:
        return BranchRelaunched(
            run_id=run.run_id,
            admission_key=key,
            slot=slot.slot,
            attempt=slot.attempt + 1,
            workflow_revision=run.workflow_revision,
            expires_at_ms=run.expires_at_ms,
            timeout_at_ms=now + timeout,
            payload_json=run.payload_json,
            reason=f"timed out after {format_duration(timeout)}",
            relaunched_at_ms=now,
            source_time_ms=run.source_time_ms,
            validity_source_time=run.validity_source_time,
            validity_window_ms=run.validity_window_ms,
            clock_uncertainty_ms=run.clock_uncertainty_ms,
            action_role=run.action_role(slot.slot),
        )
    return BranchFailed(
        run_id=run.run_id,
        admission_key=key,
        slot=slot.slot,
        attempt=slot.attempt,
        worker=PROCESSOR_WORKER,
        error=f"no result after {slot.attempt} attempts",
        failed_at_ms=now,
    )


def with_status_changes(
    state: OccurrenceState, slot_events: Sequence[AdmissionEvent], now: int
) -> list[AdmissionEvent]:
    """``slot_events`` plus a RunStatusChanged for every run whose status they move, then
    the gate's inputs they cause (:mod:`streams.core.admission.actions`)."""
    after = fold(state, slot_events)
    events = list(slot_events)
    for before_run, after_run in zip(state.runs, after.runs, strict=False):
        status = run_status_from_slots(after_run.slot_statuses(), before_run.status)
        if status is not before_run.status:
            events.append(
                RunStatusChanged(
                    run_id=before_run.run_id,
                    admission_key=state.admission_key,
                    previous_status=before_run.status.value,
                    status=status.value,
                    changed_at_ms=now,
                )
            )
    events.extend(action_events(state, after, slot_events, now))
    return events
