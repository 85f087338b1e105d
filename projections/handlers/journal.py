"""Rows of the execution gateway's records: dispatches, the action journal and its statuses.

Registered into :data:`projections.rows.HANDLERS` on import (:mod:`projections.handlers`
imports every area). Every journal record also updates ``action_status`` (policy ``max``,
rank = its offset on ``journal``: one run's records are on one partition, in order), from
which (with ``journal_holds`` and ``journal_receipts``) the gauges ``unresolved_attempt``
(attempted or reconciling, or held while the held attempt's outcome is not established) and
``holds`` (held) are read. Operator commands and effect answers reach the event log only."""

from __future__ import annotations

from projections.journal_tables import REFUSAL_COLUMNS
from projections.model import Row, RowOp
from projections.rows import Source, fields_of, handles
from schemas.commands import (
    ExposureObserved,
    LookupAnswered,
    RecoverRun,
    ResolveHold,
    VenueAnswered,
)
from schemas.events import (
    ActionDispatched,
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    DispatchRefused,
    ExposureRecorded,
    HoldResolved,
    JournalEvicted,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)

_RECEIPT_STATUS = {
    "acknowledged": "acknowledged",
    "filled": "filled",
    "rejected": "rejected",
    "absent": "absent",
    "unknown": "reconciling",
}
_RESOLVED_STATUS = {"abandon": "closed", "confirm_absent": "absent"}
_ORDER_QUERY_REASONS_THAT_KEEP_STATUS = frozenset({"recovery"})


def _status(source: Source, r: object, status: str, at: int) -> RowOp:
    row: Row = {
        "action_id": getattr(r, "action_id"),  # noqa: B009 - every journal action record has one
        "run_id": getattr(r, "run_id"),  # noqa: B009
        "slot": getattr(r, "slot", "protection"),
        "status": status,
        "at_ms": at,
        "rank": (source.offset,),
    }
    return ("action_status", row)


def dispatch_row(r: ActionDispatched) -> RowOp:
    """The ``dispatches`` row of a dispatch (the gate's handler of ``ActionDispatched`` adds it
    to the candidate's rows: one handler per record type)."""
    return (
        "dispatches",
        fields_of(
            r,
            "action_id",
            "run_id",
            "kind",
            "scope_key",
            "side",
            "quantity",
            "notional",
            "instrument",
            "account",
            "expires_at_ms",
            "requested_at_ms",
            "dispatched_at_ms",
        ),
    )


@handles(ActionIntended)
def _intended(source: Source, r: ActionIntended) -> list[RowOp]:
    row = fields_of(
        r,
        "action_id",
        "run_id",
        "slot",
        "client_order_id",
        "side",
        "quantity",
        "notional",
        "limit_price",
        "instrument",
        "venue",
        "account",
        "environment",
        "expires_at_ms",
        "authorized_until_ms",
        "depends_on",
        "sized_from_json",
        "recv_window_ms",
        "quiet_period_ms",
        "intended_at_ms",
    )
    return [
        ("journal_intents", row),
        _status(source, r, "intended", r.intended_at_ms),
    ]


@handles(AttemptStarted)
def _attempted(source: Source, r: AttemptStarted) -> list[RowOp]:
    row = fields_of(
        r,
        "action_id",
        "attempt",
        "run_id",
        "slot",
        "client_order_id",
        "request_json",
        "attempted_at_ms",
        "recv_window_ms",
        "send_by_ms",
        "absence_after_ms",
        "owner_instance",
        "owner_generation",
        "reason",
    )
    return [
        ("journal_attempts", row),
        _status(source, r, "attempted", r.attempted_at_ms),
    ]


@handles(ReceiptRecorded)
def _receipt(source: Source, r: ReceiptRecorded) -> list[RowOp]:
    row = fields_of(
        r,
        "action_id",
        "run_id",
        "slot",
        "attempt",
        "client_order_id",
        "outcome",
        "venue_order_id",
        "status",
        "executed_quantity",
        "fills_json",
        "source",
        "queried_at_ms",
        "observed_at_ms",
        "conflict",
        "error_code",
        "detail",
        "recorded_at_ms",
    )
    row.update(src_partition=source.partition, src_offset=source.offset)
    ops: list[RowOp] = [("journal_receipts", row)]
    # Conflicting evidence is kept, never applied: the hold that follows sets the status.
    if r.conflict is None and r.outcome in _RECEIPT_STATUS:
        status = _RECEIPT_STATUS[r.outcome]
        ops.append(_status(source, r, status, r.recorded_at_ms))
    return ops


@handles(ActionExpired)
def _expired(source: Source, r: ActionExpired) -> list[RowOp]:
    row = fields_of(
        r,
        "action_id",
        "run_id",
        "slot",
        "reason",
        "attempts",
        "expires_at_ms",
        "authorized_until_ms",
        "checked_at_ms",
    )
    return [
        ("journal_expirations", row),
        _status(source, r, "expired", r.checked_at_ms),
    ]


@handles(ActionHeld)
def _held(source: Source, r: ActionHeld) -> list[RowOp]:
    row = fields_of(
        r, "action_id", "held_since_ms", "run_id", "slot", "attempt", "owner", "reason", "detail"
    )
    return [
        ("journal_holds", row),
        _status(source, r, "held", r.held_since_ms),
    ]


@handles(HoldResolved)
def _resolved(source: Source, r: HoldResolved) -> list[RowOp]:
    row = fields_of(
        r,
        "action_id",
        "held_since_ms",
        "run_id",
        "resolution",
        "resolved_by",
        "reason",
        "held_reason",
        "resolved_at_ms",
    )
    status = _RESOLVED_STATUS.get(r.resolution)
    if status is None:
        status = "sizing" if r.held_reason == "exposure_unavailable" else "reconciling"
    return [
        ("journal_hold_resolutions", row),
        _status(source, r, status, r.resolved_at_ms),
    ]


@handles(QueryRequested)
def _queried(source: Source, r: QueryRequested) -> list[RowOp]:
    if r.query == "exposure":
        if r.query_number != 1:
            return []  # later sizing queries change nothing that is shown
        return [_status(source, r, "sizing", r.requested_at_ms)]
    if r.reason in _ORDER_QUERY_REASONS_THAT_KEEP_STATUS:
        return []  # a recovery's lookup leaves an attempt unresolved and a hold held
    return [_status(source, r, "reconciling", r.requested_at_ms)]


@handles(ExposureRecorded)
def _exposure(source: Source, r: ExposureRecorded) -> list[RowOp]:
    status = "not_needed" if r.sized_quantity in ("0", "") else "sizing"
    return [_status(source, r, status, r.recorded_at_ms)]


@handles(RunCheckpointed)
def _checkpointed(source: Source, r: RunCheckpointed) -> list[RowOp]:
    row = fields_of(
        r,
        "run_id",
        "sequence",
        "checkpoint_id",
        "workflow_revision",
        "completed_json",
        "next_tasks",
        "checkpointed_at_ms",
    )
    return [("journal_checkpoints", row)]


@handles(RecoveryStarted)
def _recovery(source: Source, r: RecoveryStarted) -> list[RowOp]:
    row = fields_of(
        r,
        "recovery_id",
        "run_id",
        "requested_by",
        "reason",
        "journal_origin",
        "owner_instance",
        "owner_generation",
        "checkpoint_id",
        "records_consulted",
        "routed_to_lookup",
        "absence_not_before_ms",
        "supersedes",
        "started_at_ms",
    )
    return [("journal_recoveries", row)]


@handles(RecoveryReceiptRecorded)
def _recovery_receipt(source: Source, r: RecoveryReceiptRecorded) -> list[RowOp]:
    row = fields_of(
        r,
        "recovery_id",
        "run_id",
        "checkpoint_id",
        "records_consulted",
        "evidence_json",
        "next_permitted",
        "checkpoint_advanced_to",
        "held",
        "recorded_at_ms",
    )
    return [("journal_recovery_receipts", row)]


@handles(RecoverRun, ResolveHold, VenueAnswered, LookupAnswered, ExposureObserved)
def _journal_commands(source: Source, r: object) -> list[RowOp]:
    # Operator commands on `actions` reach the event log (and so run timelines) only; the
    # effect answers never reach a topic (the gateway decides them from memory).
    return []


@handles(JournalEvicted)
def _evicted(source: Source, r: JournalEvicted) -> list[RowOp]:
    # The gateway's state forgets a finished run; the read model keeps every row it had
    # (statuses stay settled), and the record reaches the event log, so the run's timeline
    # shows when it left.
    return []


@handles(DispatchRefused)
def _refused(source: Source, r: DispatchRefused) -> list[RowOp]:
    # No action_status row: nothing was journalled for the action.
    return [("journal_refusals", fields_of(r, *REFUSAL_COLUMNS))]
