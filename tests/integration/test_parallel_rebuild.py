"""A rebuild whose load runs in worker processes (``rebuild(workers=n)``,
:mod:`projections.parallel_load`) leaves the tables one process leaves, on the real broker and
PostgreSQL: with rows held across many flushes, when verifying, when PostgreSQL refuses a held
row, and when a worker dies. Rows of one key held by two workers:
``test_projection_store_shares.py``."""

from __future__ import annotations

import io
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import projections.rebuild as rebuild_module
from projections.db import REBUILD_SUFFIX, connect, schema_exists, schema_name
from projections.errors import ProjectionError
from projections.projector import Projector
from projections.rebuild import rebuild
from schemas.events import RunAdmitted
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.drills import children_running
from tests.support.history import (
    Emitted,
    build_history,
    cleanup,
    produce_history,
    schema_differences,
)
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _settings(history: list[Emitted], rng: random.Random) -> Settings:
    s = unique_settings(partitions=6)
    ensure_topics(s)
    produce_history(s, history, rng=rng, transaction_size=200, abort_every=6)
    return s


@pytest.fixture(scope="module")
def history() -> list[Emitted]:
    return build_history(random.Random(41), 300)


@pytest.fixture(scope="module")
def settings(history: list[Emitted]) -> Iterator[Settings]:
    """One backlog for the module: every test leaves the live schema a whole projection of it
    (rebuilt, or as it was), which is what the next one starts from."""
    s = _settings(history, random.Random(42))
    yield s
    cleanup(s)


def _plain(settings: Settings) -> str:
    """A batch-by-batch projection of every topic, in a schema of its own (made once: later
    calls find it caught up)."""
    schema = schema_name(settings.topic_prefix) + "__plain"
    with Projector(settings, schema=schema, batch_size=200) as projector:
        projector.run_until(timeout_s=60)
    return schema


def test_workers_holding_rows_across_flushes_leave_what_one_process_leaves(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _plain(settings)
    # Each worker writes its held rows every ~150 rows: dozens of flushes, upserted among
    # the other workers' rows.
    monkeypatch.setattr(rebuild_module, "HELD_ROWS", 150)
    result = rebuild(settings, stream=io.StringIO(), show_progress=False, timeout_s=120, workers=4)
    assert result.swapped
    assert result.messages > 4000
    assert schema_differences(settings, plain, schema_name(settings.topic_prefix)) == []


def test_verify_with_workers_reports_no_difference(settings: Settings) -> None:
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    result = rebuild(settings, verify=True, stream=io.StringIO(), show_progress=False, workers=2)
    assert result.differences == []
    assert result.messages > 4000
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert not schema_exists(conn, schema_name(settings.topic_prefix) + REBUILD_SUFFIX)


def test_a_row_postgresql_refuses_in_a_worker_loads_again_batch_by_batch(
    settings: Settings, history: list[Emitted]
) -> None:
    plain = _plain(settings)
    run_id = next(e.record.run_id for e in history if isinstance(e.record, RunAdmitted))

    def refuse_one_run(conn: psycopg.Connection[Any], schema: str) -> None:
        # Only in the first load's schema: the load batch by batch migrates a fresh one.
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT refused CHECK (run_id <> {})").format(
                sql.Identifier(schema, "runs"), sql.Literal(run_id)
            )
        )

    out = io.StringIO()
    result = rebuild(
        settings,
        stream=out,
        show_progress=False,
        timeout_s=120,
        workers=2,
        _after_migrate=refuse_one_run,
    )
    assert "loading again batch by batch" in out.getvalue()
    assert result.swapped
    assert schema_differences(settings, plain, schema_name(settings.topic_prefix)) == []


def test_a_worker_killed_mid_load_fails_the_rebuild_and_leaves_the_live_tables(
    settings: Settings,
) -> None:
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    live = schema_name(settings.topic_prefix)
    killed: list[int] = []

    def kill_a_worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = children_running(os.getpid(), "projections.parallel_load")
            if found:
                os.kill(found[0], signal.SIGKILL)
                killed.append(found[0])
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    with pytest.raises(ProjectionError, match=r"rebuild worker \d of 2: exited with code -9"):
        rebuild(settings, stream=io.StringIO(), show_progress=False, timeout_s=60, workers=2)
    killer.join()
    assert killed
    assert children_running(os.getpid(), "projections.parallel_load") == []
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert not schema_exists(conn, live + REBUILD_SUFFIX)
    # The live schema is the projector's, untouched: a rebuild now verifies it.
    verified = rebuild(settings, verify=True, stream=io.StringIO(), show_progress=False)
    assert verified.differences == []
