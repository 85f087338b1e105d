"""The execution gateway's tables (migration 003; rows from :mod:`projections.handlers.journal`).

``dispatches`` counts ``actions_dispatched``; ``journal_expirations`` counts the gateway's share
of ``expired_before_send``; ``journal_refusals`` counts ``dispatches_refused`` (once per
action); ``action_status`` (policy ``max``) holds each action's current
status, from which the gauges ``unresolved_attempt`` and ``holds`` are read.
"""

from __future__ import annotations

from collections.abc import Sequence

from projections.table_spec import CounterKey, Row, TableSpec


def _expiry_counters(row: Row) -> Sequence[CounterKey]:
    # The gateway's final re-check (the gate counts its own CandidateExpired).
    return (("expired_before_send", ""),) if row["reason"] == "expired_before_send" else ()


REFUSAL_COLUMNS = (
    "action_id",
    "run_id",
    "kind",
    "reason",
    "expires_at_ms",
    "authorized_until_ms",
    "send_horizon_ms",
    "dispatched_at_ms",
    "refused_at_ms",
)
"""``journal_refusals``: every field of ``DispatchRefused``, under its own name."""

JOURNAL_TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "dispatches",
        (
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
        ("action_id",),
        counters=lambda row: (("actions_dispatched", ""),),
    ),
    TableSpec(
        "journal_intents",
        (
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
        ),
        ("action_id",),
    ),
    TableSpec(
        "journal_attempts",
        (
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
        ),
        ("action_id", "attempt"),
    ),
    TableSpec(
        "journal_receipts",
        (
            "src_partition",
            "src_offset",
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
        ),
        ("src_partition", "src_offset"),
    ),
    TableSpec(
        "journal_holds",
        ("action_id", "held_since_ms", "run_id", "slot", "attempt", "owner", "reason", "detail"),
        ("action_id", "held_since_ms"),
    ),
    TableSpec(
        "journal_hold_resolutions",
        (
            "action_id",
            "held_since_ms",
            "run_id",
            "resolution",
            "resolved_by",
            "reason",
            "held_reason",
            "resolved_at_ms",
        ),
        ("action_id", "held_since_ms"),
    ),
    TableSpec(
        "journal_expirations",
        (
            "action_id",
            "run_id",
            "slot",
            "reason",
            "attempts",
            "expires_at_ms",
            "authorized_until_ms",
            "checked_at_ms",
        ),
        ("action_id",),
        counters=_expiry_counters,
    ),
    TableSpec(
        "journal_refusals",
        REFUSAL_COLUMNS,
        ("action_id",),
        counters=lambda row: (("dispatches_refused", ""),),
    ),
    TableSpec(
        "journal_checkpoints",
        (
            "run_id",
            "sequence",
            "checkpoint_id",
            "workflow_revision",
            "completed_json",
            "next_tasks",
            "checkpointed_at_ms",
        ),
        ("run_id", "sequence"),
    ),
    TableSpec(
        "journal_recoveries",
        (
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
        ),
        ("recovery_id",),
    ),
    TableSpec(
        "journal_recovery_receipts",
        (
            "recovery_id",
            "run_id",
            "checkpoint_id",
            "records_consulted",
            "evidence_json",
            "next_permitted",
            "checkpoint_advanced_to",
            "held",
            "recorded_at_ms",
        ),
        ("recovery_id",),
    ),
    TableSpec(
        "action_status",
        ("action_id", "run_id", "slot", "status", "at_ms", "rank"),
        ("action_id",),
        policy="max",
    ),
)
