"""Rebuild the read model from the topics, and verify it against the live one.

``rebuild`` projects every source topic from the beginning into a fresh schema
(``<live>__rebuild``, its secondary indexes built once after the load: :mod:`.indexes`) and
then swaps it in: in one transaction, holding the writers' lock, the
live schema is renamed away, the fresh one renamed to the live name and the old one dropped
(:mod:`projections.swap`: in attempts that never make a reader wait long).
A projector running meanwhile notices that the stored offsets moved and seeks to the new ones.
A large load runs in worker processes, one share of the partitions each
(:mod:`projections.parallel_load`).

``verify`` rebuilds up to exactly the offsets the live schema has stored, compares every
table row by row (:func:`~projections.compare.compare_schemas`) and drops the rebuilt copy;
the live tables are left as they were. Only what the topics still hold can be rebuilt: rows
whose events left retention (or were compacted away) show up as differences, and that is
the truth. A rebuild that would drop such records from the live tables refuses instead,
unless ``drop_history`` says to (:mod:`projections.history`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

import psycopg
from psycopg import sql

from projections.compare import Difference, compare_schemas
from projections.db import (
    REBUILD_SUFFIX,
    connect,
    drop_schema,
    lock_key,
    schema_exists,
    schema_name,
)
from projections.errors import (
    HeldRowsRefused,
    HistoryNotInTopics,
    ProjectionError,
    ProjectionUnavailable,
)
from projections.history import dropped_line, gone_from_topics, lacking, refusal
from projections.indexes import build_indexes, defer_indexes
from projections.migrate import migrate
from projections.parallel_load import auto_workers, load_in_parallel
from projections.progress import Progress
from projections.projector import Projector
from projections.store import Offsets
from projections.swap import swap_in
from streams.settings import Settings

SWAP_WAIT_S = 300.0
"""How long a rebuild tries to swap in while other sessions hold the live tables."""
HELD_ROWS = 250_000
"""Rows of the merged tables a rebuild holds in memory across batches (150,000 took 46 MiB) and
writes at once: straight into the fresh tables the first time, by upsert after that."""


@dataclass
class RebuildResult:
    schema: str
    offsets: Offsets
    messages: int
    seconds: float
    differences: list[Difference] = field(default_factory=list)
    swapped: bool = False
    workers: int = 1
    """The processes that loaded the topics (1: this one)."""
    dropped: int = 0
    """Records the live tables held that the topics no longer did (``drop_history``)."""


def stored_offsets(conn: psycopg.Connection[Any], schema: str) -> Offsets:
    rows = conn.execute(
        sql.SQL("SELECT topic, partition, next_offset FROM {}").format(
            sql.Identifier(schema, "offsets")
        )
    ).fetchall()
    return {(str(t), int(p)): int(o) for t, p, o in rows}


def rebuild(
    settings: Settings,
    *,
    verify: bool = False,
    stream: TextIO | None = None,
    show_progress: bool = True,
    timeout_s: float | None = None,
    workers: int | None = None,
    swap_wait_s: float | None = None,
    drop_history: bool = False,
    _after_migrate: Callable[[psycopg.Connection[Any], str], None] | None = None,
    _before_swap: Callable[[], None] | None = None,
) -> RebuildResult:
    """Rebuild the projection of ``settings.topic_prefix`` (see the module docstring).

    With ``verify``, the live schema must exist; the result lists the differences and the
    live tables are not touched. Without it, the rebuilt schema replaces the live one.
    ``workers`` processes load the topics (:mod:`projections.parallel_load`; default
    :func:`~projections.parallel_load.auto_workers`, 1 loads in this process). The swap
    keeps trying for ``swap_wait_s`` (``None``: :data:`SWAP_WAIT_S`) while other sessions
    hold the live tables, never making a reader wait more than a second
    (:mod:`projections.swap`), then raises :class:`~projections.swap.SwapBlocked` naming
    them.

    A rebuild that would drop records the live tables hold and the topics no longer do
    (retention or compaction removed them) raises :class:`HistoryNotInTopics` and changes
    nothing, unless ``drop_history``: it looks before loading and, exactly, before swapping
    (:mod:`projections.history`). :attr:`RebuildResult.dropped` counts what went.
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
        guarded = not verify and schema_exists(conn, live)
        if guarded and not drop_history:
            early = gone_from_topics(settings, conn, live)
            if early:
                raise HistoryNotInTopics(refusal(early, live, settings.topic_prefix))
        bar = Progress("rebuild", 0, stream, enabled=show_progress)
        target = stored_offsets(conn, live) if verify else None
        dropped = 0
        loaded: _Loaded | None = None
        swapped = False
        load = partial(_load, settings, conn, fresh, target, bar=bar, timeout_s=timeout_s)
        try:
            try:
                loaded = load(held_rows=HELD_ROWS, workers=workers, after_migrate=_after_migrate)
            except HeldRowsRefused as e:
                # Refused rows no longer know their message: load batch by batch, parking them.
                print(f"rebuild: {e}; loading again batch by batch", file=stream)
                loaded = load(held_rows=0, workers=1)
            projector = loaded.projector
            differences: list[Difference] = []
            if verify:
                differences = _verify(
                    conn,
                    live=live,
                    fresh=fresh,
                    projector=projector,
                    target=loaded.goal,
                    timeout_s=timeout_s,
                )
            else:
                build_indexes(conn, loaded.deferred)
                if _before_swap is not None:
                    _before_swap()
                if guarded:
                    gone = lacking(
                        conn,
                        live,
                        fresh,
                        loaded.goal,
                        topic_prefix=settings.topic_prefix,
                        drop_history=drop_history,
                    )
                    dropped = sum(m.records for m in gone)
                    if gone:
                        print(f"rebuild: {dropped_line(gone, settings.topic_prefix)}", file=stream)
                patience = SWAP_WAIT_S if swap_wait_s is None else swap_wait_s
                swap_in(conn, live, fresh, patience_s=patience, stream=stream)
                swapped = True
            bar.close()
            return RebuildResult(
                schema=live if swapped else fresh,
                offsets=projector.positions(),
                messages=loaded.by_workers + projector.stats.messages,
                seconds=time.monotonic() - started,
                differences=differences,
                swapped=swapped,
                workers=loaded.workers,
                dropped=dropped,
            )
        finally:
            if loaded is not None:
                loaded.projector.close()
            if not swapped:
                drop_schema(conn, fresh)
    finally:
        conn.close()


@dataclass
class _Loaded:
    """A fresh schema loaded up to :attr:`goal`, and the secondary indexes still to build."""

    projector: Projector
    """At the offsets reached; it counts the messages it projected itself."""
    deferred: list[str]
    goal: Offsets
    workers: int
    by_workers: int
    """Messages the worker processes projected (0 when this process loaded)."""


def _load(
    settings: Settings,
    conn: psycopg.Connection[Any],
    fresh: str,
    target: Offsets | None,
    *,
    bar: Progress,
    held_rows: int,
    timeout_s: float | None,
    workers: int | None,
    after_migrate: Callable[[psycopg.Connection[Any], str], None] | None = None,
) -> _Loaded:
    """Project into a freshly migrated ``fresh`` up to ``target`` (default: the ends), with
    ``workers`` processes when rows are held (:mod:`projections.parallel_load`)."""
    drop_schema(conn, fresh)
    migrate(conn, fresh, settings.topic_prefix)
    if after_migrate is not None:
        after_migrate(conn, fresh)
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
        count = auto_workers(goal) if workers is None else workers
        if count < 2 or held_rows == 0:
            projector.run_until(goal, timeout_s=timeout_s)
            return _Loaded(projector, deferred, goal, workers=1, by_workers=0)
        by_workers = load_in_parallel(
            settings,
            fresh,
            goal,
            workers=count,
            held_rows=held_rows,
            timeout_s=timeout_s,
            on_progress=bar.advance,
        )
        # Every worker stored its offsets: this finds them and projects nothing more.
        projector.run_until(goal, timeout_s=timeout_s)
        return _Loaded(projector, deferred, goal, count, by_workers)
    except BaseException:
        projector.close()
        raise


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
