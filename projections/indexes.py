"""Secondary indexes held back while a rebuild loads its fresh schema, and built after.

Maintaining ~20 secondary indexes row by row costs a rebuild more than building each once
from the loaded table. :func:`defer_indexes` drops every index of a schema that backs no
constraint (primary keys stay: the upserts' ``ON CONFLICT`` needs them) and returns their
definitions; :func:`build_indexes` creates them again. The definitions come from the
migrated schema itself, so the rebuilt schema ends with exactly the indexes a migrated one
has. A rebuild that dies in between leaves only its fresh schema, which the next rebuild
drops first.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql


def secondary_indexes(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, str]]:
    """``(name, definition)`` of every index in ``schema`` that backs no constraint."""
    rows = conn.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid "
        "JOIN pg_namespace n ON n.oid = i.relnamespace "
        "WHERE n.nspname = %s "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid) "
        "ORDER BY i.relname",
        (schema,),
    ).fetchall()
    return [(str(name), str(definition)) for name, definition in rows]


def defer_indexes(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Drop the secondary indexes of ``schema``; their definitions, for :func:`build_indexes`."""
    found = secondary_indexes(conn, schema)
    with conn.transaction():
        for name, _ in found:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
    return [definition for _, definition in found]


def build_indexes(conn: psycopg.Connection[Any], definitions: list[str]) -> None:
    """Create the indexes :func:`defer_indexes` dropped (one transaction)."""
    with conn.transaction():
        for definition in definitions:
            conn.execute(definition.encode("utf-8"))
