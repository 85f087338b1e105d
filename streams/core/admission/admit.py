"""Deciding a delivery: reject it, admit a new run, or answer it with the original run."""

from __future__ import annotations

from schemas.commands import AdmitDelivery
from schemas.direct_init import constructor
from schemas.events import DeliveryDeduplicated, OccurrenceConflict, WorkflowRevised
from streams.core.admission.builders import launches, load_object, reject, run_admitted
from streams.core.admission.commands import AdmissionEvent, Admit
from streams.core.admission.state import OccurrenceState
from streams.core.durations import format_duration, format_time
from streams.core.errors import IdentityError
from streams.core.identity import (
    ContentView,
    Occurrence,
    content_view,
    differing_fields,
    identify,
    run_id_for,
)
from streams.core.lifecycle import deduplication_reason
from streams.core.reasons import (
    REJECT_BEYOND_HORIZON,
    REJECT_IDENTITY_MISMATCH,
    REJECT_INVALID_FIELD,
    REJECT_UNKNOWN_SUBSCRIPTION,
)
from streams.core.refusals import bad_delivery_id, future_refusal, payload_refusal
from streams.core.retention import smallest_retention
from streams.core.workflow import workflow_key

# Every copy of an occurrence is answered with one (the class call without type.__call__).
_delivery_deduplicated = constructor(DeliveryDeduplicated)


def decide_admit(state: OccurrenceState | None, command: Admit, now: int) -> list[AdmissionEvent]:
    """The one outcome of a delivery: ``DeliveryRejected`` (in the order of the module
    docstring of :mod:`streams.core.admission`), ``RunAdmitted`` with its launches for a first
    acceptable delivery, else ``DeliveryDeduplicated`` or ``OccurrenceConflict``."""
    delivery = command.delivery
    workflow = command.workflow
    destination = workflow_key(delivery.subscription, delivery.environment)
    if workflow is None or workflow_key(workflow.subscription, workflow.environment) != (
        destination
    ):
        return reject(
            delivery,
            REJECT_UNKNOWN_SUBSCRIPTION,
            f"no workflow is applied for {destination}; apply one with "
            "`sluicegate workflows apply FILE` and publish the delivery again",
            now,
        )

    too_large = payload_refusal(delivery.payload_json)
    if too_large is not None:
        return reject(delivery, too_large.reason, too_large.detail, now)
    bad_id = bad_delivery_id(delivery.delivery_id)
    if bad_id is not None:
        return reject(delivery, REJECT_INVALID_FIELD, bad_id, now)
    payload = load_object(delivery.payload_json)
    if payload is None:
        return reject(delivery, REJECT_INVALID_FIELD, "payload_json is not a JSON object", now)
    try:
        occurrence = identify(workflow, payload)
    except IdentityError as exc:
        return reject(delivery, exc.reason, exc.describe(), now)

    if occurrence.admission_key != delivery.admission_key:
        return reject(
            delivery,
            REJECT_IDENTITY_MISMATCH,
            f"ingest keyed this delivery {delivery.admission_key!r} but workflow revision "
            f"{workflow.revision} identifies it as {occurrence.admission_key!r}: the "
            "workflow's identity changed between ingest and admission; publish the delivery "
            "again so it is keyed under the current revision",
            now,
        )

    if state is not None:
        return _decide_copy(state, delivery, workflow, occurrence, now)

    in_future = future_refusal(workflow, occurrence, now)
    if in_future is not None:
        return reject(delivery, in_future.reason, in_future.detail, now)
    retention = smallest_retention(workflow, occurrence.source_time_ms, now)
    if occurrence.source_time_ms < now - retention:
        changed = "" if retention == workflow.retention_ms else " (the smallest in effect since)"
        return reject(
            delivery,
            REJECT_BEYOND_HORIZON,
            f"source time {format_time(occurrence.source_time_ms)} is older than the "
            f"retention horizon ({format_duration(retention)}{changed} before "
            f"{format_time(now)}); admission records are not kept that long, so this copy "
            "cannot be matched to a run and gets none",
            now,
        )

    run_id = run_id_for(occurrence.admission_key, 0)
    admitted = run_admitted(
        run_id=run_id,
        admission_key=occurrence.admission_key,
        delivery_id=delivery.delivery_id,
        workflow=workflow,
        source=occurrence.source,
        event_id=occurrence.event_id,
        content_digest=occurrence.content_digest,
        source_time_ms=occurrence.source_time_ms,
        expires_at_ms=occurrence.expires_at_ms,
        validity_source_time=workflow.validity_source_time,
        validity_window_ms=workflow.validity_window_ms,
        clock_uncertainty_ms=workflow.clock_uncertainty_ms,
        slots=workflow.slots,
        scope_key=occurrence.scope_key,
        sequence=occurrence.sequence,
        payload_json=occurrence.payload_json,
        rerun_number=0,
        rerun_of=None,
        rerun_reason=None,
        now=now,
    )
    return [admitted, *launches(admitted, workflow.branch_timeout_ms, now)]


def _decide_copy(
    state: OccurrenceState,
    delivery: AdmitDelivery,
    workflow: WorkflowRevised,
    occurrence: Occurrence,
    now: int,
) -> list[AdmissionEvent]:
    original = state.original
    # The digest covers the immutable fields' names and values and the source time, so equal
    # digests mean equal content under the current definition too. Only when they differ
    # are both copies compared under the *same* (current) definition: if a redeploy changed
    # the immutable-field list, the stored digest was computed over other fields and
    # comparing it directly would report a conflict that is only a definition change.
    if original.content_digest != occurrence.content_digest:
        stored_payload = load_object(original.payload_json) or {}
        before = content_view(workflow, stored_payload)
        now_view = ContentView(
            immutable_values=occurrence.immutable_values,
            source_time_ms=occurrence.source_time_ms,
            digest=occurrence.content_digest,
        )
        if before.digest != now_view.digest:
            return [_conflict(state, delivery, before, now_view, now)]
    return [
        _delivery_deduplicated(
            delivery_id=delivery.delivery_id,
            admission_key=state.admission_key,
            run_id=original.run_id,
            reason=deduplication_reason(original.status),
            received_at_ms=delivery.received_at_ms,
            decided_at_ms=now,
        )
    ]


def _conflict(
    state: OccurrenceState,
    delivery: AdmitDelivery,
    before: ContentView,
    after: ContentView,
    now: int,
) -> OccurrenceConflict:
    return OccurrenceConflict(
        delivery_id=delivery.delivery_id,
        admission_key=state.admission_key,
        run_id=state.original.run_id,
        original_digest=before.digest,
        conflicting_digest=after.digest,
        differing_fields=differing_fields(before, after),
        received_at_ms=delivery.received_at_ms,
        decided_at_ms=now,
    )
