"""A rebuild never drops history the topics no longer hold without being told to.

The topics keep 14 to 30 days; the read model keeps everything. A rebuild projects only what
the topics still hold, so on a deployment older than the topics' retention it would replace
the live tables with a shorter history: runs, deliveries, the orders' journal. Retention is
played here by ``delete_records``, which moves a partition's start exactly as retention does.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from projections.db import REBUILD_SUFFIX, connect, schema_exists, schema_name
from projections.errors import HistoryNotInTopics
from projections.projector import Projector
from projections.rebuild import rebuild
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import expire_records, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=3)
    ensure_topics(s)
    rng = random.Random(31)
    produce_history(s, build_history(rng, 40), rng=rng)
    with Projector(s) as projector:
        projector.run_until(timeout_s=60)
    yield s
    cleanup(s)


def _records(conn: psycopg.Connection[Any], schema: str, topic: str) -> dict[int, int]:
    """Rows of ``event_log`` per partition of ``topic`` (short name)."""
    rows = conn.execute(
        sql.SQL("SELECT src_partition, count(*) FROM {} WHERE src_topic = %s GROUP BY 1").format(
            sql.Identifier(schema, "event_log")
        ),
        (topic,),
    ).fetchall()
    return {int(p): int(n) for p, n in rows}


def _busiest(conn: psycopg.Connection[Any], schema: str, topic: str) -> tuple[int, int]:
    partition, count = max(_records(conn, schema, topic).items(), key=lambda item: item[1])
    assert count >= 4
    return partition, count


def _below(
    conn: psycopg.Connection[Any], schema: str, topic: str, partition: int, end: int
) -> tuple[int, int, int]:
    """Rows of ``event_log`` at offsets below ``end`` and their lowest and highest offsets
    (transaction markers take offsets too)."""
    row = conn.execute(
        sql.SQL(
            "SELECT count(*), min(src_offset), max(src_offset) FROM {} WHERE src_topic = %s "
            "AND src_partition = %s AND src_offset < %s"
        ).format(sql.Identifier(schema, "event_log")),
        (topic, partition, end),
    ).fetchone()
    assert row is not None and row[0] > 0
    return int(row[0]), int(row[1]), int(row[2])


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
    return subprocess.run(
        [SLUICEGATE, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def test_a_rebuild_refuses_to_drop_records_that_left_retention(settings: Settings) -> None:
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        partition, before = _busiest(conn, live, "runs")
        everything = _records(conn, live, "runs")
        gone, first, last = _below(conn, live, "runs", partition, 3)
    expire_records(settings, "runs", partition, 3)

    done = _cli(settings, "projections", "rebuild", "--no-progress")
    assert done.returncode == 1, done.stderr
    assert (
        f"{settings.topic_prefix}runs[{partition}]: {gone} records (offsets {first} to {last})"
        in done.stderr
    )
    assert "--drop-history" in done.stderr
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _records(conn, live, "runs") == everything
        assert not schema_exists(conn, live + REBUILD_SUFFIX)

    done = _cli(settings, "projections", "rebuild", "--no-progress", "--drop-history")
    assert done.returncode == 0, done.stderr
    assert f"dropped {gone} records the topics no longer hold" in done.stderr
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _records(conn, live, "runs") == {**everything, partition: before - gone}


def test_records_that_leave_while_the_rebuild_loads_are_caught_before_the_swap(
    settings: Settings,
) -> None:
    """Retention that moves after the first look (between it and the load) still cannot
    shorten the history: what the rebuilt schema lacks is counted against the live one."""
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        partition, _ = _busiest(conn, live, "deliveries")
        everything = _records(conn, live, "deliveries")
        gone, _, _ = _below(conn, live, "deliveries", partition, 2)

    def retention_moves(conn: psycopg.Connection[Any], fresh: str) -> None:
        expire_records(settings, "deliveries", partition, 2)

    with pytest.raises(HistoryNotInTopics) as refused:
        rebuild(settings, show_progress=False, workers=1, _after_migrate=retention_moves)
    assert f"{settings.topic_prefix}deliveries[{partition}]: {gone} records" in str(refused.value)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _records(conn, live, "deliveries") == everything
        assert not schema_exists(conn, live + REBUILD_SUFFIX)


def test_a_rebuild_of_topics_that_hold_everything_swaps_in_as_before(settings: Settings) -> None:
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        everything = _records(conn, live, "runs")
    result = rebuild(settings, show_progress=False, workers=1)
    assert result.swapped
    assert result.dropped == 0
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _records(conn, live, "runs") == everything


def test_a_live_schema_from_before_topic_ids_is_compared_by_offset(settings: Settings) -> None:
    """Upgrade, then rebuild: the live schema is still at the migrations of the old build
    (no ``topic_ids`` before 005), and its records are compared by offset alone."""
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(live, "topic_ids")))
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE version >= 5").format(
                sql.Identifier(live, "schema_migrations")
            )
        )
        partition, _ = _busiest(conn, live, "runs")
        gone, _, _ = _below(conn, live, "runs", partition, 2)
    expire_records(settings, "runs", partition, 2)
    with pytest.raises(HistoryNotInTopics) as refused:
        rebuild(settings, show_progress=False, workers=1)
    assert f"holds {gone} records the topics no longer hold" in str(refused.value)
    result = rebuild(settings, show_progress=False, workers=1, drop_history=True)
    assert result.swapped and result.dropped == gone
