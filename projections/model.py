"""The shape of the read model and its merge rules, free of Kafka and PostgreSQL.

A handler (see :mod:`projections.handlers`) maps one decoded record to :data:`RowOp` s:
``(table, row)``. How a row lands is decided by its table's :class:`TableSpec`:

- policy ``"first"``: one row per key; the first row for a key wins, later ones are ignored.
  A row that really was inserted adds its :attr:`TableSpec.counters` to the counters.
- policy ``"max"``: one row per key; the row with the greatest ``rank`` (a tuple of ints,
  compared lexicographically like a PostgreSQL ``bigint[]``) wins; equal ranks keep the
  existing row.

Both rules are idempotent (applying a row twice changes nothing) and, for keys fed by one
partition or with stage-ordered ranks, independent of how topics interleave. The SQL store
(:mod:`projections.store`) and the tests' in-memory projection
(``tests/support/memory_projection.py``) implement the same rules from the same specs; tests
hold them to each other. :data:`TABLES` are admission's and the branches' (here) and the
execution gateway's (:mod:`projections.journal_tables`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from projections.journal_tables import JOURNAL_TABLES
from projections.table_spec import CounterKey, Policy, Row, RowOp, TableSpec

__all__ = [
    "JOURNAL_TABLES",
    "META_TABLES",
    "TABLES",
    "TABLES_BY_NAME",
    "CounterKey",
    "Policy",
    "Row",
    "RowBuffer",
    "RowOp",
    "TableSpec",
    "reduce_rows",
    "storable",
]


def _outcome_counters(row: Row) -> Sequence[CounterKey]:
    outcome = row["outcome"]
    reason = str(row["reason"] or "")
    if outcome == "deduplicated":
        return (("duplicates", reason),)
    if outcome == "conflict":
        return (("conflicts", ""),)
    if outcome == "rejected":
        return (("rejected", reason),)
    return ()


def _launch_counters(row: Row) -> Sequence[CounterKey]:
    return (("branch_launches" if row["kind"] == "launched" else "branch_relaunches", ""),)


# A branch skipped by its worker for this reason counts as expired at dequeue (the worker
# SDK checks the deadline when it takes the task).
EXPIRED_AT_DEQUEUE_REASON = "expired_at_dequeue"


def _report_counters(row: Row) -> Sequence[CounterKey]:
    if row["kind"] == "skipped" and row["detail"] == EXPIRED_AT_DEQUEUE_REASON:
        return (("expired_at_dequeue", ""),)
    return ()


def _gate_counters(row: Row) -> Sequence[CounterKey]:
    outcome, reason = row["outcome"], str(row["reason"] or "")
    # A dispatch is counted once, by its ``dispatches`` row (journal_tables).
    if outcome == "superseded":
        return (("superseded", reason),)
    if outcome == "expired":
        # Every candidate that expired at the gate expired before it was sent.
        return (("expired_before_send", reason),)
    if outcome == "rejected":
        return (("candidates_rejected", reason),)
    return ()


_SOURCE = ("src_topic", "src_partition", "src_offset")

TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "event_log",
        (
            *_SOURCE,
            "type",
            "key",
            "run_id",
            "admission_key",
            "delivery_id",
            "subscription",
            "environment",
            "scope_key",
            "time_ms",
            "kafka_ts_ms",
            "record",
        ),
        _SOURCE,
    ),
    TableSpec("parked", (*_SOURCE, "key", "error", "value", "kafka_ts_ms"), _SOURCE),
    TableSpec(
        "dead_letters",
        (*_SOURCE, "key", "kind", "reason", "origin", "value", "kafka_ts_ms"),
        _SOURCE,
    ),
    TableSpec(
        "retention_gaps",
        ("src_topic", "src_partition", "first_offset", "end_offset"),
        ("src_topic", "src_partition", "first_offset"),
    ),
    TableSpec(
        "workflows",
        (
            "subscription",
            "environment",
            "revision",
            "slots",
            "branch_timeout_ms",
            "retention_ms",
            "identity_event_id_field",
            "identity_derived_fields",
            "immutable_fields",
            "validity_source_time",
            "validity_window_ms",
            "scope_fields",
            "scope_sequence_field",
            "auth_token_env",
            "auth_hmac_secret_env",
            "definition_digest",
            "applied_at_ms",
        ),
        ("subscription", "environment", "revision"),
    ),
    TableSpec(
        "deliveries",
        (
            "delivery_id",
            "subscription",
            "environment",
            "admission_key",
            "source",
            "event_id",
            "payload_json",
            "received_at_ms",
            "channel",
            "src_partition",
            "src_offset",
        ),
        ("delivery_id",),
        counters=lambda row: (("deliveries", ""),),
    ),
    TableSpec(
        "delivery_outcomes",
        (
            "delivery_id",
            "admission_key",
            "run_id",
            "outcome",
            "reason",
            "detail",
            "original_digest",
            "conflicting_digest",
            "differing_fields",
            "received_at_ms",
            "decided_at_ms",
        ),
        ("delivery_id",),
        counters=_outcome_counters,
    ),
    TableSpec(
        "runs",
        (
            "run_id",
            "admission_key",
            "delivery_id",
            "subscription",
            "environment",
            "workflow_revision",
            "source",
            "event_id",
            "content_digest",
            "source_time_ms",
            "expires_at_ms",
            "validity_source_time",
            "validity_window_ms",
            "slots",
            "scope_key",
            "sequence",
            "payload_json",
            "rerun_number",
            "rerun_of",
            "rerun_reason",
            "admitted_at_ms",
            "retention_ms",
        ),
        ("run_id",),
        counters=lambda row: (("runs_admitted", ""),),
    ),
    TableSpec(
        "run_status",
        ("run_id", "status", "previous_status", "changed_at_ms", "rank"),
        ("run_id",),
        policy="max",
    ),
    TableSpec(
        "branch_launches",
        (
            "run_id",
            "slot",
            "kind",
            "attempt",
            "admission_key",
            "workflow_revision",
            "expires_at_ms",
            "timeout_at_ms",
            "reason",
            "at_ms",
        ),
        ("run_id", "slot", "kind", "attempt"),
        counters=_launch_counters,
    ),
    TableSpec(
        "branch_reports",
        ("run_id", "slot", "kind", "attempt", "admission_key", "worker", "detail", "at_ms"),
        ("run_id", "slot", "kind", "attempt"),
        counters=_report_counters,
    ),
    TableSpec(
        "branch_slots",
        (
            "run_id",
            "slot",
            "admission_key",
            "status",
            "attempt",
            "worker",
            "detail",
            "at_ms",
            "rank",
        ),
        ("run_id", "slot"),
        policy="max",
    ),
    TableSpec(
        "rerun_requests",
        ("request_id", "admission_key", "run_id", "reason", "requested_by", "requested_at_ms"),
        ("request_id",),
    ),
    TableSpec(
        "rerun_rejections",
        ("request_id", "admission_key", "run_id", "reason", "decided_at_ms"),
        ("request_id",),
    ),
    TableSpec("evictions", ("admission_key", "run_ids", "evicted_at_ms"), ("admission_key",)),
    *JOURNAL_TABLES,
    TableSpec(
        "candidates",
        (
            "candidate_id",
            "run_id",
            "admission_key",
            "scope_key",
            "kind",
            "generation",
            "generation_kind",
            "expires_at_ms",
            "source_time_ms",
            "enqueued_at_ms",
            "dequeued_at_ms",
            "proposed_at_ms",
            "final_at_ms",
            "current_generation",
            "outcome",
            "reason",
            "rank",
        ),
        ("candidate_id",),
        policy="max",
    ),
    TableSpec(
        "candidate_outcomes",
        (
            "candidate_id",
            "run_id",
            "scope_key",
            "kind",
            "outcome",
            "reason",
            "generation",
            "current_generation",
            "decided_at_ms",
        ),
        ("candidate_id",),
        counters=_gate_counters,
    ),
    TableSpec(
        "scope_generations",
        (
            "scope_key",
            "kind",
            "generation",
            "generation_kind",
            "candidate_id",
            "accepted_at_ms",
            "rank",
        ),
        ("scope_key", "kind"),
        policy="max",
    ),
)

TABLES_BY_NAME: Mapping[str, TableSpec] = {spec.name: spec for spec in TABLES}

# Tables a verify compares besides TABLES (schema_migrations is left out: it holds times).
META_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("offsets", ("topic", "partition")),
    ("counters", ("name", "label")),
    ("meta", ("key",)),
)


def storable(value: Any) -> Any:
    """``value`` with NUL characters replaced by U+FFFD (PostgreSQL text cannot hold NUL).

    Applied to every value on its way into the store (and into the tests' in-memory projection),
    so handlers need not care; tuples become lists, as PostgreSQL arrays come back.
    """
    kind = type(value)
    if kind is int or value is None:
        return value
    if kind is str:
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, tuple | list):
        return [storable(v) for v in value]
    if isinstance(value, dict):
        return {k: storable(v) for k, v in value.items()}
    return value


def reduce_rows(ops: Iterable[RowOp]) -> dict[str, list[Row]]:
    """Collapse one batch to at most one row per (table, key), by the table's policy.

    PostgreSQL's ``INSERT ... ON CONFLICT`` may not touch a row twice in one statement, so a
    batch is reduced first: for ``"first"`` the earliest row of a key in ``ops`` order stays,
    for ``"max"`` the one with the greatest rank (the earliest among equals). ``ops`` must be
    in consumption order, which keeps each partition's order.
    """
    buffer = RowBuffer()
    buffer.merge(ops)
    return buffer.take()


class RowBuffer:
    """Rows held in memory, at most one per (table, key), merged by the tables' policies.

    Merging the rows of several batches in consumption order leaves what applying them batch
    by batch would leave (the policies are those of :func:`reduce_rows`), so a store may write
    them once instead of once per batch. Not thread-safe.
    """

    def __init__(self) -> None:
        self._tables: dict[str, dict[object, Row]] = {}
        self._count = 0

    def __len__(self) -> int:
        """How many rows are held (one per table and key)."""
        return self._count

    def merge(self, ops: Iterable[RowOp]) -> None:
        """Merge rows that come after every row merged so far."""
        tables = self._tables
        added = 0
        for table, row in ops:
            rows = tables.get(table)
            if rows is None:
                rows = tables[table] = {}
            key = _KEYS[table](row)
            current = rows.get(key)
            if current is None:
                rows[key] = row
                added += 1
            elif _MAX[table] and rank_of(row) > rank_of(current):
                rows[key] = row
        self._count += added

    def take(self) -> dict[str, list[Row]]:
        """The rows held, by table, and an empty buffer."""
        taken = {table: list(rows.values()) for table, rows in self._tables.items()}
        self._tables, self._count = {}, 0
        return taken

    def restore(self, taken: Mapping[str, list[Row]]) -> None:
        """Put back rows :meth:`take` returned and nobody stored: they merge in as older than
        anything merged since."""
        since = [(table, row) for table, rows in self._tables.items() for row in rows.values()]
        self._tables, self._count = {}, 0
        self.merge((table, row) for table, rows in taken.items() for row in rows)
        self.merge(since)


# Per table: its key as a hashable value (one ``itemgetter`` call per row), and its policy.
_KEYS = {spec.name: itemgetter(*spec.key) for spec in TABLES}
_MAX = {spec.name: spec.policy == "max" for spec in TABLES}


def rank_of(row: Row) -> tuple[int, ...]:
    rank = row["rank"]
    assert isinstance(rank, tuple | list)
    return tuple(int(x) for x in rank)
