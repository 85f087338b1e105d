"""What a prune reads and deletes: the keys it looks at, what keeps them, and their rows.

The SQL of :func:`projections.prune.prune`, which states the rules and runs them batch by
batch under the writers' lock. Every function here runs inside that batch's transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from projections.db import table
from projections.store import Offsets

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


@dataclass(frozen=True)
class Bounds:
    """Where each source partition starts now, the topics deleted since, and the time from
    which a record is young (``None``: none is)."""

    starts: Offsets
    deleted: frozenset[str]
    young_from_ms: int | None = None

    def arrays(self) -> tuple[list[str], list[int], list[int]]:
        ordered = sorted(self.starts.items())
        return [t for (t, _), _ in ordered], [p for (_, p), _ in ordered], [o for _, o in ordered]


Candidates = list[tuple[str, Sequence[str] | None]]
"""Admission keys to examine, in order, each with the run ids its eviction names."""


def evicted(conn: psycopg.Connection[Any], live: str, after: str, size: int) -> Candidates:
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


def never_admitted(conn: psycopg.Connection[Any], live: str, after: str, size: int) -> Candidates:
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


def runs_of_keys(
    conn: psycopg.Connection[Any], live: str, candidates: Candidates
) -> dict[str, set[str]]:
    """Each candidate key's runs: those its eviction names and those ``runs`` holds."""
    found: dict[str, set[str]] = {key: set(ids or ()) for key, ids in candidates}
    for run_id, key in conn.execute(
        sql.SQL("SELECT run_id, admission_key FROM {} WHERE admission_key = ANY(%s)").format(
            table(live, "runs")
        ),
        ([key for key, _ in candidates],),
    ):
        found[str(key)].add(str(run_id))
    return found


def held_runs(conn: psycopg.Connection[Any], live: str, runs: Sequence[str]) -> list[str]:
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


def kept_by_records(
    conn: psycopg.Connection[Any],
    live: str,
    keys: Sequence[str],
    key_of: dict[str, str],
    bounds: Bounds,
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


def delete_rows(
    conn: psycopg.Connection[Any],
    live: str,
    keys: Sequence[str],
    runs: Sequence[str],
    rows: Counter[str],
) -> None:
    """Delete every row of :data:`BY_RUN` naming one of ``runs`` and of :data:`BY_KEY`
    naming one of ``keys``; add the counts per table to ``rows``."""
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
