"""The events admission writes, built in one place: rejections, admitted runs, launches."""

from __future__ import annotations

import orjson

from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.direct_init import constructor
from schemas.events import (
    BranchLaunched,
    DeliveryRejected,
    RerunRejected,
    RunAdmitted,
    WorkflowRevised,
)
from streams.core.admission.commands import AdmissionEvent
from streams.core.admission.state import RunState
from streams.core.errors import InconsistentHistory
from streams.core.fields import is_time_field

GENERATION_TIME = "time"
GENERATION_NUMBER = "number"

# Every admitted run builds these (constructor(): the class call without type.__call__).
_run_admitted_event = constructor(RunAdmitted)
_branch_launched = constructor(BranchLaunched)


def generation_kind_of(workflow: WorkflowRevised) -> str:
    """How a run's generation is ordered at the gate: its sequence field's values as times
    when the field is read as an instant (:func:`streams.core.fields.is_time_field`), else as
    numbers; without a sequence field the generation is the source time."""
    field = workflow.scope_sequence_field
    if field is None or is_time_field(field, workflow.validity_source_time):
        return GENERATION_TIME
    return GENERATION_NUMBER


def action_role(propose: str | None, approve: tuple[str, ...], slot: str) -> str | None:
    """A slot's part in its run's action: ``propose``, ``approve``, ``record`` (a run with
    actions, but its result is for the record only), ``None`` for a run without actions."""
    if propose is None:
        return None
    if slot == propose:
        return "propose"
    return "approve" if slot in approve else "record"


def reject(delivery: AdmitDelivery, reason: str, detail: str, now: int) -> list[AdmissionEvent]:
    """``DeliveryRejected`` for ``delivery`` with its reason and detail."""
    return [
        DeliveryRejected(
            delivery_id=delivery.delivery_id,
            admission_key=delivery.admission_key,
            subscription=delivery.subscription,
            environment=delivery.environment,
            reason=reason,
            detail=detail,
            received_at_ms=delivery.received_at_ms,
            decided_at_ms=now,
        )
    ]


def reject_rerun(request: AuthorizeRerun, reason: str, now: int) -> list[AdmissionEvent]:
    """``RerunRejected`` for ``request`` with its reason."""
    return [
        RerunRejected(
            request_id=request.request_id,
            admission_key=request.admission_key,
            run_id=request.run_id,
            reason=reason,
            decided_at_ms=now,
        )
    ]


def load_object(text: str) -> dict[str, object] | None:
    """``text`` as a JSON object, or ``None`` when it is not one."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def run_admitted(
    *,
    run_id: str,
    admission_key: str,
    delivery_id: str,
    workflow: WorkflowRevised | None,
    source: str,
    event_id: str | None,
    content_digest: str,
    source_time_ms: int,
    expires_at_ms: int,
    validity_source_time: str,
    validity_window_ms: int,
    clock_uncertainty_ms: int,
    slots: tuple[str, ...],
    scope_key: str | None,
    sequence: str | None,
    payload_json: str,
    rerun_number: int,
    rerun_of: str | None,
    rerun_reason: str | None,
    now: int,
    frozen: RunState | None = None,
) -> RunAdmitted:
    """Build RunAdmitted; revision, retention, attempts and the action policy come from
    ``workflow``, else ``frozen``."""
    retention: int | None
    if workflow is not None:
        revision, retention = workflow.revision, workflow.retention_ms
        subscription, environment = workflow.subscription, workflow.environment
        attempts = workflow.branch_attempts
        propose, approve = workflow.action_propose_slot, workflow.action_approve_slots
        exit_window, generation_kind = workflow.action_exit_window_ms, None
        if propose is not None:
            generation_kind = generation_kind_of(workflow)
    elif frozen is not None:
        revision, retention = frozen.workflow_revision, frozen.retention_ms
        subscription, environment = frozen.subscription, frozen.environment
        attempts = frozen.branch_attempts
        propose, approve = frozen.action_propose_slot, frozen.action_approve_slots
        exit_window, generation_kind = frozen.action_exit_window_ms, frozen.generation_kind
    else:  # pragma: no cover - callers always pass one of the two
        raise InconsistentHistory(f"{admission_key}: no workflow to admit under")
    return _run_admitted_event(
        run_id=run_id,
        admission_key=admission_key,
        delivery_id=delivery_id,
        subscription=subscription,
        environment=environment,
        workflow_revision=revision,
        source=source,
        event_id=event_id,
        content_digest=content_digest,
        source_time_ms=source_time_ms,
        expires_at_ms=expires_at_ms,
        validity_source_time=validity_source_time,
        validity_window_ms=validity_window_ms,
        slots=slots,
        scope_key=scope_key,
        sequence=sequence,
        payload_json=payload_json,
        rerun_number=rerun_number,
        rerun_of=rerun_of,
        rerun_reason=rerun_reason,
        admitted_at_ms=now,
        retention_ms=retention,
        branch_attempts=attempts,
        clock_uncertainty_ms=clock_uncertainty_ms,
        action_propose_slot=propose,
        action_approve_slots=approve,
        action_exit_window_ms=exit_window,
        generation_kind=generation_kind,
    )


def launches(admitted: RunAdmitted, timeout_ms: int, now: int) -> list[AdmissionEvent]:
    """One ``BranchLaunched`` (attempt 1) per slot of a run just admitted."""
    return [
        _branch_launched(
            run_id=admitted.run_id,
            admission_key=admitted.admission_key,
            slot=slot,
            attempt=1,
            workflow_revision=admitted.workflow_revision,
            expires_at_ms=admitted.expires_at_ms,
            timeout_at_ms=now + timeout_ms,
            payload_json=admitted.payload_json,
            launched_at_ms=now,
            source_time_ms=admitted.source_time_ms,
            validity_source_time=admitted.validity_source_time,
            validity_window_ms=admitted.validity_window_ms,
            clock_uncertainty_ms=admitted.clock_uncertainty_ms,
            action_role=action_role(
                admitted.action_propose_slot, admitted.action_approve_slots, slot
            ),
        )
        for slot in admitted.slots
    ]


def launch(key: str, run: RunState, slot: str, timeout_ms: int, now: int) -> BranchLaunched:
    """``BranchLaunched`` for a slot of ``run`` that has no launch (a history that lost it)."""
    return BranchLaunched(
        run_id=run.run_id,
        admission_key=key,
        slot=slot,
        attempt=1,
        workflow_revision=run.workflow_revision,
        expires_at_ms=run.expires_at_ms,
        timeout_at_ms=now + timeout_ms,
        payload_json=run.payload_json,
        launched_at_ms=now,
        source_time_ms=run.source_time_ms,
        validity_source_time=run.validity_source_time,
        validity_window_ms=run.validity_window_ms,
        clock_uncertainty_ms=run.clock_uncertainty_ms,
        action_role=run.action_role(slot),
    )
