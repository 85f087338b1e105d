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

Deleted: the rows of :data:`BY_KEY` naming the key and of :data:`BY_RUN` naming one of its
runs. Kept (:data:`KEPT`): the counters (totals of everything ever projected: ``/v1/stats``
and ``/metrics`` never go down), workflows, scopes, parked records, dead letters, retention
gaps and the offsets.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from projections.db import connect, lock_key, schema_exists, schema_name, table
from projections.errors import ProjectionUnavailable
from projections.history import topic_starts
from projections.migrate import migrate
from projections.store import Offsets
from streams.clock import wall_clock_ms
from streams.core.durations import format_duration
from streams.settings import Settings

BATCH = 500
"""Keys examined per transaction."""

BY_KEY: tuple[str, ...] = ("event_log", "deliveries", "delivery_outcomes", "runs", "evictions")
"""Tables whose rows of an occurrence are found by ``admission_key`` (each has an index on it)."""
BY_RUN: tuple[str, ...] = (
    "event_log",
    "run_status",
    "branch_launches",
    "branch_reports",
    "branch_slots",
    "rerun_requests",
    "rerun_rejections",
    "dispatches",
    "journal_intents",
    "journal_attempts",
    "journal_receipts",
    "journal_holds",
    "journal_hold_resolutions",
    "journal_expirations",
    "journal_checkpoints",
    "journal_recoveries",
    "journal_recovery_receipts",
    "journal_refusals",
    "action_status",
    "candidates",
    "candidate_outcomes",
)
"""Tables whose rows of an occurrence are found by ``run_id`` (each has an index leading with
it, migration 010 added the last six)."""
KEPT: dict[str, str] = {
    "meta": "the schema's own facts",
    "offsets": "where the projector resumes",
    "counters": "totals of everything ever projected",
    "parked": "records that could not be decoded, named by offset only",
    "dead_letters": "what the stream apps could not decide, for the operator",
    "retention_gaps": "records the read model never had",
    "topic_ids": "which topics the offsets name",
    "workflows": "revisions, shared by every occurrence of a destination",
    "scope_generations": "the gate's scopes, kept as long as the deployment",
}
"""Tables prune never touches, and why."""

_GONE = 2**63 - 1
"""A bound no offset reaches: every record of a deleted topic is gone from it."""


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


@dataclass(frozen=True)
class _Bounds:
    """Where each source partition starts now, the topics deleted since, and the time from
    which a record is young (``None``: none is)."""

    starts: Offsets
    deleted: frozenset[str]
    young_from_ms: int | None = None

    def arrays(self) -> tuple[list[str], list[int], list[int]]:
        ordered = sorted(self.starts.items())
        return [t for (t, _), _ in ordered], [p for (_, p), _ in ordered], [o for _, o in ordered]


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
        for candidates in (_evicted, _never_admitted):
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
) -> _Bounds:
    starts, same, deleted = topic_starts(settings, conn, live)
    return _Bounds(
        {tp: o for tp, o in starts.items() if tp[0] in same}, frozenset(deleted), young_from_ms
    )


Candidates = list[tuple[str, Sequence[str] | None]]
"""Admission keys to examine, in order, each with the run ids its eviction names."""


def _evicted(conn: psycopg.Connection[Any], live: str, after: str, size: int) -> Candidates:
    """The next ``size`` keys after ``after`` the processor evicted."""
    return [
        (str(key), run_ids)
        for key, run_ids in conn.execute(
            sql.SQL(
                "SELECT admission_key, run_ids FROM {} WHERE admission_key > %s "
                "ORDER BY admission_key LIMIT %s"
            ).format(table(live, "evictions")),
            (after, size),
        )
    ]


def _never_admitted(conn: psycopg.Connection[Any], live: str, after: str, size: int) -> Candidates:
    """The next ``size`` keys after ``after`` whose every delivery was rejected (beyond the
    horizon, for an unknown destination): the processor never held anything of them. Reads
    the rejected outcomes only (their partial index, migration 011)."""
    query = sql.SQL(
        "SELECT DISTINCT o.admission_key FROM {outcomes} o WHERE o.admission_key > %s "
        "AND o.outcome = 'rejected' "
        "AND NOT EXISTS (SELECT 1 FROM {runs} r WHERE r.admission_key = o.admission_key) "
        "AND NOT EXISTS (SELECT 1 FROM {evictions} e WHERE e.admission_key = o.admission_key) "
        "ORDER BY o.admission_key LIMIT %s"
    ).format(
        outcomes=table(live, "delivery_outcomes"),
        runs=table(live, "runs"),
        evictions=table(live, "evictions"),
    )
    return [(str(key), None) for (key,) in conn.execute(query, (after, size))]


def _batch(
    conn: psycopg.Connection[Any],
    live: str,
    bounds: _Bounds,
    candidates: Candidates,
    report: PruneReport,
) -> str:
    """Examine ``candidates``, delete the prunable ones; the last key examined."""
    keys = [key for key, _ in candidates]
    runs_of: dict[str, set[str]] = {key: set(ids or ()) for key, ids in candidates}
    for run_id, key in conn.execute(
        sql.SQL("SELECT run_id, admission_key FROM {} WHERE admission_key = ANY(%s)").format(
            table(live, "runs")
        ),
        (keys,),
    ):
        runs_of[str(key)].add(str(run_id))
    key_of = {run: key for key, runs in runs_of.items() for run in runs}
    held = {key_of[run] for run in _held_runs(conn, live, sorted(key_of))}
    in_topics, young = _kept_by_records(conn, live, keys, key_of, bounds)
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
        _delete(conn, live, prunable, runs, report.rows)
    return keys[-1]


def _held_runs(conn: psycopg.Connection[Any], live: str, runs: Sequence[str]) -> list[str]:
    """Those of ``runs`` the gateway has not evicted while it has (or will have) a journal of
    them, and those with a candidate the gate has not decided."""
    if not runs:
        return []
    query = sql.SQL(
        "SELECT r.run_id FROM unnest(%s::text[]) AS r(run_id) WHERE "
        "(NOT EXISTS (SELECT 1 FROM {log} e WHERE e.run_id = r.run_id "
        "AND e.type = 'JournalEvicted') AND ("
        "EXISTS (SELECT 1 FROM {status} x WHERE x.run_id = r.run_id) "
        "OR EXISTS (SELECT 1 FROM {intents} x WHERE x.run_id = r.run_id) "
        "OR EXISTS (SELECT 1 FROM {checkpoints} x WHERE x.run_id = r.run_id) "
        "OR EXISTS (SELECT 1 FROM {recoveries} x WHERE x.run_id = r.run_id) "
        "OR EXISTS (SELECT 1 FROM {dispatches} d WHERE d.run_id = r.run_id AND NOT EXISTS "
        "(SELECT 1 FROM {refusals} f WHERE f.action_id = d.action_id)))) "
        "OR EXISTS (SELECT 1 FROM {candidates} c WHERE c.run_id = r.run_id "
        "AND c.final_at_ms IS NULL)"
    ).format(
        log=table(live, "event_log"),
        status=table(live, "action_status"),
        intents=table(live, "journal_intents"),
        checkpoints=table(live, "journal_checkpoints"),
        recoveries=table(live, "journal_recoveries"),
        dispatches=table(live, "dispatches"),
        refusals=table(live, "journal_refusals"),
        candidates=table(live, "candidates"),
    )
    return [str(run_id) for (run_id,) in conn.execute(query, (list(runs),))]


def _kept_by_records(
    conn: psycopg.Connection[Any],
    live: str,
    keys: Sequence[str],
    key_of: dict[str, str],
    bounds: _Bounds,
) -> tuple[set[str], set[str]]:
    """Those of ``keys`` with a record (their own or one of their runs') still in a topic
    (at or above its partition's start, or on a partition whose start is unknown), and
    those with a record of ``bounds.young_from_ms`` or later (its own time, else the
    broker's; one with neither counts as young)."""
    topics, parts, starts = bounds.arrays()
    deleted = sorted(bounds.deleted)
    topics += deleted
    parts += [-1] * len(deleted)  # any partition: matched by topic below
    starts += [_GONE] * len(deleted)
    runs = sorted(key_of)
    query = sql.SQL(
        "SELECT x.k, bool_or(b.bound IS NULL OR x.src_offset >= b.bound), "
        "bool_or(coalesce(x.t, %s) >= %s) FROM ("
        "SELECT e.admission_key AS k, e.src_topic, e.src_partition, e.src_offset, "
        "coalesce(e.time_ms, e.kafka_ts_ms) AS t FROM {log} e "
        "WHERE e.admission_key = ANY(%s) UNION ALL "
        "SELECT m.k, e.src_topic, e.src_partition, e.src_offset, "
        "coalesce(e.time_ms, e.kafka_ts_ms) "
        "FROM unnest(%s::text[], %s::text[]) AS m(run_id, k) JOIN {log} e ON e.run_id = m.run_id"
        ") x LEFT JOIN unnest(%s::text[], %s::int[], %s::bigint[]) AS b(topic, part, bound) "
        "ON x.src_topic = b.topic AND (x.src_partition = b.part OR b.part = -1) "
        "GROUP BY x.k"
    ).format(log=table(live, "event_log"))
    # Without a time to keep from, no record is young (a time is never at or past _GONE).
    young_from_ms = bounds.young_from_ms
    untimed, young_from = (_GONE, young_from_ms) if young_from_ms is not None else (0, _GONE)
    params = (
        untimed,
        young_from,
        list(keys),
        runs,
        [key_of[r] for r in runs],
        topics,
        parts,
        starts,
    )
    in_topics: set[str] = set()
    young: set[str] = set()
    for key, held_by_topic, held_by_age in conn.execute(query, params):
        if held_by_topic:
            in_topics.add(str(key))
        if held_by_age:
            young.add(str(key))
    return in_topics, young


def _delete(
    conn: psycopg.Connection[Any],
    live: str,
    keys: Sequence[str],
    runs: Sequence[str],
    rows: Counter[str],
) -> None:
    # Run-keyed rows first: ``runs`` (by key) is what names them.
    for name in BY_RUN:
        if runs:
            rows[name] += _delete_where(conn, live, name, "run_id", runs)
    for name in BY_KEY:
        rows[name] += _delete_where(conn, live, name, "admission_key", keys)


def _delete_where(
    conn: psycopg.Connection[Any], live: str, name: str, column: str, values: Sequence[str]
) -> int:
    cursor = conn.execute(
        sql.SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(
            table(live, name), sql.Identifier(column)
        ),
        (list(values),),
    )
    return max(cursor.rowcount, 0)
