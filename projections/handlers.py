"""Pure row mapping: one decoded record and where it came from -> the rows it produces.

:func:`project` is the whole mapping. Every record becomes an ``event_log`` row; a record
type with a handler in :data:`HANDLERS` also feeds the specific tables. Adding an event type
is one handler here (registered with :func:`handles`) plus, when it needs a table, one
migration and one :class:`~projections.model.TableSpec`.

Handlers are pure (no clock, no I/O) and total: they may be called more than once for the
same record, and the table policies make that harmless.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from projections.model import Row, RowOp, storable
from schemas.codec import to_json_dict
from schemas.commands import (
    AdmitDelivery,
    AuthorizeRerun,
    ExposureObserved,
    LookupAnswered,
    RecoverRun,
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
    ResolveHold,
    VenueAnswered,
)
from schemas.events import (
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AdmissionRecordEvicted,
    AttemptStarted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    DeliveryDeduplicated,
    DeliveryRejected,
    ExposureRecorded,
    HoldResolved,
    OccurrenceConflict,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RerunRejected,
    RunAdmitted,
    RunCheckpointed,
    RunStatusChanged,
    WorkflowRevised,
)
from schemas.topics import RUNS

# The topic whose branch results count: the processor writes each accepted claim there once
# per (run, slot). Records of the same classes on branch-results are workers' claims written
# before 0.2.0; like today's ReportBranch* claims they only go to the event log.
ACCEPTED_REPORTS_TOPIC = RUNS.name


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record was read: short topic name, partition, offset, key, Kafka timestamp."""

    topic: str
    partition: int
    offset: int
    key: str | None = None
    timestamp_ms: int | None = None


Handler = Callable[[Source, Any], list[RowOp]]
HANDLERS: dict[type, Handler] = {}
_H = TypeVar("_H", bound=Handler)


def handles(*types: type) -> Callable[[_H], _H]:
    """Register a handler for record types (one handler per type)."""

    def register(fn: _H) -> _H:
        for t in types:
            if t in HANDLERS:
                raise RuntimeError(f"two handlers for {t.__name__}")
            HANDLERS[t] = fn
        return fn

    return register


def project(source: Source, record: object) -> list[RowOp]:
    """All rows ``record`` produces: its event-log row, then its handler's rows."""
    ops: list[RowOp] = [("event_log", event_log_row(source, record))]
    handler = HANDLERS.get(type(record))
    if handler is not None:
        ops.extend(handler(source, record))
    return ops


def park(source: Source, value: bytes | None, error: str) -> list[RowOp]:
    """The row of a message that could not be decoded (kept, never dropped silently)."""
    return [
        (
            "parked",
            {
                "src_topic": source.topic,
                "src_partition": source.partition,
                "src_offset": source.offset,
                "key": source.key,
                "error": error,
                "value": value,
                "kafka_ts_ms": source.timestamp_ms,
            },
        )
    ]


_TIME_FIELDS: dict[type, str | None] = {}


def _time_field(cls: type) -> str | None:
    # The record's own time is its last *_at_ms field: admitted_at_ms after expires_at_ms,
    # decided_at_ms after received_at_ms, launched_at_ms after timeout_at_ms.
    if cls not in _TIME_FIELDS:
        names = [f.name for f in dataclasses.fields(cls) if f.name.endswith("_at_ms")]
        _TIME_FIELDS[cls] = names[-1] if names else None
    return _TIME_FIELDS[cls]


def record_time_ms(record: object) -> int | None:
    """The time a record states for itself (its last ``*_at_ms`` field), if any."""
    name = _time_field(type(record))
    value = getattr(record, name) if name else None
    return value if isinstance(value, int) else None


def record_json(record: object) -> str:
    """``to_json_dict(record)`` as compact JSON text that PostgreSQL ``jsonb`` accepts."""
    data = to_json_dict(record)
    text = orjson.dumps(data)
    if b"\\u0000" in text:
        text = orjson.dumps(storable(data))
    return text.decode("utf-8")


def _str_attr(record: object, name: str) -> str | None:
    value = getattr(record, name, None)
    return value if isinstance(value, str) else None


def event_log_row(source: Source, record: object) -> Row:
    return {
        "src_topic": source.topic,
        "src_partition": source.partition,
        "src_offset": source.offset,
        "type": type(record).__name__,
        "key": source.key,
        "run_id": _str_attr(record, "run_id"),
        "admission_key": _str_attr(record, "admission_key"),
        "delivery_id": _str_attr(record, "delivery_id"),
        "subscription": _str_attr(record, "subscription"),
        "environment": _str_attr(record, "environment"),
        "scope_key": _str_attr(record, "scope_key"),
        "time_ms": record_time_ms(record),
        "kafka_ts_ms": source.timestamp_ms,
        "record": record_json(record),
    }


def _fields(record: object, *names: str) -> Row:
    return {n: getattr(record, n) for n in names}


@handles(WorkflowRevised)
def _workflow(source: Source, r: WorkflowRevised) -> list[RowOp]:
    row = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
    return [("workflows", row)]


@handles(AdmitDelivery)
def _delivery(source: Source, r: AdmitDelivery) -> list[RowOp]:
    row = _fields(
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
            _fields(
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
    run = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
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
    row = _fields(r, "run_id", "status", "previous_status", "changed_at_ms")
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


# Slot lifecycle order inside one attempt; terminal reports outrank everything (a finished
# slot never runs again), so the rank is [terminal, attempt, stage, offset].
_STAGE_LAUNCH, _STAGE_START, _STAGE_END = 0, 1, 2


def _slot(
    source: Source,
    r: Any,
    *,
    status: str,
    stage: int,
    at_ms: int,
    worker: str | None,
    detail: str | None,
) -> RowOp:
    terminal = 1 if stage == _STAGE_END else 0
    return (
        "branch_slots",
        {
            "run_id": r.run_id,
            "slot": r.slot,
            "admission_key": r.admission_key,
            "status": status,
            "attempt": r.attempt,
            "worker": worker,
            "detail": detail,
            "at_ms": at_ms,
            "rank": (terminal, r.attempt, stage, source.offset),
        },
    )


@handles(BranchLaunched, BranchRelaunched)
def _launch(source: Source, r: BranchLaunched | BranchRelaunched) -> list[RowOp]:
    if isinstance(r, BranchLaunched):
        kind, reason, at_ms = "launched", None, r.launched_at_ms
    else:
        kind, reason, at_ms = "relaunched", r.reason, r.relaunched_at_ms
    row = _fields(
        r,
        "run_id",
        "slot",
        "attempt",
        "admission_key",
        "workflow_revision",
        "expires_at_ms",
        "timeout_at_ms",
    )
    row.update(kind=kind, reason=reason, at_ms=at_ms)
    return [
        ("branch_launches", row),
        _slot(source, r, status=kind, stage=_STAGE_LAUNCH, at_ms=at_ms, worker=None, detail=reason),
    ]


_REPORTS: dict[type, tuple[str, str | None, str]] = {
    BranchStarted: ("started", None, "started_at_ms"),
    BranchCompleted: ("completed", "result_json", "completed_at_ms"),
    BranchFailed: ("failed", "error", "failed_at_ms"),
    BranchSkipped: ("skipped", "reason", "skipped_at_ms"),
}


@handles(BranchStarted, BranchCompleted, BranchFailed, BranchSkipped)
def _report(source: Source, r: Any) -> list[RowOp]:
    if source.topic != ACCEPTED_REPORTS_TOPIC:
        return []
    kind, detail_field, at_field = _REPORTS[type(r)]
    detail = getattr(r, detail_field) if detail_field else None
    at_ms = getattr(r, at_field)
    stage = _STAGE_START if kind == "started" else _STAGE_END
    report = {
        "run_id": r.run_id,
        "slot": r.slot,
        "kind": kind,
        "attempt": r.attempt,
        "admission_key": r.admission_key,
        "worker": r.worker,
        "detail": detail,
        "at_ms": at_ms,
    }
    return [
        ("branch_reports", report),
        _slot(source, r, status=kind, stage=stage, at_ms=at_ms, worker=r.worker, detail=detail),
    ]


@handles(ReportBranchStarted, ReportBranchCompleted, ReportBranchFailed, ReportBranchSkipped)
def _worker_claim(source: Source, r: object) -> list[RowOp]:
    # A worker's claim reaches the event log (so a run's timeline shows what each worker said);
    # the slot tables and counts come from the facts the processor accepted.
    return []


@handles(RerunRejected)
def _rerun_rejected(source: Source, r: RerunRejected) -> list[RowOp]:
    return [
        (
            "rerun_rejections",
            _fields(r, "request_id", "admission_key", "run_id", "reason", "decided_at_ms"),
        )
    ]


@handles(AdmissionRecordEvicted)
def _evicted(source: Source, r: AdmissionRecordEvicted) -> list[RowOp]:
    return [("evictions", _fields(r, "admission_key", "run_ids", "evicted_at_ms"))]


@handles(
    ActionIntended,
    AttemptStarted,
    ReceiptRecorded,
    ActionExpired,
    ActionHeld,
    HoldResolved,
    RunCheckpointed,
    QueryRequested,
    ExposureRecorded,
    RecoveryStarted,
    RecoveryReceiptRecorded,
    RecoverRun,
    ResolveHold,
    VenueAnswered,
    LookupAnswered,
    ExposureObserved,
)
def _journal(source: Source, r: object) -> list[RowOp]:
    # The action journal's records reach the event log (and so run timelines) only; its
    # tables and the expired_before_send / unresolved_attempt / holds counts come with the
    # gateway's projection.
    return []
