"""Records that leave retention before the projector reads them are a recorded gap.

A projector stopped (or frozen, or behind) for longer than a topic keeps records finds its
next offset gone. Before, its consumer jumped to the partition's start by itself
(``auto.offset.reset=earliest``) and, at a restart, one warning line said so: the read model
lacked those records with nothing in it to tell. Retention is played by ``delete_records``,
which moves a partition's start exactly as retention does.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from psycopg import sql

from projections import queries
from projections.db import connect, schema_name
from projections.projector import Projector
from projections.rebuild import stored_offsets
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.component_process import ComponentProcess
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import expire_records, high_watermark, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    s = unique_settings(partitions=3)
    ensure_topics(s)
    rng = random.Random(51)
    produce_history(s, build_history(rng, 30, tag="before"), rng=rng, abort_every=0)
    with Projector(s) as projector:
        projector.run_until(timeout_s=60)
    yield s
    cleanup(s)


def _produce_more(settings: Settings, tag: str) -> None:
    rng = random.Random(tag)
    produce_history(settings, build_history(rng, 30, tag=tag), rng=rng, abort_every=0)


def _end(settings: Settings, topic: str, partition: int) -> int:
    consumer = Consumer({**settings.kafka_config(), "group.id": "ends"})
    try:
        return high_watermark(consumer, TopicPartition(settings.topic_named(topic), partition))
    finally:
        consumer.close()


def _gaps(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, int, int, int]]:
    rows = conn.execute(
        sql.SQL(
            "SELECT src_topic, src_partition, first_offset, end_offset FROM {} ORDER BY 1, 2, 3"
        ).format(sql.Identifier(schema, "retention_gaps"))
    ).fetchall()
    return [(str(t), int(p), int(f), int(e)) for t, p, f, e in rows]


def _logged(conn: psycopg.Connection[Any], schema: str, topic: str, partition: int) -> list[int]:
    rows = conn.execute(
        sql.SQL(
            "SELECT src_offset FROM {} WHERE src_topic = %s AND src_partition = %s ORDER BY 1"
        ).format(sql.Identifier(schema, "event_log")),
        (topic, partition),
    ).fetchall()
    return [int(o) for (o,) in rows]


def test_a_restarted_projector_records_what_left_retention_while_it_was_stopped(
    settings: Settings,
) -> None:
    live = schema_name(settings.topic_prefix)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        stored = stored_offsets(conn, live)
    _produce_more(settings, "while-stopped")
    high = _end(settings, "runs", 1)
    start = stored[("runs", 1)] + (high - stored[("runs", 1)]) // 2
    expire_records(settings, "runs", 1, start)

    with Projector(settings) as projector:
        positions = projector.run_until(timeout_s=60)
    assert positions[("runs", 1)] == high
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _gaps(conn, live) == [("runs", 1, stored[("runs", 1)], start)]
        logged = _logged(conn, live, "runs", 1)
    # Everything before the gap and everything the partition still holds, nothing between.
    assert [o for o in logged if stored[("runs", 1)] <= o < start] == []
    assert max(logged) >= start
    with queries.reader(settings) as (conn, schema):
        assert queries.get_gap_offsets(conn, schema) == start - stored[("runs", 1)]

    # Projected again from the stored offsets, nothing changes: the gap is one row.
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert _gaps(conn, live) == [("runs", 1, stored[("runs", 1)], start)]


def test_a_frozen_projector_records_the_gap_when_it_resumes(
    settings: Settings, tmp_path: Path
) -> None:
    """SIGSTOP while records arrive; they leave retention; SIGCONT: the running consumer's
    next fetch is out of range. It jumped to the start by itself before, without a word."""
    live = schema_name(settings.topic_prefix)
    projector = ComponentProcess(settings, "projector", log_path=tmp_path / "projector.log")
    projector.start()
    try:
        with connect(settings.pg_dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while not projector.log_mentions("projecting", 0):
                assert time.monotonic() < deadline, projector.log_tail()
                time.sleep(0.1)  # its partitions are assigned: the consumer is running
            # Frozen caught up (no batch in flight) and only once every thread has stopped:
            # a projector that still takes the records produced next would start the gap
            # past the offset read here.
            caught_up = _end(settings, "deliveries", 2)
            while stored_offsets(conn, live).get(("deliveries", 2)) != caught_up:
                assert time.monotonic() < deadline, projector.log_tail()
                time.sleep(0.1)
            stored = stored_offsets(conn, live)
            projector.pause()
            while not projector.stopped():
                assert time.monotonic() < deadline, projector.log_tail()
                time.sleep(0.01)
            _produce_more(settings, "while-frozen")
            high = _end(settings, "deliveries", 2)
            start = high - 1
            expire_records(settings, "deliveries", 2, start)
            projector.resume()
            deadline = time.monotonic() + 60
            while stored_offsets(conn, live).get(("deliveries", 2)) != high:
                assert time.monotonic() < deadline, projector.log_tail()
                assert projector.alive(), projector.log_tail()
                time.sleep(0.2)
            assert _gaps(conn, live) == [("deliveries", 2, stored[("deliveries", 2)], start)]
        assert projector.log_mentions("left retention before they were projected", 0)
    finally:
        projector.stop()
