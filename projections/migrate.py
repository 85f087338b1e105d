"""Versioned migrations of the read model, applied in order and recorded.

Migrations are ``projections/migrations/NNN_name.sql``, run with ``search_path`` set to the
deployment's schema (so the files never name it). Each runs in its own transaction together
with its row in ``schema_migrations`` (version, name, SHA-256); an applied migration whose
file changed is refused, because the live tables would no longer match a rebuild.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import psycopg
from psycopg import sql

from projections.db import lock_key, schema_exists
from projections.errors import MigrationError

_FILE = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@cache
def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with this build, by version (numbers must be 1, 2, 3, ...)."""
    found = []
    for entry in resources.files("projections.migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            text = entry.read_text(encoding="utf-8")
            found.append(Migration(int(match.group(1)), match.group(2), text))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise MigrationError(
            f"migration numbers {[m.version for m in found]} are not 1..n without gaps"
        )
    return tuple(found)


def migrate(conn: psycopg.Connection, schema: str, topic_prefix: str) -> list[int]:
    """Create ``schema`` if needed and apply every missing migration; return those applied.

    Safe to call from several processes at once (an advisory lock serializes them). Raises
    :class:`MigrationError` if an applied migration differs from this build's file, if the
    schema holds a newer migration than this build knows, or if the schema belongs to another
    topic prefix.
    """
    applied_now: list[int] = []
    ident = sql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("migrate:" + schema),))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (version int PRIMARY KEY, name text NOT NULL, "
                "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema, "schema_migrations"))
        )
        rows = conn.execute(
            sql.SQL("SELECT version, name, checksum FROM {} ORDER BY version").format(
                sql.Identifier(schema, "schema_migrations")
            )
        ).fetchall()
        done = {int(v): (str(n), str(c)) for v, n, c in rows}
        known = {m.version: m for m in migrations()}
        for version, (name, checksum) in sorted(done.items()):
            if version not in known:
                raise MigrationError(
                    f"schema {schema} has migration {version} ({name}) that this build does "
                    "not know; run a newer build, or `sluicegate projections rebuild` with this one"
                )
            if known[version].checksum != checksum:
                raise MigrationError(
                    f"migration {version:03d}_{name}.sql changed after it was applied to "
                    f"{schema}; released migrations are never edited: add a new one, then "
                    "run `sluicegate projections rebuild`"
                )
        for m in migrations():
            if m.version in done:
                continue
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(ident))
            conn.execute(m.text.encode("utf-8"))
            conn.execute(
                sql.SQL("INSERT INTO {} (version, name, checksum) VALUES (%s, %s, %s)").format(
                    sql.Identifier(schema, "schema_migrations")
                ),
                (m.version, m.name, m.checksum),
            )
            conn.execute("RESET search_path")
            applied_now.append(m.version)
        _claim(conn, schema, topic_prefix)
    return applied_now


def _claim(conn: psycopg.Connection, schema: str, topic_prefix: str) -> None:
    meta = sql.Identifier(schema, "meta")
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (key, value) VALUES ('topic_prefix', %s) ON CONFLICT DO NOTHING"
        ).format(meta),
        (topic_prefix,),
    )
    row = conn.execute(
        sql.SQL("SELECT value FROM {} WHERE key = 'topic_prefix'").format(meta)
    ).fetchone()
    if row is None or row[0] != topic_prefix:
        raise MigrationError(
            f"schema {schema} holds the projection of topic prefix {row[0] if row else None!r}, "
            f"not {topic_prefix!r}; choose a SLUICEGATE_TOPIC_PREFIX that differs in more than "
            "punctuation or case"
        )


def applied_versions(conn: psycopg.Connection, schema: str) -> list[int]:
    """Migration versions recorded in ``schema`` (empty when the schema does not exist)."""
    if not schema_exists(conn, schema):
        return []
    rows = conn.execute(
        sql.SQL("SELECT version FROM {} ORDER BY version").format(
            sql.Identifier(schema, "schema_migrations")
        )
    ).fetchall()
    return [int(r[0]) for r in rows]
