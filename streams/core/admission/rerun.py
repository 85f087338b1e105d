"""Deciding an authorized rerun: a new run of the occurrence, linked to the original."""

from __future__ import annotations

from streams.core.admission.builders import launches, reject_rerun, run_admitted
from streams.core.admission.commands import AdmissionEvent, Rerun
from streams.core.admission.state import OccurrenceState
from streams.core.identity import run_id_for
from streams.core.limits import MAX_ID_CHARS, MAX_RERUN_REASON_CHARS, MAX_RERUNS
from streams.core.reasons import (
    RERUN_DUPLICATE_REQUEST,
    RERUN_INVALID_REQUEST,
    RERUN_LIMIT,
    RERUN_MISSING_REASON,
    RERUN_UNKNOWN_RUN,
)
from streams.core.workflow import DEFAULT_BRANCH_TIMEOUT_MS


def decide_rerun(state: OccurrenceState | None, command: Rerun, now: int) -> list[AdmissionEvent]:
    """``RunAdmitted`` (next rerun number) with its launches under the original's frozen
    context, or ``RerunRejected`` with one of the rerun reasons."""
    request = command.request

    def rejected(reason: str) -> list[AdmissionEvent]:
        return reject_rerun(request, reason, now)

    if state is None or state.run(request.run_id) is None:
        return rejected(RERUN_UNKNOWN_RUN)
    # A rerun request re-sent by an impatient client must not start a second rerun.
    if any(run.delivery_id == request.request_id for run in state.runs[1:]):
        return rejected(RERUN_DUPLICATE_REQUEST)
    if not request.reason.strip():
        return rejected(RERUN_MISSING_REASON)
    # Bounded so that a state can never outgrow a Kafka message (streams.core.limits).
    if len(request.reason) > MAX_RERUN_REASON_CHARS or len(request.request_id) > MAX_ID_CHARS:
        return rejected(RERUN_INVALID_REQUEST)
    if len(state.runs) - 1 >= MAX_RERUNS:
        return rejected(RERUN_LIMIT)

    original = state.original
    workflow = command.workflow
    if workflow is not None and (workflow.subscription, workflow.environment) != (
        original.subscription,
        original.environment,
    ):
        workflow = None
    rerun_number = len(state.runs)
    admitted = run_admitted(
        run_id=run_id_for(state.admission_key, rerun_number),
        admission_key=state.admission_key,
        delivery_id=request.request_id,
        workflow=workflow,
        frozen=original,
        source=original.source,
        event_id=original.event_id,
        content_digest=original.content_digest,
        source_time_ms=original.source_time_ms,
        expires_at_ms=original.expires_at_ms,
        validity_source_time=original.validity_source_time,
        validity_window_ms=original.validity_window_ms,
        clock_uncertainty_ms=original.clock_uncertainty_ms,
        slots=workflow.slots if workflow is not None else original.slot_names,
        scope_key=original.scope_key,
        sequence=original.sequence,
        payload_json=original.payload_json,
        rerun_number=rerun_number,
        rerun_of=request.run_id,
        rerun_reason=request.reason,
        now=now,
    )
    timeout = (
        workflow.branch_timeout_ms
        if workflow is not None
        else (original.branch_timeout_ms or DEFAULT_BRANCH_TIMEOUT_MS)
    )
    return [admitted, *launches(admitted, timeout, now)]
