"""An evicting history in the read model, retention played on it, and what a prune must do.

A history written by the real admission and gate cores (with evictions), and the action
journals of some of its runs written by the real journal core, go through the real broker
into the real projector (:func:`setup_history`). Retention is played by ``DeleteRecords``
(:func:`expire`), which moves a partition's start as retention does. What must go is worked
out from the history and the rows (:func:`forgotten`), independently of the prune's SQL.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import TopicPartition
from psycopg import sql

from projections.db import connect, schema_name
from projections.projector import Projector
from projections.rows import record_time_ms
from projections.sources import source_topics
from schemas.events import ActionDispatched, AdmissionRecordEvicted, RunAdmitted
from schemas.topics import DELIVERIES, JOURNAL, named
from streams.core.journal.retention import eviction
from streams.kafka.clients import read_committed_consumer
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import DAY_MS, Emitted, build_history, cleanup, produce_history
from tests.support.journal import World, dispatch
from tests.support.kafka import expire_records, unique_settings


@dataclass
class Setup:
    settings: Settings
    schema: str
    runs_of: dict[str, set[str]]
    """Admission key -> its run ids (every key of the history)."""
    evicted: set[str]
    never_admitted: set[str]
    """Keys whose every delivery was rejected (no run)."""
    gateway: set[str]
    """Runs the gate dispatched or the gateway journalled."""
    journal_evicted: set[str]
    """Runs whose journal the gateway evicted."""
    last_at: dict[str, int]
    """Admission key -> the latest time its records (its own and its runs') state."""


def _journal(run_id: str, action_id: str, *, evict: bool) -> list[Emitted]:
    """A filled entry's journal by the real journal core, evicted after its retention if
    ``evict``."""
    world = World()
    world.decide(
        dispatch(run_id=run_id, action_id=action_id, protection_json=None, notification_json=None)
    )
    world.settle()
    records: list[Any] = list(world.history)
    if evict:
        assert world.state is not None
        evicted = eviction(world.state, world.now + 30 * DAY_MS, 7 * DAY_MS)
        assert evicted is not None
        records.append(evicted)
    return [Emitted(JOURNAL.name, run_id, r) for r in records]


@contextmanager
def projected_history() -> Iterator[Setup]:
    """:func:`setup_history` under a prefix of its own, on topics created for it; its
    topics and schemas are dropped afterwards."""
    settings = unique_settings(partitions=3)
    ensure_topics(settings)
    try:
        yield setup_history(settings)
    finally:
        cleanup(settings)


def setup_history(settings: Settings) -> Setup:
    rng = random.Random(44)
    history = build_history(rng, 50, tag="prune")
    runs_of: dict[str, set[str]] = {}
    evicted: set[str] = set()
    delivered: set[str] = set()
    dispatches: list[Emitted] = []
    for e in history:
        r = e.record
        if e.topic == DELIVERIES.name:
            delivered.add(e.key)
        elif isinstance(r, RunAdmitted):
            runs_of.setdefault(r.admission_key, set()).add(r.run_id)
        elif isinstance(r, AdmissionRecordEvicted):
            evicted.add(r.admission_key)
        elif isinstance(r, ActionDispatched):
            dispatches.append(e)
    # The evicted occurrences of the history are too old for the gate to dispatch them; give
    # four of their runs what a dispatched run meets: one a journal the gateway evicted, one
    # a settled journal it still holds, one its gate dispatch with the journal evicted too,
    # one a gate dispatch the gateway has not journalled yet.
    assert len(evicted) >= 6 and dispatches and delivered - set(runs_of)
    evicted_runs = [min(runs_of[k]) for k in sorted(evicted)]
    journalled, kept, both, pending = evicted_runs[:4]
    extra = _journal(journalled, f"{journalled}.entry", evict=True)
    extra += _journal(kept, f"{kept}.entry", evict=False)
    template = dispatches[0]
    assert isinstance(template.record, ActionDispatched)
    for run in (both, pending):
        key = next(k for k, runs in runs_of.items() if run in runs)
        record = replace(template.record, action_id=f"{run}.entry", run_id=run, admission_key=key)
        extra.append(Emitted(template.topic, template.key, record))
    extra += _journal(both, f"{both}.entry", evict=True)
    produce_history(settings, history + extra, rng=rng)
    key_of = {run: key for key, runs in runs_of.items() for run in runs}
    last_at: dict[str, int] = {}
    for e in history + extra:
        named: str | None = getattr(e.record, "admission_key", None)
        named = named or key_of.get(getattr(e.record, "run_id", None) or "")
        at = record_time_ms(e.record)
        if named is not None and at is not None:
            last_at[named] = max(at, last_at.get(named, at))
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    gateway = {e.record.run_id for e in dispatches if isinstance(e.record, ActionDispatched)}
    return Setup(
        settings,
        schema_name(settings.topic_prefix),
        runs_of,
        evicted,
        delivered - set(runs_of),
        gateway | {journalled, kept, both, pending},
        {journalled, both},
        last_at,
    )


def expire(settings: Settings, keep: Collection[tuple[str, int]] = ()) -> None:
    """Move the start of every source partition but those of ``keep`` to its end (the
    compacted ``workflows`` has no retention to play)."""
    consumer = read_committed_consumer(settings, group_id=f"{settings.topic_prefix}expire")
    try:
        for topic in source_topics():
            spec = named(topic)
            if spec is None or spec.compacted:
                continue
            full = settings.topic_named(topic)
            metadata = consumer.list_topics(full, timeout=10).topics[full]
            for partition in metadata.partitions:
                if (topic, partition) in keep:
                    continue
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(full, partition), timeout=10
                )
                if high:
                    expire_records(settings, topic, partition, high)
    finally:
        consumer.close()


def snapshot(settings: Settings, schema: str) -> dict[str, Counter[str]]:
    """Every row of every table of ``schema``, as JSON text."""
    with connect(settings.pg_dsn, autocommit=True) as conn:
        tables = [
            str(t)
            for (t,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            )
        ]
        return {
            t: Counter(
                str(row)
                for (row,) in conn.execute(
                    sql.SQL("SELECT row_to_json(t)::text FROM {} t").format(
                        sql.Identifier(schema, t)
                    )
                )
            )
            for t in tables
        }


def names(row: str, keys: set[str], runs: set[str]) -> bool:
    """Whether a row (JSON text) names one of ``keys`` (a whole string, or one inside a JSON
    text column) or ``runs`` (anywhere: a run id is never part of another) in any column."""
    return any(f'"{k}"' in row or f'\\"{k}\\"' in row for k in keys) or any(r in row for r in runs)


def without(
    before: dict[str, Counter[str]], keys: set[str], runs: set[str]
) -> dict[str, Counter[str]]:
    return {
        t: Counter({row: n for row, n in rows.items() if not names(row, keys, runs)})
        for t, rows in before.items()
    }


def record_partitions(settings: Settings, schema: str) -> dict[str, set[tuple[str, int]]]:
    """Admission key -> the source partitions its records (and its runs') were read from."""
    with connect(settings.pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT coalesce(e.admission_key, r.admission_key), e.src_topic, e.src_partition "
                "FROM {log} e LEFT JOIN {runs} r ON r.run_id = e.run_id"
            ).format(log=sql.Identifier(schema, "event_log"), runs=sql.Identifier(schema, "runs"))
        ).fetchall()
    found: dict[str, set[tuple[str, int]]] = {}
    for key, topic, partition in rows:
        if key is not None:
            found.setdefault(str(key), set()).add((str(topic), int(partition)))
    return found


def forgotten(s: Setup) -> set[str]:
    """The keys never admitted, and the evicted keys none of whose runs the gateway still
    holds (dispatched without an evicted journal) or the gate has not decided."""
    with connect(s.settings.pg_dsn, autocommit=True) as conn:
        undecided = {
            str(run)
            for (run,) in conn.execute(
                sql.SQL("SELECT run_id FROM {} WHERE final_at_ms IS NULL").format(
                    sql.Identifier(s.schema, "candidates")
                )
            )
        }
    held = (s.gateway - s.journal_evicted) | undecided
    return s.never_admitted | {k for k in s.evicted if not (s.runs_of.get(k, set()) & held)}


def runs_of_keys(s: Setup, keys: set[str]) -> set[str]:
    return {run for k in keys for run in s.runs_of.get(k, set())}
