"""The gate's read side: a decision scope (current generations, pending candidates, recent
decisions) and the candidates of one run (their times and outcome)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.queries.connection import Json, fetch_all, iso, matchable, table

RECENT_DECISIONS = 20
_TIMES = ("source_time", "enqueued_at", "dequeued_at", "proposed_at", "final_at", "expires_at")


def _candidate(row: Json) -> Json:
    out = {k: v for k, v in row.items() if k != "rank"}
    for name in _TIMES:
        out[name] = iso(row[f"{name}_ms"])
    return out


def get_scope(conn: psycopg.Connection[Any], schema: str, scope_key: str) -> Json | None:
    """The scope's current generation per action kind, its pending candidates (proposed or
    accepted, no outcome yet) and its last decisions, newest first; ``None`` if unknown."""
    if not matchable(scope_key):
        return None
    current = fetch_all(
        conn,
        sql.SQL(
            "SELECT kind, generation, generation_kind, candidate_id, accepted_at_ms "
            "FROM {} WHERE scope_key = %s ORDER BY kind"
        ).format(table(schema, "scope_generations")),
        (scope_key,),
    )
    pending = fetch_all(
        conn,
        sql.SQL(
            "SELECT * FROM {} WHERE scope_key = %s AND outcome IN ('proposed', 'accepted') "
            "ORDER BY proposed_at_ms, candidate_id"
        ).format(table(schema, "candidates")),
        (scope_key,),
    )
    recent = fetch_all(
        conn,
        sql.SQL(
            "SELECT candidate_id, run_id, kind, outcome, reason, generation, current_generation, "
            "decided_at_ms FROM {} WHERE scope_key = %s "
            "ORDER BY decided_at_ms DESC, candidate_id LIMIT %s"
        ).format(table(schema, "candidate_outcomes")),
        (scope_key, RECENT_DECISIONS),
    )
    if not current and not pending and not recent:
        return None
    for row in current:
        row["accepted_at"] = iso(row["accepted_at_ms"])
    for row in recent:
        row["decided_at"] = iso(row["decided_at_ms"])
    return {
        "scope_key": scope_key,
        "current": current,
        "pending": [_candidate(r) for r in pending],
        "recent": recent,
    }


def get_run_candidates(conn: psycopg.Connection[Any], schema: str, run_id: str) -> list[Json]:
    """The candidates a run proposed, with their retained times and outcome."""
    if not matchable(run_id):
        return []
    rows = fetch_all(
        conn,
        sql.SQL("SELECT * FROM {} WHERE run_id = %s ORDER BY candidate_id").format(
            table(schema, "candidates")
        ),
        (run_id,),
    )
    return [_candidate(r) for r in rows]
