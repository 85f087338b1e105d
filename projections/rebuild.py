"""Rebuild the read model from the topics, and verify it against the live one.

``rebuild`` projects every source topic from the beginning into a fresh schema
(``<live>__rebuild``, its secondary indexes built once after the load: :mod:`.indexes`) and
then swaps it in: in one transaction, holding the writers' lock, the
live schema is renamed away, the fresh one renamed to the live name and the old one dropped.
A projector running meanwhile notices that the stored offsets moved and seeks to the new ones.

``verify`` rebuilds up to exactly the offsets the live schema has stored, compares every
table row by row (:func:`compare_schemas`) and drops the rebuilt copy; the live tables are
left as they were. Only what the topics still hold can be rebuilt: rows whose events left
retention (or were compacted away) show up as differences, and that is the truth.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from projections.db import (
    OLD_SUFFIX,
    REBUILD_SUFFIX,
    connect,
    lock_key,
    schema_exists,
    schema_name,
)
from projections.errors import HeldRowsRefused, ProjectionError, ProjectionUnavailable
from projections.indexes import build_indexes, defer_indexes
from projections.migrate import migrate
from projections.model import META_TABLES, TABLES
from projections.progress import Progress
from projections.projector import Projector
from projections.store import Offsets
from streams.settings import Settings

DiffKind = Literal["changed", "only_live", "only_rebuilt"]

HELD_ROWS = 250_000
"""Rows of the merged tables a rebuild holds in memory across batches (150,000 took 46 MiB) and
writes at once: straight into the fresh tables the first time, by upsert after that."""


@dataclass(frozen=True)
class Difference:
    """One row that differs between two schemas, identified by its table and key."""

    table: str
    key: dict[str, Any]
    kind: DiffKind
    left: dict[str, Any] | None
    right: dict[str, Any] | None

    def describe(self, left_name: str = "live", right_name: str = "rebuilt") -> str:
        key = ", ".join(f"{k}={v!r}" for k, v in self.key.items())
        if self.kind == "only_live":
            return f"{self.table} ({key}): only in {left_name}: {_short(self.left)}"
        if self.kind == "only_rebuilt":
            return f"{self.table} ({key}): only in {right_name}: {_short(self.right)}"
        assert self.left is not None and self.right is not None
        changes = "; ".join(
            f"{c}: {left_name} {self.left[c]!r} != {right_name} {self.right[c]!r}"
            for c in self.left
            if self.left[c] != self.right.get(c)
        )
        return f"{self.table} ({key}): {changes}"


def _short(row: dict[str, Any] | None) -> str:
    text = repr(row)
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass
class RebuildResult:
    schema: str
    offsets: Offsets
    messages: int
    seconds: float
    differences: list[Difference] = field(default_factory=list)
    swapped: bool = False


def _tables() -> list[tuple[str, tuple[str, ...]]]:
    return [(spec.name, spec.key) for spec in TABLES] + list(META_TABLES)


def compare_schemas(conn: psycopg.Connection[Any], left: str, right: str) -> list[Difference]:
    """Every row that differs between the projection tables of ``left`` and ``right``.

    Compares whole rows (``EXCEPT ALL`` both ways) and pairs the leftovers by primary key:
    a key on both sides is ``changed``, otherwise ``only_live``/``only_rebuilt``.
    """
    differences: list[Difference] = []
    for table, key in _tables():
        left_only = _except(conn, left, right, table)
        right_only = _except(conn, right, left, table)
        right_by_key = {tuple(r[k] for k in key): r for r in right_only}
        for row in left_only:
            k = tuple(row[c] for c in key)
            other = right_by_key.pop(k, None)
            kind: DiffKind = "changed" if other is not None else "only_live"
            differences.append(Difference(table, dict(zip(key, k, strict=True)), kind, row, other))
        for k, row in right_by_key.items():
            differences.append(
                Difference(table, dict(zip(key, k, strict=True)), "only_rebuilt", None, row)
            )
    return differences


def _except(conn: psycopg.Connection[Any], a: str, b: str, table: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            sql.SQL("SELECT * FROM {} EXCEPT ALL SELECT * FROM {}").format(
                sql.Identifier(a, table), sql.Identifier(b, table)
            )
        )
        return list(cur.fetchall())


def stored_offsets(conn: psycopg.Connection[Any], schema: str) -> Offsets:
    rows = conn.execute(
        sql.SQL("SELECT topic, partition, next_offset FROM {}").format(
            sql.Identifier(schema, "offsets")
        )
    ).fetchall()
    return {(str(t), int(p)): int(o) for t, p, o in rows}


def drop_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def rebuild(
    settings: Settings,
    *,
    verify: bool = False,
    stream: TextIO | None = None,
    show_progress: bool = True,
    timeout_s: float | None = None,
    _before_swap: Callable[[], None] | None = None,
) -> RebuildResult:
    """Rebuild the projection of ``settings.topic_prefix`` (see the module docstring).

    With ``verify``, the live schema must exist; the result lists the differences and the
    live tables are not touched. Without it, the rebuilt schema replaces the live one.
    """
    stream = stream or sys.stderr
    live = schema_name(settings.topic_prefix)
    fresh = live + REBUILD_SUFFIX
    started = time.monotonic()
    conn = connect(settings.pg_dsn, autocommit=True)
    try:
        # One rebuild per schema at a time (they share the fresh schema's name); the lock
        # belongs to this session and goes with it.
        locked = conn.execute(
            "SELECT pg_try_advisory_lock(%s)", (lock_key("rebuild:" + live),)
        ).fetchone()
        if not locked or not locked[0]:
            raise ProjectionError(
                f"another rebuild of {live} is running; wait for it to finish and try again"
            )
        if verify and not schema_exists(conn, live):
            raise ProjectionUnavailable(
                f"there is no live projection in schema {live} to verify against; run "
                "`sluicegate projections rebuild` (without --verify) or start the projector"
            )
        bar = Progress("rebuild", 0, stream, enabled=show_progress)
        target = stored_offsets(conn, live) if verify else None
        projector: Projector | None = None
        swapped = False
        try:
            try:
                projector, deferred, target = _load(
                    settings, conn, fresh, target, bar=bar, held_rows=HELD_ROWS, timeout_s=timeout_s
                )
            except HeldRowsRefused as e:
                # Refused rows no longer know their message: load batch by batch, parking them.
                print(f"rebuild: {e}; loading again batch by batch", file=stream)
                projector, deferred, target = _load(
                    settings, conn, fresh, target, bar=bar, held_rows=0, timeout_s=timeout_s
                )
            differences: list[Difference] = []
            if verify:
                differences = _verify(
                    conn,
                    live=live,
                    fresh=fresh,
                    projector=projector,
                    target=target,
                    timeout_s=timeout_s,
                )
            else:
                build_indexes(conn, deferred)
                if _before_swap is not None:
                    _before_swap()
                _swap(conn, live, fresh)
                swapped = True
            bar.close()
            return RebuildResult(
                schema=live if swapped else fresh,
                offsets=projector.positions(),
                messages=projector.stats.messages,
                seconds=time.monotonic() - started,
                differences=differences,
                swapped=swapped,
            )
        finally:
            if projector is not None:
                projector.close()
            if not swapped:
                drop_schema(conn, fresh)
    finally:
        conn.close()


def _load(
    settings: Settings,
    conn: psycopg.Connection[Any],
    fresh: str,
    target: Offsets | None,
    *,
    bar: Progress,
    held_rows: int,
    timeout_s: float | None,
) -> tuple[Projector, list[str], Offsets]:
    """Project into a freshly migrated ``fresh`` up to ``target`` (default: the ends); the
    projector, the secondary indexes still to build and the offsets reached."""
    drop_schema(conn, fresh)
    migrate(conn, fresh, settings.topic_prefix)
    deferred = defer_indexes(conn, fresh)
    # Nobody reads the fresh schema before the swap, whose commit is durable and so flushes
    # every batch written before it: the batches need not wait for the disk.
    projector = Projector(
        settings,
        schema=fresh,
        on_progress=bar.advance,
        durable_batches=False,
        held_rows=held_rows,
    )
    try:
        goal = projector.end_offsets() if target is None else target
        bar.total, bar.done = sum(goal.values()), 0
        projector.run_until(goal, timeout_s=timeout_s)
    except BaseException:
        projector.close()
        raise
    return projector, deferred, goal


def _verify(
    conn: psycopg.Connection[Any],
    *,
    live: str,
    fresh: str,
    projector: Projector,
    target: Offsets,
    timeout_s: float | None,
) -> list[Difference]:
    # The live projector may move on while we rebuild: compare under its writer lock, and
    # when its offsets moved, catch the rebuilt copy up to them first.
    for _ in range(20):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(live),))
            now = stored_offsets(conn, live)
            if now == target:
                return compare_schemas(conn, live, fresh)
        target = now
        projector.run_until(target, timeout_s=timeout_s)
    raise ProjectionError(
        "the live projection kept moving while verifying; try again, or stop the projector"
    )


def _swap(conn: psycopg.Connection[Any], live: str, fresh: str) -> None:
    old = live + OLD_SUFFIX
    with conn.transaction():
        # Writers of the live schema take this lock per batch: none is mid-batch now.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(live),))
        drop_schema(conn, old)
        if schema_exists(conn, live):
            conn.execute(
                sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                    sql.Identifier(live), sql.Identifier(old)
                )
            )
        conn.execute(
            sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                sql.Identifier(fresh), sql.Identifier(live)
            )
        )
        drop_schema(conn, old)
