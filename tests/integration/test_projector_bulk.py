"""The store's bulk paths on the real broker and PostgreSQL.

Rows are copied with declared column types and no per-value scrub; a batch holding a NUL
falls back to scrubbing every value. A rebuild loads its fresh schema without secondary
indexes and builds them before the swap.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from psycopg import sql

from projections.db import connect, drop_schema, schema_name
from projections.indexes import secondary_indexes
from projections.migrate import migrate
from projections.projector import Projector
from projections.rebuild import rebuild
from schemas.codec import encode
from schemas.events import DeliveryDeduplicated, RunStatusChanged
from streams.settings import Settings
from tests.support.history import fresh_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def settings() -> Iterator[Settings]:
    with fresh_topics(partitions=1) as s:
        yield s


def _produce(settings: Settings, records: list[tuple[bytes, object]]) -> None:
    producer = Producer(settings.producer_config())
    for key, record in records:
        producer.produce(settings.topic_named("runs"), key=key, value=encode(record))
    producer.flush(10)


def test_a_batch_with_nul_text_is_stored_scrubbed_with_the_rest_of_its_batch(
    settings: Settings,
) -> None:
    _produce(
        settings,
        [
            (b"k1", RunStatusChanged("run-1", "k1", "pending", "running", 5)),
            (b"k\x002", DeliveryDeduplicated("d\x00", "k2", "run-2", "in\x00flight", 1, 2)),
            (b"k3", DeliveryDeduplicated("d-3", "k3", "run-3", "completed", 3, 4)),
        ],
    )
    schema = schema_name(settings.topic_prefix)
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
        assert projector.stats.messages == 3
        assert projector.stats.parked == 0
    with connect(settings.pg_dsn, autocommit=True) as conn:
        outcomes = conn.execute(
            sql.SQL("SELECT delivery_id, reason FROM {} ORDER BY delivery_id").format(
                sql.Identifier(schema, "delivery_outcomes")
            )
        ).fetchall()
        keys = conn.execute(
            sql.SQL("SELECT key, record->>'delivery_id' FROM {} ORDER BY src_offset").format(
                sql.Identifier(schema, "event_log")
            )
        ).fetchall()
        counters: dict[str, int] = dict(
            conn.execute(
                sql.SQL("SELECT label, value FROM {} WHERE name = 'duplicates'").format(
                    sql.Identifier(schema, "counters")
                )
            ).fetchall()
        )
    assert outcomes == [("d-3", "completed"), ("d\ufffd", "in\ufffdflight")]
    assert keys == [("k1", None), ("k\ufffd2", "d\ufffd"), ("k3", "d-3")]
    assert counters == {"in\ufffdflight": 1, "completed": 1}


def test_a_rebuilt_schema_has_the_indexes_of_a_migrated_one(settings: Settings) -> None:
    _produce(settings, [(b"k", RunStatusChanged("run-1", "k1", "pending", "running", 5))])
    live = schema_name(settings.topic_prefix)
    reference = live + "__reference"
    with connect(settings.pg_dsn, autocommit=True) as conn:
        migrate(conn, reference, settings.topic_prefix)
        want = [
            (name, definition.replace(reference, live))
            for name, definition in secondary_indexes(conn, reference)
        ]
        drop_schema(conn, reference)
    assert len(want) >= 20
    result = rebuild(settings, stream=io.StringIO(), show_progress=False, timeout_s=60)
    assert result.swapped and result.messages == 1
    with connect(settings.pg_dsn, autocommit=True) as conn:
        assert secondary_indexes(conn, live) == want
