"""Read queries over the gateway's tables: gauges, holds, recoveries (CLI and HTTP).

Same rules as every module of :mod:`projections.queries`: an open connection and the schema
in, plain JSON-ready values out, every user-supplied value a query parameter.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.pages import HOLDS_PAGE, page
from projections.queries.connection import Json, fetch_all, fetch_one, table

UNRESOLVED = ("attempted", "reconciling")
SETTLED = ("acknowledged", "filled", "rejected", "expired", "closed", "not_needed")


def gauges(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    """``unresolved_attempt`` (attempts without an established outcome now: attempted or
    reconciling, and held ones whose held attempt has no established receipt) and ``holds``
    (actions held now), from each action's current status and its latest hold."""
    [row] = fetch_all(
        conn,
        sql.SQL(
            "SELECT count(*) FILTER (WHERE s.status = ANY(%s) OR (s.status = 'held' "
            "AND h.attempt > 0 AND NOT EXISTS (SELECT 1 FROM {receipts} r "
            "WHERE r.action_id = s.action_id AND r.attempt = h.attempt "
            "AND r.outcome <> 'unknown'))) AS unresolved, "
            "count(*) FILTER (WHERE s.status = 'held') AS holds "
            "FROM {status} s LEFT JOIN LATERAL (SELECT attempt FROM {holds} x "
            "WHERE x.action_id = s.action_id ORDER BY x.held_since_ms DESC LIMIT 1) h ON TRUE"
        ).format(
            status=table(schema, "action_status"),
            holds=table(schema, "journal_holds"),
            receipts=table(schema, "journal_receipts"),
        ),
        (list(UNRESOLVED),),
    )
    return {"unresolved_attempt": int(row["unresolved"]), "holds": int(row["holds"])}


_HOLDS_FROM = (
    "FROM {holds} h LEFT JOIN {resolutions} r "
    "ON r.action_id = h.action_id AND r.held_since_ms = h.held_since_ms "
    "LEFT JOIN {status} s ON s.action_id = h.action_id "
)
_OPEN = "s.status = 'held' AND r.action_id IS NULL"


def _holds_query(schema: str, head: str, condition: str, tail: str = "") -> sql.Composed:
    return sql.SQL(head + _HOLDS_FROM + "WHERE " + condition + tail).format(
        holds=table(schema, "journal_holds"),
        resolutions=table(schema, "journal_hold_resolutions"),
        status=table(schema, "action_status"),
    )


_HOLD_COLUMNS = (
    "SELECT h.action_id, h.run_id, h.slot, h.attempt, h.owner, h.reason, h.detail, "
    "h.held_since_ms, r.resolution, r.resolved_by, r.reason AS resolution_reason, "
    "r.resolved_at_ms, s.status "
)


def list_holds(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    resolved: bool = False,
    start: int = 0,
    limit: int = HOLDS_PAGE,
) -> Json:
    """Open holds (owner, reason, since, detail), oldest first; with ``resolved``, every hold
    ever made with its resolution (the audit record), if any. A page of them from position
    ``start`` (0 is the oldest), up to ``limit``: ``holds``, their ``total`` and ``page``
    (``from``, ``limit``, ``next``)."""
    condition = "TRUE" if resolved else _OPEN
    holds = fetch_all(
        conn,
        _holds_query(
            schema,
            _HOLD_COLUMNS,
            condition,
            " ORDER BY h.held_since_ms, h.action_id LIMIT %s OFFSET %s",
        ),
        (limit, start),
    )
    counted = fetch_one(conn, _holds_query(schema, "SELECT count(*) AS n ", condition))
    total = int(counted["n"]) if counted else 0
    return {"holds": holds, "total": total, "page": page(start, limit, len(holds), total)}


def open_hold(conn: psycopg.Connection[Any], schema: str, action_id: str) -> Json | None:
    """``action_id``'s open hold, as :func:`list_holds` lists it, or ``None``."""
    return fetch_one(
        conn, _holds_query(schema, _HOLD_COLUMNS, _OPEN + " AND h.action_id = %s"), (action_id,)
    )


def evicted_at(conn: psycopg.Connection[Any], schema: str, run_id: str) -> int | None:
    """When the gateway evicted ``run_id``'s finished journal (epoch ms), or ``None``."""
    row = fetch_one(
        conn,
        sql.SQL(
            "SELECT time_ms FROM {} WHERE run_id = %s AND type = 'JournalEvicted' "
            "ORDER BY time_ms DESC LIMIT 1"
        ).format(table(schema, "event_log")),
        (run_id,),
    )
    return int(row["time_ms"]) if row else None


def runs_needing_recovery(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Runs with an action not settled (held ones included), or whose latest checkpoint still
    names a next task."""
    rows = fetch_all(
        conn,
        sql.SQL(
            "SELECT run_id FROM {status} WHERE NOT (status = ANY(%s)) "
            "UNION SELECT c.run_id FROM {checkpoints} c WHERE cardinality(c.next_tasks) > 0 "
            "AND c.sequence = "
            "(SELECT max(sequence) FROM {checkpoints} x WHERE x.run_id = c.run_id) "
            "ORDER BY 1"
        ).format(
            status=table(schema, "action_status"), checkpoints=table(schema, "journal_checkpoints")
        ),
        (list(SETTLED),),
    )
    return [str(r["run_id"]) for r in rows]


def recovery_receipt_since(
    conn: psycopg.Connection[Any], schema: str, run_id: str, since_ms: int
) -> Json | None:
    """The first recovery receipt of ``run_id`` recorded at or after ``since_ms``."""
    rows = fetch_all(
        conn,
        sql.SQL(
            "SELECT r.*, s.owner_instance, s.journal_origin FROM {receipts} r "
            "LEFT JOIN {started} s ON s.recovery_id = r.recovery_id "
            "WHERE r.run_id = %s AND r.recorded_at_ms >= %s ORDER BY r.recorded_at_ms LIMIT 1"
        ).format(
            receipts=table(schema, "journal_recovery_receipts"),
            started=table(schema, "journal_recoveries"),
        ),
        (run_id, since_ms),
    )
    return rows[0] if rows else None


def resolution_since(
    conn: psycopg.Connection[Any], schema: str, action_id: str, since_ms: int
) -> Json | None:
    """The first resolution of a hold of ``action_id`` made at or after ``since_ms``."""
    rows = fetch_all(
        conn,
        sql.SQL(
            "SELECT * FROM {} WHERE action_id = %s AND resolved_at_ms >= %s "
            "ORDER BY resolved_at_ms LIMIT 1"
        ).format(table(schema, "journal_hold_resolutions")),
        (action_id, since_ms),
    )
    return rows[0] if rows else None
