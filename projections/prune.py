"""Prune the read model: occurrences the engine has forgotten and the topics no longer hold.

The projector keeps every row it wrote; the topics keep 14 to 30 days and the engine forgets
an occurrence once its retention has passed. :func:`prune` deletes an occurrence (an
admission key) with every row built from its records when all of these hold, checked in the
transaction that deletes it:

1. **The processor holds nothing of it**: it evicted it (an ``evictions`` row, from
   ``AdmissionRecordEvicted``), so a repeat of it is rejected beyond the horizon, never
   admitted or deduplicated against its runs, and no later record can point at a run that
   is gone; or it never admitted it (every delivery of it was rejected: beyond the horizon,
   for an unknown destination), so it has no runs at all.
2. **Nothing else holds one of its runs**: the run never reached the gateway (no dispatch,
   or only dispatches the gateway refused) or the gateway evicted its journal
   (``JournalEvicted``, written only once every action settled, no hold and no recovery
   open); and the gate decided every candidate of it.
3. **None of its records is still in a topic**: every ``event_log`` row naming the key or one
   of its runs lies below its partition's first offset (retention took it), or came from a
   topic deleted since. A rebuild could not bring any of its rows back, so ``projections
   rebuild --verify`` afterwards reports nothing it did not report before (only the pruned
   rows' "only in live" are gone).
4. With ``keep_ms`` (an audit horizon, ``--keep 400d``): **none of its records is younger**
   than that, by the record's own time (the broker's for a record that states none).

Deleted: the rows of :mod:`projections.prune_rows`' ``BY_KEY`` tables naming the key and
of its ``BY_RUN`` tables naming one of its runs. Kept (its ``KEPT``): the counters (totals
of everything ever projected: ``/v1/stats`` and ``/metrics`` never go down), workflows,
scopes, parked records, dead letters, retention gaps and the offsets.

Keys are examined in order (the evicted ones, then the never admitted ones), ``batch`` per
transaction; each transaction holds the writers' lock of the schema, so the live
projector's next batch waits for at most one batch of deletes, and a prune never
interleaves with a batch, a rebuild's swap or ``--verify``'s comparison. Stopping a prune
(Ctrl-C, kill) loses only the batch in flight; running it again carries on. A dry run does
every batch's work and rolls it back: its figures are exact for that moment.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from projections.db import connect, lock_key, schema_exists, schema_name
from projections.errors import ProjectionUnavailable
from projections.history import topic_starts
from projections.migrate import migrate
from projections.prune_rows import (
    Bounds,
    Candidates,
    delete_rows,
    evicted,
    held_runs,
    kept_by_records,
    never_admitted,
    runs_of_keys,
)
from streams.clock import wall_clock_ms
from streams.core.durations import format_duration
from streams.settings import Settings

BATCH = 500
"""Keys examined per transaction."""


@dataclass
class PruneReport:
    """What one :func:`prune` did (or, for a dry run, would have done)."""

    schema: str
    dry_run: bool
    examined: int = 0
    """Occurrences looked at: evicted, or never admitted."""
    pruned: int = 0
    """Occurrences deleted."""
    runs: int = 0
    """Their runs."""
    in_topics: int = 0
    """Occurrences kept: a record of theirs is still in a topic."""
    held: int = 0
    """Occurrences kept: a run of theirs is not done with the gateway or the gate."""
    young: int = 0
    """Occurrences kept: a record of theirs is younger than ``keep_ms``."""
    keep_ms: int = 0
    """How long an occurrence is kept after its last record, at least (0: no longer than
    the rules say)."""
    rows: Counter[str] = field(default_factory=Counter)
    """Rows deleted per table."""
    stopped: bool = False
    """Whether it was told to stop before it had examined every key it looks at."""

    def describe(self) -> str:
        did = "would prune" if self.dry_run else "pruned"
        rows = sum(self.rows.values())
        text = (
            f"projections prune: {did} {self.pruned:,} occurrences ({self.runs:,} runs, "
            f"{rows:,} rows) of {self.examined:,} evicted or never admitted in schema "
            f"{self.schema}; kept {self.in_topics:,} whose records are still in the topics "
            f"and {self.held:,} with a run the gateway or the gate still holds"
        )
        if self.keep_ms:
            text += f"; kept {self.young:,} younger than {format_duration(self.keep_ms)}"
        if self.dry_run:
            text += " (dry run: nothing deleted)"
        if self.stopped:
            text += " (stopped before the end: the next prune goes on)"
        return text

    def table_lines(self) -> list[str]:
        return [f"  {name} {count:,}" for name, count in sorted(self.rows.items()) if count]


def prune(
    settings: Settings,
    *,
    dry_run: bool = False,
    batch: int = BATCH,
    on_batch: Callable[[PruneReport], None] | None = None,
    stop: threading.Event | None = None,
    keep_ms: int = 0,
    now_ms: Callable[[], int] = wall_clock_ms,
) -> PruneReport:
    """Prune the read model of ``settings`` (see the module docstring); ``on_batch`` sees
    the report after every batch, and once ``stop`` is set no further batch starts (the
    report says ``stopped``). With ``keep_ms``, an occurrence with a record less than that
    old (by ``now_ms()`` at the start) is kept too. Raises :class:`ProjectionUnavailable`
    when PostgreSQL cannot be reached or the schema does not exist."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if keep_ms < 0:
        raise ValueError("keep_ms must be 0 or more")
    live = schema_name(settings.topic_prefix)
    report = PruneReport(live, dry_run, keep_ms=keep_ms)
    young_from_ms = now_ms() - keep_ms if keep_ms else None
    with connect(settings.pg_dsn, autocommit=True) as conn:
        if not schema_exists(conn, live):
            raise ProjectionUnavailable(f"no read model in schema {live}: nothing to prune")
        migrate(conn, live, settings.topic_prefix)
        bounds = _bounds(settings, conn, live, young_from_ms)
        for candidates in (evicted, never_admitted):
            after: str | None = ""
            while after is not None:
                if stop is not None and stop.is_set():
                    report.stopped = True
                    return report
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(live),))
                    found = candidates(conn, live, after, batch)
                    after = _batch(conn, live, bounds, found, report) if found else None
                    if dry_run:
                        raise psycopg.Rollback()  # the figures stand; the rows stay
                if on_batch is not None:
                    on_batch(report)
        return report


def _bounds(
    settings: Settings, conn: psycopg.Connection[Any], live: str, young_from_ms: int | None
) -> Bounds:
    starts, same, deleted = topic_starts(settings, conn, live)
    return Bounds(
        {tp: o for tp, o in starts.items() if tp[0] in same}, frozenset(deleted), young_from_ms
    )


def _batch(
    conn: psycopg.Connection[Any],
    live: str,
    bounds: Bounds,
    candidates: Candidates,
    report: PruneReport,
) -> str:
    """Examine ``candidates``, delete the prunable ones; the last key examined."""
    keys = [key for key, _ in candidates]
    runs_of = runs_of_keys(conn, live, candidates)
    key_of = {run: key for key, runs in runs_of.items() for run in runs}
    held = {key_of[run] for run in held_runs(conn, live, sorted(key_of))}
    in_topics, young = kept_by_records(conn, live, keys, key_of, bounds)
    in_topics -= held
    young -= held | in_topics
    prunable = [k for k in keys if k not in held and k not in in_topics and k not in young]
    runs = sorted(run for k in prunable for run in runs_of[k])
    report.examined += len(keys)
    report.held += len(held)
    report.in_topics += len(in_topics)
    report.young += len(young)
    report.pruned += len(prunable)
    report.runs += len(runs)
    if prunable:
        delete_rows(conn, live, prunable, runs, report.rows)
    return keys[-1]
