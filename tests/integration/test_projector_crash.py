"""Crashes and outages leave exactly the tables of an uninterrupted run.

- ``sluicegate projector`` as a subprocess, killed with SIGKILL mid-stream several times and
  restarted;
- the projector's PostgreSQL connections terminated mid-stream (server side);
- a real PostgreSQL restart mid-stream (``pg_ctlcluster``), kept short; skipped where this
  process may not restart the cluster.

Each run is compared row by row with a projection of the same topics into another schema
made in one uninterrupted pass.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from projections import batch_writer
from projections.compare import compare_schemas
from projections.db import connect, schema_name
from projections.errors import ProjectionError
from projections.migrate import migrate
from projections.projector import Projector
from projections.rebuild import stored_offsets
from projections.store import Offsets
from streams.settings import Settings
from tests.support.alone import require_alone
from tests.support.history import (
    build_history,
    fresh_topics,
    produce_history,
    terminate_projector_backends,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=6) as s:
        yield s


def _stored(settings: Settings, schema: str) -> Offsets:
    """The stored offsets, or nothing while the schema or the server is not there."""
    try:
        with connect(settings.pg_dsn, autocommit=True) as conn:
            return stored_offsets(conn, schema)
    except (ProjectionError, psycopg.Error):
        return {}


def _wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _caught_up(settings: Settings, schema: str, ends: Offsets) -> bool:
    stored = _stored(settings, schema)
    return all(stored.get(tp, 0) >= o for tp, o in ends.items())


def assert_same_as_uninterrupted(settings: Settings) -> None:
    live = schema_name(settings.topic_prefix)
    reference = live + "__reference"
    with Projector(settings, schema=reference, batch_size=5000) as projector:
        projector.run_until(stored_offsets_of(settings, live), timeout_s=60)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        differences = compare_schemas(conn, live, reference)
    assert [d.describe() for d in differences] == []


def stored_offsets_of(settings: Settings, schema: str) -> Offsets:
    return _stored(settings, schema)


def _sum(offsets: Offsets) -> int:
    return sum(offsets.values())


def _progressed(
    settings: Settings,
    schema: str,
    at_least: float,
    proc: subprocess.Popen[bytes] | None = None,
) -> Callable[[], bool]:
    """True once the stored offsets add up to ``at_least`` (or ``proc`` has exited)."""

    def check() -> bool:
        exited = proc is not None and proc.poll() is not None
        return exited or _sum(_stored(settings, schema)) >= at_least

    return check


def _start_projector(settings: Settings, batch_size: int) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_PG_DSN=settings.pg_dsn,
        SLUICEGATE_KAFKA=settings.kafka,
    )
    return subprocess.Popen(
        [SLUICEGATE, "projector", "--batch-size", str(batch_size)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_kill_9_mid_batch_and_restart_leaves_the_same_tables(settings: Settings) -> None:
    rng = random.Random(3)
    history = build_history(rng, 700)
    produce_history(settings, history, rng=rng, transaction_size=400, abort_every=7)
    schema = schema_name(settings.topic_prefix)
    with Projector(settings) as probe:
        ends = probe.end_offsets()
    total = _sum(ends)

    kills = 0
    for fraction in (0.15, 0.4, 0.7):
        proc = _start_projector(settings, batch_size=300)
        try:
            _wait_until(
                _progressed(settings, schema, total * fraction, proc),
                60,
                f"{fraction:.0%} projected",
            )
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            # Let it get into the next batch, then kill without warning.
            time.sleep(rng.uniform(0.0, 0.05))
            proc.send_signal(signal.SIGKILL)
            kills += 1
        finally:
            proc.wait(10)
    assert _sum(_stored(settings, schema)) < total, "finished before the last kill"

    proc = _start_projector(settings, batch_size=300)
    try:
        _wait_until(lambda: _caught_up(settings, schema, ends), 60, "catching up after kills")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    assert kills == 3
    assert_same_as_uninterrupted(settings)


def _run_in_thread(projector: Projector) -> threading.Thread:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            projector.run()
        except BaseException as e:  # surfaced by the test below
            errors.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def _stop(projector: Projector, thread: threading.Thread) -> None:
    """Stop a projector :func:`_run_in_thread` runs; what it raised fails the test."""
    projector.stop.set()
    thread.join(15)
    projector.close()
    assert not thread.errors  # type: ignore[attr-defined]


def test_connections_killed_mid_stream_leave_the_same_tables(settings: Settings) -> None:
    rng = random.Random(4)
    history = build_history(rng, 500)
    produce_history(settings, history, rng=rng, transaction_size=400, abort_every=7)
    schema = schema_name(settings.topic_prefix)
    projector = Projector(settings, batch_size=200)
    ends = projector.end_offsets()
    total = _sum(ends)
    thread = _run_in_thread(projector)
    try:
        terminated = 0
        for fraction in (0.2, 0.5, 0.8):
            _wait_until(
                _progressed(settings, schema, total * fraction),
                60,
                f"{fraction:.0%} projected",
            )
            terminated += terminate_projector_backends(settings, schema)
        _wait_until(lambda: _caught_up(settings, schema, ends), 60, "catching up")
    finally:
        _stop(projector, thread)
    assert terminated >= 3
    assert projector.stats.reconnects >= 1
    assert_same_as_uninterrupted(settings)


def _newest_postgres() -> str:
    versions = os.listdir("/usr/lib/postgresql")
    return max(versions, key=lambda v: [int(x) for x in v.split(".")])


def _as_root() -> list[str] | None:
    """The command prefix that runs as root here (``sudo -n`` if needed), or None."""
    if os.geteuid() == 0:
        return []
    if (
        shutil.which("sudo")
        and subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0
    ):
        return ["sudo", "-n"]
    return None


def _can_restart_postgres() -> bool:
    return shutil.which("pg_ctlcluster") is not None and _as_root() is not None


@pytest.mark.exclusive
@pytest.mark.skipif(not _can_restart_postgres(), reason="needs pg_ctlcluster as root or sudo -n")
def test_postgres_restart_mid_stream_leaves_the_same_tables(settings: Settings) -> None:
    require_alone("pg_ctlcluster restart")
    rng = random.Random(8)
    history = build_history(rng, 400)
    produce_history(settings, history, rng=rng, transaction_size=400, abort_every=7)
    schema = schema_name(settings.topic_prefix)
    projector = Projector(settings, batch_size=200)
    ends = projector.end_offsets()
    thread = _run_in_thread(projector)
    try:
        _wait_until(
            lambda: _sum(_stored(settings, schema)) >= _sum(ends) * 0.3, 60, "30% projected"
        )
        version = _newest_postgres()
        root = _as_root() or []
        subprocess.run([*root, "pg_ctlcluster", version, "main", "restart"], check=True, timeout=60)
        _wait_until(lambda: _caught_up(settings, schema, ends), 90, "catching up after restart")
    finally:
        _stop(projector, thread)
    assert projector.stats.reconnects >= 1
    assert_same_as_uninterrupted(settings)


REFUSE = """
CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  RAISE EXCEPTION 'could not extend file: No space left on device'
    USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
END $$;
CREATE TRIGGER full_disk BEFORE INSERT ON {schema}.event_log
  FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse();
"""


def test_a_batch_postgresql_keeps_refusing_is_retried_backing_off(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk (here a trigger raising PostgreSQL's own ``disk_full`` on every COPY into
    event_log) refuses every batch for as long as it lasts. The projector reconnected and
    tried again at once, about 2.5 times a second, each time with a warning of three lines
    (91 in 40 s on a tablespace that was really full); it waits 1 s doubling to 30 s
    between failures in a row now, disconnected (not ready, alive), one line each, and
    resumes exactly once a batch goes in. The back-off's waits are the test's: no sleep."""
    rng = random.Random(5)
    produce_history(settings, build_history(rng, 60), rng=rng, transaction_size=100)
    schema = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        migrate(conn, schema, settings.topic_prefix)
        conn.execute(REFUSE.format(schema=schema))
    waits: list[tuple[float, bool, bool]] = []

    def pause(seconds: float) -> bool:
        waits.append((seconds, projector.waiting_for_postgresql, projector.connected))
        if len(waits) == 6:  # room again
            with connect(settings.pg_dsn, autocommit=True) as conn:
                conn.execute(f"DROP TRIGGER full_disk ON {schema}.event_log")
                conn.execute(f"DROP FUNCTION {schema}.refuse()")
        return False

    projector = Projector(settings, batch_size=200, pause=pause)
    ends = projector.end_offsets()
    caplog.set_level("WARNING", logger="sluicegate.projector")
    thread = _run_in_thread(projector)
    try:
        _wait_until(lambda: _caught_up(settings, schema, ends), 60, "catching up")
    finally:
        _stop(projector, thread)
    assert waits == [(s, True, False) for s in (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)]
    assert projector.stats.reconnects == 7
    refused = [r.getMessage() for r in caplog.records if "DiskFull" in r.getMessage()]
    assert len(refused) == 7
    assert all("\n" not in m and "Check free disk space" in m for m in refused), refused
    assert refused[0].endswith("; reconnecting")
    assert refused[-1].endswith("; failed 7 times in a row, reconnecting in 30 s")
    assert_same_as_uninterrupted(settings)


def test_a_table_another_session_holds_is_waited_for_naming_it(
    settings: Settings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``ALTER TABLE``, a ``CREATE INDEX`` or a ``LOCK TABLE`` on a projection table held
    every batch that writes the table, in silence: the projector's loop stopped coming
    round, and ``serve`` took it for stalled and killed it, again and again while the lock
    lasted. A statement now waits at most ``TABLE_LOCK_WAIT_S`` (shortened here); the
    projector says who holds the table and tries again, reconnecting (alive, not ready),
    and resumes exactly once the lock goes."""
    monkeypatch.setattr(batch_writer, "TABLE_LOCK_WAIT_S", 0.5)
    rng = random.Random(6)
    produce_history(settings, build_history(rng, 30, tag="before"), rng=rng)
    schema = schema_name(settings.topic_prefix)
    projector = Projector(settings, batch_size=200)
    caplog.set_level("WARNING", logger="sluicegate")
    thread = _run_in_thread(projector)
    analyst = connect(settings.pg_dsn)
    try:
        _wait_until(lambda: _caught_up(settings, schema, projector.end_offsets()), 60, "before")
        analyst.execute(f"LOCK TABLE {schema}.runs IN ACCESS EXCLUSIVE MODE")
        pid = analyst.info.backend_pid
        produce_history(settings, build_history(rng, 30, tag="during"), rng=rng)

        def named() -> list[str]:
            return [r.getMessage() for r in caplog.records if f"pid {pid} (" in r.getMessage()]

        _wait_until(lambda: len(named()) >= 3, 60, "lines naming the session")
        # An hour on: alive only because it says it waits for PostgreSQL.
        alive = projector.alive(time.monotonic() + 3600)
        analyst.rollback()  # the lock ends
        _wait_until(lambda: _caught_up(settings, schema, projector.end_offsets()), 60, "after")
    finally:
        analyst.close()  # first: a batch still waiting for the lock would hold the stop
        _stop(projector, thread)
    print("\n" + "\n".join(named()[:3]))
    assert alive
    assert all("lock timeout" in m and f"on {schema}: pid {pid} (user " in m for m in named())
    assert all(m.count("holds runs") == 1 for m in named())
    assert_same_as_uninterrupted(settings)
