"""Where the read model lives in PostgreSQL, and how to reach it.

All tables of one deployment live in one PostgreSQL schema derived from the topic prefix
(:func:`schema_name`), so deployments and tests that use different prefixes never share a
row. Identifiers reach SQL only through :class:`psycopg.sql.Identifier`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from projections.errors import ProjectionUnavailable

# PostgreSQL truncates identifiers at 63 bytes; the rebuild adds a suffix of up to 10.
_MAX_BASE = 50
_UNSAFE = re.compile(r"[^a-z0-9_]")
REBUILD_SUFFIX = "__rebuild"
OLD_SUFFIX = "__old"


def schema_name(topic_prefix: str) -> str:
    """The schema of the read model for ``topic_prefix``: ``sg_`` + the prefix, sanitized.

    Lower-cased, every character outside ``[a-z0-9_]`` becomes ``_``; a name that would be
    too long for PostgreSQL is cut and ends with 8 hex digits of the prefix's SHA-256, so it
    stays unique. Two prefixes that sanitize alike (``a.b`` and ``a_b``) would share a schema;
    :func:`projections.migrate.migrate` records the prefix and refuses the second one.
    """
    base = "sg_" + _UNSAFE.sub("_", topic_prefix.lower())
    if len(base) > _MAX_BASE:
        digest = hashlib.sha256(topic_prefix.encode("utf-8")).hexdigest()[:8]
        base = f"{base[: _MAX_BASE - 9]}_{digest}"
    return base


def lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory-lock key for the writers of ``schema``."""
    digest = hashlib.sha256(b"sluicegate-projection:" + schema.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def describe_dsn(dsn: str) -> str:
    """``host:port/dbname`` of a DSN, without the password, for messages."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparsable DSN)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def connect(dsn: str, *, autocommit: bool = False, connect_timeout: int = 5) -> psycopg.Connection:
    """Open a connection, or raise :class:`ProjectionUnavailable` saying what to check."""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=connect_timeout)
    except psycopg.OperationalError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ProjectionUnavailable(
            f"cannot reach PostgreSQL at {describe_dsn(dsn)} ({first}); is it running "
            "(`make up`) and is SLUICEGATE_PG_DSN right?"
        ) from e


def schema_exists(conn: psycopg.Connection, schema: str) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)", (schema,)
    ).fetchone()
    return bool(row and row[0])


def tables_in(conn: psycopg.Connection[Any], schema: str, names: Sequence[str]) -> set[str]:
    """Those of ``names`` that ``schema`` has (a schema may predate a migration)."""
    row = conn.execute(
        "SELECT array_agg(t) FROM unnest(%s::text[]) AS t "
        "WHERE to_regclass(quote_ident(%s) || '.' || quote_ident(t)) IS NOT NULL",
        (list(names), schema),
    ).fetchone()
    return set(row[0] or []) if row else set()


def drop_schema(conn: psycopg.Connection, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists."""
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def lock_holders(conn: psycopg.Connection[Any], schema: str) -> str:
    """The other sessions holding locks on ``schema``'s tables, oldest transaction first
    (``pid 123 (user u, application psql, idle in transaction since 2026-12-06 07:20:01
    UTC) holds runs``), or what to look at when none is seen any more."""
    rows = conn.execute(
        """
        SELECT a.pid, a.usename, a.application_name, a.state, a.xact_start,
               string_agg(DISTINCT c.relname, ', ' ORDER BY c.relname)
        FROM pg_locks l
        JOIN pg_class c ON c.oid = l.relation
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND l.granted
          AND l.pid <> pg_backend_pid()
        GROUP BY a.pid, a.usename, a.application_name, a.state, a.xact_start
        ORDER BY a.xact_start NULLS LAST, a.pid
        """,
        (schema,),
    ).fetchall()
    if not rows:
        return "no other session holds its tables now (see pg_locks)"
    return "; ".join(_holder(tuple(row)) for row in rows)


def _holder(row: tuple[Any, ...]) -> str:
    pid, user, app, state, since, tables = row
    about = [f"user {user}" if user else "", f"application {app}" if app else ""]
    began = f" since {since:%Y-%m-%d %H:%M:%S %Z}" if isinstance(since, datetime) else ""
    about.append(f"{state or 'state unknown'}{began}")
    return f"pid {pid} ({', '.join(a for a in about if a)}) holds {tables}"


def note_lock_holders(error: psycopg.Error, conn: psycopg.Connection, schema: str) -> None:
    """Add to ``error`` (a lock wait that timed out on ``conn``) who holds ``schema``'s
    tables; ``conn``'s failed transaction is rolled back. Best effort: a connection that
    cannot answer adds nothing."""
    with contextlib.suppress(psycopg.Error):
        conn.rollback()
        error.add_note(f"on {schema}: {lock_holders(conn, schema)}")
        conn.rollback()


def table(schema: str, name: str) -> sql.Identifier:
    """A schema-qualified table identifier."""
    return sql.Identifier(schema, name)
