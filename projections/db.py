"""Where the read model lives in PostgreSQL, and how to reach it.

All tables of one deployment live in one PostgreSQL schema derived from the topic prefix
(:func:`schema_name`), so deployments and tests that use different prefixes never share a
row. Identifiers reach SQL only through :class:`psycopg.sql.Identifier`.
"""

from __future__ import annotations

import hashlib
import re

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


def drop_schema(conn: psycopg.Connection, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists."""
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def table(schema: str, name: str) -> sql.Identifier:
    """A schema-qualified table identifier."""
    return sql.Identifier(schema, name)
