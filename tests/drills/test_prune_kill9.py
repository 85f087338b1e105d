"""A prune killed (SIGKILL) in the middle of an occurrence's deletes leaves it whole.

Each batch deletes its occurrences in one transaction. The drill holds a row lock on one
evicted key's ``evictions`` row, so the prune (one key per batch) stops inside that key's
transaction after deleting its event log, runs and journal rows, and kills it there. The
occurrences before it are gone, that one is whole, and the next prune finishes the job as
an uninterrupted one would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from projections.db import connect
from projections.prune import prune
from tests.support.kafka import wait_until
from tests.support.prune import (
    Setup,
    expire,
    forgotten,
    projected_history,
    runs_of_keys,
    snapshot,
    without,
)

pytestmark = [pytest.mark.drill, pytest.mark.timeout(180)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def setup() -> Iterator[Setup]:
    with projected_history() as projected:
        yield projected


def test_a_prune_killed_inside_an_occurrence_leaves_it_whole(setup: Setup) -> None:
    s = setup
    expire(s.settings)
    gone = forgotten(s)
    before = snapshot(s.settings, s.schema)
    with connect(s.settings.pg_dsn, autocommit=True) as conn:
        order = [
            str(k)
            for (k,) in conn.execute(
                sql.SQL("SELECT admission_key FROM {} ORDER BY admission_key").format(
                    sql.Identifier(s.schema, "evictions")
                )
            )
        ]
    prunable = [k for k in order if k in gone]
    assert len(prunable) >= 3
    stopped_at = prunable[2]
    done_first = set(order[: order.index(stopped_at)]) & gone

    with connect(s.settings.pg_dsn) as blocker:
        blocker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE admission_key = %s FOR UPDATE").format(
                sql.Identifier(s.schema, "evictions")
            ),
            (stopped_at,),
        )
        env = {**os.environ, "SLUICEGATE_TOPIC_PREFIX": s.settings.topic_prefix}
        pruner = subprocess.Popen(
            [SLUICEGATE, "projections", "prune", "--batch", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            backend = _waiting_delete(s, timeout_s=60)
            pruner.send_signal(signal.SIGKILL)
            pruner.wait(timeout=10)
        finally:
            if pruner.poll() is None:
                pruner.kill()
        blocker.rollback()  # the lock goes; the killed prune's transaction cannot commit
    with connect(s.settings.pg_dsn, autocommit=True) as conn:
        wait_until(
            lambda: (
                conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
                ).fetchone()
                == (0,)
            ),
            timeout_s=30,
            what="the killed prune's session to end",
        )

    after_kill = snapshot(s.settings, s.schema)
    assert after_kill == without(before, done_first, runs_of_keys(s, done_first))
    assert any(stopped_at in row for row in after_kill["evictions"])

    report = prune(s.settings)
    assert report.pruned == len(gone - done_first)
    assert snapshot(s.settings, s.schema) == without(before, gone, runs_of_keys(s, gone))


def _waiting_delete(s: Setup, *, timeout_s: float) -> int:
    """The pid of the prune's session once it waits for the row lock on ``evictions``."""
    found: list[int] = []
    with connect(s.settings.pg_dsn, autocommit=True) as conn:

        def waiting() -> bool:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (f'DELETE FROM "{s.schema}"."evictions"%',),
            ).fetchone()
            if row is not None:
                found.append(int(row[0]))
            return row is not None

        wait_until(waiting, timeout_s=timeout_s, what="the prune to wait inside a batch")
    return found[0]
