"""``sluicegate projections rebuild [--verify]`` against a live projection."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from projections.compare import compare_schemas
from projections.db import REBUILD_SUFFIX, connect, schema_exists, schema_name, tables_in
from projections.projector import Projector
from projections.rebuild import rebuild, stored_offsets
from projections.swap import SwapBlocked
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=6)
    ensure_topics(s)
    rng = random.Random(21)
    produce_history(s, build_history(rng, 80), rng=rng)
    with Projector(s) as projector:
        projector.run_until(timeout_s=60)
    yield s
    cleanup(s)


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
    return subprocess.run(
        [SLUICEGATE, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_verify_after_projection_reports_no_difference(settings: Settings) -> None:
    done = _cli(settings, "projections", "rebuild", "--verify")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "no differences" in done.stderr
    with connect(settings.pg_dsn, autocommit=True) as conn:
        live = schema_name(settings.topic_prefix)
        assert not schema_exists(conn, live + REBUILD_SUFFIX)


def test_a_further_target_gets_what_an_earlier_one_left_behind(settings: Settings) -> None:
    """``run_until`` leaves what lies at or past its target; a later call with a further
    target (a verify whose live projection moved meanwhile) projects it, and reaches it."""
    live = schema_name(settings.topic_prefix)
    again = live + "__again"
    with Projector(settings, schema=again) as projector:
        ends = projector.end_offsets()
        projector.run_until({tp: max(0, end - 3) for tp, end in ends.items()}, timeout_s=30)
        projector.run_until(ends, timeout_s=30)
        positions = projector.positions()
        assert {tp: positions.get(tp, 0) for tp in ends} == ends
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert compare_schemas(conn, live, again) == []


def test_verify_prints_every_difference(settings: Settings) -> None:
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        run_id, delivery_id = conn.execute(
            sql.SQL("SELECT run_id, delivery_id FROM {} ORDER BY run_id LIMIT 1").format(
                sql.Identifier(live, "runs")
            )
        ).fetchone() or ("", "")
        conn.execute(
            sql.SQL("UPDATE {} SET status = 'tampered' WHERE run_id = %s").format(
                sql.Identifier(live, "run_status")
            ),
            (run_id,),
        )
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE delivery_id = %s").format(
                sql.Identifier(live, "deliveries")
            ),
            (delivery_id,),
        )
        conn.execute(
            sql.SQL("INSERT INTO {} (key, value) VALUES ('x', 'y')").format(
                sql.Identifier(live, "meta")
            )
        )
    done = _cli(settings, "projections", "rebuild", "--verify", "--no-progress", "--workers", "2")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert any(
        line.startswith(f"run_status (run_id={run_id!r}): status: live 'tampered'")
        for line in lines
    )
    assert any(
        line.startswith(f"deliveries (delivery_id={delivery_id!r}): only in rebuilt")
        for line in lines
    )
    assert any(line.startswith("meta (key='x'): only in live") for line in lines)
    assert "3 difference(s)" in done.stderr


def test_rebuild_swaps_in_while_the_projector_runs(settings: Settings) -> None:
    live = schema_name(settings.topic_prefix)
    projector = Projector(settings, batch_size=50)
    thread = threading.Thread(target=projector.run, daemon=True)
    thread.start()
    rng = random.Random(22)

    def live_moves_on() -> None:
        # Between the rebuild's last batch and its swap the live projector projects more, so
        # the swap moves its stored offsets backwards under it.
        produce_history(settings, build_history(rng, 20, tag="during"), rng=rng)
        wait_caught_up(settings, projector, live)

    try:
        produce_history(settings, build_history(rng, 20, tag="before"), rng=rng)
        result = rebuild(settings, stream=io.StringIO(), _before_swap=live_moves_on)
        assert result.swapped
        produce_history(settings, build_history(rng, 20, tag="after"), rng=rng)
        wait_caught_up(settings, projector, live)
    finally:
        projector.stop.set()
        thread.join(15)
        projector.close()
    assert projector.stats.reseeks >= 1
    verified = rebuild(settings, verify=True, stream=io.StringIO())
    assert [d.describe() for d in verified.differences] == []


def wait_caught_up(settings: Settings, projector: Projector, schema: str) -> None:
    """Wait until ``schema`` stores offsets at least ``projector``'s ends; a schema its
    projectors (other processes, say) have not migrated yet is not caught up."""
    ends = projector.end_offsets()
    with connect(settings.pg_dsn, autocommit=True) as conn:

        def caught_up() -> bool:
            if not tables_in(conn, schema, ["offsets"]):
                return False
            stored = stored_offsets(conn, schema)
            return all(stored.get(tp, 0) >= o for tp, o in ends.items())

        _wait_until(caught_up)


def _wait_until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s")


class Reader:
    """Reads the live ``runs`` table over and over, each read bounded by 3 s of
    ``statement_timeout``, until stopped; counts the reads and those cancelled."""

    def __init__(self, settings: Settings) -> None:
        self.conn = connect(settings.pg_dsn, autocommit=True)
        self.conn.execute("SET statement_timeout = 3000")
        self.query = sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier(schema_name(settings.topic_prefix), "runs")
        )
        self.reads = 0
        self.cancelled: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.done.wait(0.05):
            try:
                self.conn.execute(self.query)
                self.reads += 1
            except psycopg.errors.QueryCanceled as e:
                self.cancelled.append(str(e).strip())

    def __enter__(self) -> Reader:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(10)
        self.conn.close()


def test_a_swap_behind_an_open_transaction_never_queues_readers_and_names_it(
    settings: Settings,
) -> None:
    """An analyst's transaction left open on a live table: the swap's lock waits used to
    queue every later reader behind them for as long as it stayed open."""
    live = schema_name(settings.topic_prefix)
    analyst = connect(settings.pg_dsn)  # its transaction holds runs until it ends
    analyst.execute(sql.SQL("SELECT 1 FROM {} LIMIT 1").format(sql.Identifier(live, "runs")))
    pid = analyst.info.backend_pid
    try:
        with Reader(settings) as reader, pytest.raises(SwapBlocked) as blocked:
            rebuild(settings, stream=io.StringIO(), swap_wait_s=3)
        message = str(blocked.value)
        print(f"\n{message}\nreads {reader.reads}, cancelled {reader.cancelled}")
        assert f"pid {pid} (user " in message and "idle in transaction since" in message
        assert "holds runs." in message and "pg_terminate_backend" in message
        assert reader.reads > 0 and reader.cancelled == []
        with connect(settings.pg_dsn, autocommit=True) as conn:
            assert schema_exists(conn, live) and not schema_exists(conn, live + REBUILD_SUFFIX)

        # Ended while the rebuild keeps trying: it swaps in, and no reader waited past 3 s.
        def end_in_4_s() -> None:
            threading.Timer(4.0, analyst.rollback).start()

        with Reader(settings) as reader:
            result = rebuild(settings, stream=io.StringIO(), _before_swap=end_in_4_s)
        print(f"swapped: reads {reader.reads}, cancelled {reader.cancelled}")
        assert result.swapped
        assert reader.reads > 0 and reader.cancelled == []
    finally:
        analyst.close()


def test_a_number_of_workers_outside_1_to_64_is_refused() -> None:
    settings = unique_settings()  # refused before anything is read
    for value in ("0", "-1", "two", "65", "\u00b2"):
        done = _cli(settings, "projections", "rebuild", "--workers", value)
        assert done.returncode == 2
        assert f"not a number of processes (1 to 64): {value!r}" in done.stderr


def test_verify_without_a_live_projection_says_what_to_do() -> None:
    settings = unique_settings(partitions=6)
    done = _cli(settings, "projections", "rebuild", "--verify")
    assert done.returncode == 1
    assert "no live projection" in done.stderr
    assert "sluicegate projections rebuild" in done.stderr
