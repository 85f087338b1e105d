"""A bulk load (``Projector(held_rows=N)``, what a rebuild runs) leaves the tables a plain
batch-by-batch projection leaves: with rows held back across many batches and written in
several flushes, with its PostgreSQL connections terminated while rows are held, and when
PostgreSQL refuses some held rows (the rebuild then loads again batch by batch)."""

from __future__ import annotations

import io
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from projections.db import connect, schema_name
from projections.errors import ProjectionError
from projections.handlers import HANDLERS, Source
from projections.model import CounterKey, RowOp
from projections.projector import Projector
from projections.rebuild import rebuild, stored_offsets
from projections.store import Store
from schemas.events import RunAdmitted
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import (
    build_history,
    cleanup,
    produce_history,
    schema_differences,
    terminate_projector_backends,
)
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=6)
    ensure_topics(s)
    rng = random.Random(31)
    produce_history(s, build_history(rng, 300), rng=rng, transaction_size=200, abort_every=6)
    yield s
    cleanup(s)


def _project(settings: Settings, schema: str, held_rows: int = 0) -> Projector:
    with Projector(settings, schema=schema, batch_size=200, held_rows=held_rows) as projector:
        projector.run_until(timeout_s=60)
        return projector


def test_rows_held_across_batches_and_flushed_several_times_match_batch_by_batch(
    settings: Settings,
) -> None:
    base = schema_name(settings.topic_prefix)
    plain = _project(settings, base + "__plain")
    held = _project(settings, base + "__held", held_rows=150)
    assert held.stats.messages == plain.stats.messages > 1000
    # A batch is what has arrived, at most 200 messages: both ran through at least one batch
    # per 200 (how many more depends on fetch timing), so the rows were held across dozens.
    least = math.ceil(plain.stats.messages / 200)
    assert held.stats.batches >= least and plain.stats.batches >= least
    assert schema_differences(settings, base + "__plain", base + "__held") == []


def test_connections_terminated_while_rows_are_held_lose_none_of_them(
    settings: Settings,
) -> None:
    base = schema_name(settings.topic_prefix)
    _project(settings, base + "__plain")
    schema = base + "__held"
    projector = Projector(settings, schema=schema, batch_size=100, held_rows=10**9)
    total = sum(projector.end_offsets().values())
    errors: list[BaseException] = []

    def load() -> None:
        try:
            projector.run_until(timeout_s=90)
        except BaseException as e:  # surfaced below
            errors.append(e)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    terminated = 0
    try:
        for fraction in (0.25, 0.6):
            _wait_until(lambda f=fraction: _stored(settings, schema) >= total * f, 60)  # type: ignore[misc]
            terminated += terminate_projector_backends(settings, schema)
        thread.join(90)
    finally:
        projector.stop.set()
        thread.join(15)
        projector.close()
    assert errors == []
    assert terminated >= 2
    assert projector.stats.reconnects >= 1
    assert schema_differences(settings, base + "__plain", schema) == []


def test_rows_of_a_flush_that_failed_are_held_again_and_written_later(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = schema_name(settings.topic_prefix)
    _project(settings, base + "__plain")
    add_counters = Store._add_counters
    failed: list[int] = []

    def fail_once(store: Store, counts: Counter[CounterKey]) -> None:
        # Only flushes count (event_log rows have no counters): fail the first of them
        # after its rows were copied, as a connection lost mid-transaction would.
        if not failed:
            failed.append(sum(counts.values()))
            raise psycopg.OperationalError("injected: connection lost mid-flush")
        add_counters(store, counts)

    monkeypatch.setattr(Store, "_add_counters", fail_once)
    held = _project(settings, base + "__held", held_rows=150)
    assert failed and failed[0] > 0
    assert held.stats.reconnects == 1
    assert schema_differences(settings, base + "__plain", base + "__held") == []


def test_rows_postgresql_refuses_make_the_rebuild_load_again_batch_by_batch(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    admitted = HANDLERS[RunAdmitted]
    refused: list[str] = []

    def out_of_range(source: Source, record: RunAdmitted) -> list[RowOp]:
        ops = admitted(source, record)
        if not refused or refused[0] == record.run_id:
            refused[:1] = [record.run_id]
            # A bigint column cannot take it: PostgreSQL refuses the row (a DataError).
            ops[0][1]["admitted_at_ms"] = 2**70
        return ops

    monkeypatch.setitem(HANDLERS, RunAdmitted, out_of_range)
    write = Store.write
    writes: list[int] = []

    def counted(store: Store, *args: Any, **kwargs: Any) -> None:
        writes.append(1)
        write(store, *args, **kwargs)

    monkeypatch.setattr(Store, "write", counted)
    out = io.StringIO()
    result = rebuild(settings, stream=out, show_progress=False, timeout_s=120)
    assert result.swapped
    # The refused batch is halved until the one message is found: a few dozen transactions,
    # not one per message of the batch.
    assert result.messages > 4000
    assert len(writes) < 2 * math.log2(result.messages) + 20
    assert "loading again batch by batch" in out.getvalue()
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        parked = conn.execute(
            sql.SQL("SELECT src_topic, error FROM {}").format(sql.Identifier(live, "parked"))
        ).fetchall()
        runs = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE run_id = %s").format(
                sql.Identifier(live, "runs")
            ),
            (refused[0],),
        ).fetchone()
    assert len(parked) == 1
    assert "out of range" in parked[0][1]
    assert runs == (0,)


def test_a_projector_holding_rows_back_does_not_follow() -> None:
    projector = Projector(unique_settings(), held_rows=10)
    with pytest.raises(ProjectionError, match="only catches up"):
        projector.run()
    projector.close()


def _stored(settings: Settings, schema: str) -> int:
    try:
        with connect(settings.pg_dsn, autocommit=True) as conn:
            return sum(stored_offsets(conn, schema).values())
    except Exception:
        return 0


def _wait_until(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout_s} s")
        time.sleep(0.02)
