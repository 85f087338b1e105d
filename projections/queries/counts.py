"""The counts of the public surface (``sluicegate stats``, ``GET /v1/stats``) and the offsets."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.queries import journal
from projections.queries.connection import Json, fetch_all, fetch_one, table

# The keys of `sluicegate stats --json` and GET /v1/stats, in the public surface's order.
STATS_KEYS: tuple[str, ...] = (
    "deliveries",
    "runs_admitted",
    "duplicates",
    "conflicts",
    "rejected",
    "branch_launches",
    "branch_relaunches",
    "expired_at_dequeue",
    "expired_before_send",
    "superseded",
    "actions_dispatched",
    "dispatches_refused",
    "unresolved_attempt",
    "holds",
)


# Counts broken down by reason (objects); the rest are plain integers.
BY_REASON: frozenset[str] = frozenset({"duplicates", "rejected"})


def get_stats(conn: psycopg.Connection[Any], schema: str) -> Json:
    """The counts of the README's "Projections" section: exactly :data:`STATS_KEYS`, reasons
    as objects."""
    stats: Json = {k: ({} if k in BY_REASON else 0) for k in STATS_KEYS}
    for row in fetch_all(
        conn,
        sql.SQL("SELECT name, label, value FROM {} ORDER BY name, label").format(
            table(schema, "counters")
        ),
    ):
        name, label, value = row["name"], row["label"], int(row["value"])
        if name in BY_REASON:
            stats[name][label] = value
        elif name in stats:
            stats[name] += value
    stats.update(journal.gauges(conn, schema))  # gauges: what holds now, not a count
    return stats


def get_offsets(conn: psycopg.Connection[Any], schema: str) -> list[Json]:
    """The stored next offset of every projected partition."""
    return fetch_all(
        conn,
        sql.SQL("SELECT topic, partition, next_offset FROM {} ORDER BY topic, partition").format(
            table(schema, "offsets")
        ),
    )


def get_parked_count(conn: psycopg.Connection[Any], schema: str) -> int:
    row = fetch_one(conn, sql.SQL("SELECT count(*) AS n FROM {}").format(table(schema, "parked")))
    return int(row["n"]) if row else 0


def get_dead_letter_counts(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    """Records the stream apps could not decide (``dead_letters``), by kind (``""`` for
    those written without one, before 0.2.0)."""
    rows = fetch_all(
        conn,
        sql.SQL("SELECT kind, count(*) AS n FROM {} GROUP BY kind").format(
            table(schema, "dead_letters")
        ),
    )
    return {str(row["kind"]): int(row["n"]) for row in rows}


def get_gap_offsets(conn: psycopg.Connection[Any], schema: str) -> int:
    """Offsets that left their topic's retention before the projector read them."""
    row = fetch_one(
        conn,
        sql.SQL("SELECT coalesce(sum(end_offset - first_offset), 0) AS n FROM {}").format(
            table(schema, "retention_gaps")
        ),
    )
    return int(row["n"]) if row else 0


def get_table_bytes(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    """Disk each table of ``schema`` takes now, its indexes and TOAST included (PostgreSQL's
    ``pg_total_relation_size``: no scan of the rows, so cheap at any size)."""
    rows = fetch_all(
        conn,
        sql.SQL(
            "SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')"
        ),
        (schema,),
    )
    return {str(row["name"]): int(row["bytes"]) for row in rows}
