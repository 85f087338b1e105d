"""Rows of run admission's records: workflows, deliveries, outcomes, runs, reruns, evictions."""

from __future__ import annotations

from projections.model import RowOp
from projections.rows import Source, all_fields, fields_of, handles
from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import (
    AdmissionRecordEvicted,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
    WorkflowRevised,
)


@handles(WorkflowRevised)
def _workflow(source: Source, r: WorkflowRevised) -> list[RowOp]:
    row = all_fields(r)
    return [("workflows", row)]


@handles(AdmitDelivery)
def _delivery(source: Source, r: AdmitDelivery) -> list[RowOp]:
    row = fields_of(
        r,
        "delivery_id",
        "subscription",
        "environment",
        "admission_key",
        "source",
        "event_id",
        "payload_json",
        "received_at_ms",
        "channel",
    )
    row["src_partition"] = source.partition
    row["src_offset"] = source.offset
    return [("deliveries", row)]


@handles(AuthorizeRerun)
def _rerun_request(source: Source, r: AuthorizeRerun) -> list[RowOp]:
    return [
        (
            "rerun_requests",
            fields_of(
                r,
                "request_id",
                "admission_key",
                "run_id",
                "reason",
                "requested_by",
                "requested_at_ms",
            ),
        )
    ]


def _outcome(
    delivery_id: str,
    admission_key: str,
    run_id: str | None,
    outcome: str,
    decided_at_ms: int,
    *,
    reason: str | None = None,
    detail: str | None = None,
    original_digest: str | None = None,
    conflicting_digest: str | None = None,
    differing_fields: tuple[str, ...] | None = None,
    received_at_ms: int | None = None,
) -> RowOp:
    return (
        "delivery_outcomes",
        {
            "delivery_id": delivery_id,
            "admission_key": admission_key,
            "run_id": run_id,
            "outcome": outcome,
            "reason": reason,
            "detail": detail,
            "original_digest": original_digest,
            "conflicting_digest": conflicting_digest,
            "differing_fields": differing_fields,
            "received_at_ms": received_at_ms,
            "decided_at_ms": decided_at_ms,
        },
    )


@handles(RunAdmitted)
def _run_admitted(source: Source, r: RunAdmitted) -> list[RowOp]:
    run = all_fields(r)
    ops: list[RowOp] = [
        ("runs", run),
        (
            "run_status",
            {
                "run_id": r.run_id,
                "status": "pending",
                "previous_status": None,
                "changed_at_ms": r.admitted_at_ms,
                "rank": (source.offset,),
            },
        ),
    ]
    # A rerun is admitted by an operator's request, not by a delivery: it is no outcome.
    if r.rerun_of is None:
        ops.append(_outcome(r.delivery_id, r.admission_key, r.run_id, "admitted", r.admitted_at_ms))
    return ops


@handles(RunStatusChanged)
def _run_status(source: Source, r: RunStatusChanged) -> list[RowOp]:
    row = fields_of(r, "run_id", "status", "previous_status", "changed_at_ms")
    row["rank"] = (source.offset,)
    return [("run_status", row)]


@handles(DeliveryDeduplicated)
def _deduplicated(source: Source, r: DeliveryDeduplicated) -> list[RowOp]:
    return [
        _outcome(
            r.delivery_id,
            r.admission_key,
            r.run_id,
            "deduplicated",
            r.decided_at_ms,
            reason=r.reason,
            received_at_ms=r.received_at_ms,
        )
    ]


@handles(OccurrenceConflict)
def _conflict(source: Source, r: OccurrenceConflict) -> list[RowOp]:
    return [
        _outcome(
            r.delivery_id,
            r.admission_key,
            r.run_id,
            "conflict",
            r.decided_at_ms,
            reason="content_differs",
            original_digest=r.original_digest,
            conflicting_digest=r.conflicting_digest,
            differing_fields=r.differing_fields,
            received_at_ms=r.received_at_ms,
        )
    ]


@handles(DeliveryRejected)
def _rejected(source: Source, r: DeliveryRejected) -> list[RowOp]:
    return [
        _outcome(
            r.delivery_id,
            r.admission_key,
            None,
            "rejected",
            r.decided_at_ms,
            reason=r.reason,
            detail=r.detail,
            received_at_ms=r.received_at_ms,
        )
    ]


@handles(RerunRejected)
def _rerun_rejected(source: Source, r: RerunRejected) -> list[RowOp]:
    return [
        (
            "rerun_rejections",
            fields_of(r, "request_id", "admission_key", "run_id", "reason", "decided_at_ms"),
        )
    ]


@handles(AdmissionRecordEvicted)
def _evicted(source: Source, r: AdmissionRecordEvicted) -> list[RowOp]:
    return [("evictions", fields_of(r, "admission_key", "run_ids", "evicted_at_ms"))]
