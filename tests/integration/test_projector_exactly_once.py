"""The projector on the real broker and PostgreSQL: every committed message exactly once.

Histories are written with a transactional producer, with aborted transactions of
look-alike records in between; the projector (in-process here, as a subprocess in the crash
tests) must produce exactly the tables of the pure model fed with what a read_committed
consumer reads back.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from psycopg import sql

from projections.db import connect, schema_name
from projections.handlers import Source, project
from projections.migrate import migrations
from projections.model import TABLES
from projections.projector import Projector
from projections.sources import source_topics
from streams.adapters.replay import read_topics
from streams.settings import Settings
from tests.support.history import build_history, fresh_topics, produce_history, table_rows
from tests.support.memory_projection import MemoryProjection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=6) as s:
        yield s


def model_of_topics(settings: Settings) -> MemoryProjection:
    """The pure model applied to everything a read_committed consumer reads back."""
    memory = MemoryProjection()
    for item in read_topics(settings, source_topics()):
        assert item.record is not None, item.error
        source = Source(item.topic, item.partition, item.offset, item.key, item.timestamp_ms)
        memory.apply(project(source, item.record))
    return memory


def _normal(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if isinstance(out.get("record"), str):
        out["record"] = orjson.loads(out["record"])
    for k, v in out.items():
        if isinstance(v, tuple):
            out[k] = list(v)
    return out


def _by_key(rows: list[dict[str, Any]], key: tuple[str, ...]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: repr(tuple(r[k] for k in key)))


def assert_tables_equal_model(settings: Settings, schema: str, memory: MemoryProjection) -> None:
    with connect(settings.pg_dsn, autocommit=True) as conn:
        for spec in TABLES:
            got = [_normal(r) for r in table_rows(conn, schema, spec.name, spec.key)]
            want = [_normal(r) for r in memory.rows(spec.name)]
            assert _by_key(got, spec.key) == _by_key(want, spec.key), f"table {spec.name}"
        counters = {
            (n, lbl): v
            for n, lbl, v in conn.execute(
                sql.SQL("SELECT name, label, value FROM {}").format(
                    sql.Identifier(schema, "counters")
                )
            ).fetchall()
        }
        assert counters == dict(+memory.counters)


def test_projection_equals_model_and_ignores_aborted_transactions(settings: Settings) -> None:
    rng = random.Random(11)
    history = build_history(rng, 120)
    aborted = produce_history(settings, history, rng=rng)
    assert aborted > 0
    with Projector(settings) as projector:
        ends = projector.end_offsets()
        positions = projector.run_until(timeout_s=60)
        assert projector.stats.messages == len(history)
    schema = schema_name(settings.topic_prefix)
    assert {tp: o for tp, o in positions.items() if o} == {tp: o for tp, o in ends.items() if o}

    memory = model_of_topics(settings)
    assert len(memory.tables["event_log"]) == len(history)
    assert_tables_equal_model(settings, schema, memory)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        leaked = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE record::text LIKE %s").format(
                sql.Identifier(schema, "event_log")
            ),
            ("%aborted-%",),
        ).fetchone()
        assert leaked == (0,)

    # Running again from the stored offsets finds nothing to do and changes nothing.
    with Projector(settings) as again:
        again.run_until(timeout_s=30)
        assert again.stats.messages == 0
    assert_tables_equal_model(settings, schema, memory)


def test_more_history_later_is_appended_exactly_once(settings: Settings) -> None:
    rng = random.Random(5)
    first = build_history(rng, 30, tag="a")
    produce_history(settings, first, rng=rng)
    with Projector(settings, batch_size=7) as projector:
        projector.run_until(timeout_s=60)
        second = build_history(rng, 30, tag="b")
        produce_history(settings, second, rng=rng)
        projector.run_until(timeout_s=60)
        assert projector.stats.messages == len(first) + len(second)
    assert_tables_equal_model(
        settings, schema_name(settings.topic_prefix), model_of_topics(settings)
    )


def test_migrations_create_the_columns_the_specs_name(settings: Settings) -> None:
    schema = schema_name(settings.topic_prefix)
    with Projector(settings) as projector:
        projector.run_until(timeout_s=30)
    with connect(settings.pg_dsn, autocommit=True) as conn:
        for spec in TABLES:
            rows = conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (schema, spec.name),
            ).fetchall()
            assert sorted(r[0] for r in rows) == sorted(spec.columns), spec.name
        versions = conn.execute(
            sql.SQL("SELECT version FROM {} ORDER BY version").format(
                sql.Identifier(schema, "schema_migrations")
            )
        ).fetchall()
        assert [v[0] for v in versions] == [m.version for m in migrations()]


def test_undecodable_messages_are_parked_not_dropped(settings: Settings) -> None:
    from confluent_kafka import Producer

    producer = Producer(settings.producer_config())
    producer.produce(settings.topic_named("runs"), key=b"k", value=b'{"not": "avro"}')
    producer.produce(settings.topic_named("runs"), key=b"k", value=b"\xc3\x01" + b"\x00" * 8 + b"x")
    producer.flush(10)
    with Projector(settings) as projector:
        projector.run_until(timeout_s=30)
        assert projector.stats.parked == 2
    with connect(settings.pg_dsn, autocommit=True) as conn:
        rows = table_rows(conn, schema_name(settings.topic_prefix), "parked", ["src_offset"])
    assert [r["value"] for r in rows] == [b'{"not": "avro"}', b"\xc3\x01" + b"\x00" * 8 + b"x"]
    assert "NotSingleObjectEncoded" in rows[0]["error"]
    assert "UnknownFingerprint" in rows[1]["error"]
