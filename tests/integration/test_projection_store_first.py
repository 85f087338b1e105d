"""A ``"first"`` table's batch copied straight into it, and the upsert when a key is stored.

On the real PostgreSQL: whichever path a batch takes, the stored rows and the counters are
those of "first event wins, each inserted row counted once".
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from psycopg import sql

from projections.db import connect, drop_schema
from projections.migrate import migrate
from projections.model import RowOp
from projections.store import UPSERT_AFTER_CONFLICT, Store
from streams.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = ("deliveries", 0)


@pytest.fixture
def store() -> Iterator[Store]:
    settings = load_settings()
    schema = f"sg_test_first_{uuid.uuid4().hex[:10]}"
    conn = connect(settings.pg_dsn)
    try:
        migrate(conn, schema, f"test-first-{schema}.")
        conn.commit()
        yield Store(conn, schema)
    finally:
        conn.rollback()
        drop_schema(conn, schema)
        conn.commit()
        conn.close()


def delivery(delivery_id: str, payload: str = "{}") -> RowOp:
    return (
        "deliveries",
        {
            "delivery_id": delivery_id,
            "subscription": "s",
            "environment": "paper",
            "admission_key": f"k-{delivery_id}",
            "source": "src",
            "event_id": None,
            "payload_json": payload,
            "received_at_ms": 1,
            "channel": "http",
            "src_partition": 0,
            "src_offset": 0,
        },
    )


class Writer:
    """Writes batches through ``store``, keeping the offsets it expects."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.next = 0

    def write(self, *ops: RowOp) -> None:
        expected = {TOPIC: self.next} if self.next else {}
        self.next += len(ops)
        self.store.write(list(ops), {TOPIC: self.next}, expected)


def stored(store: Store) -> tuple[dict[str, str], int]:
    """Payload by delivery id, and the deliveries counter."""
    with store.conn.transaction():
        rows = store.conn.execute(
            sql.SQL("SELECT delivery_id, payload_json FROM {}").format(
                sql.Identifier(store.schema, "deliveries")
            )
        ).fetchall()
        counted = store.conn.execute(
            sql.SQL("SELECT value FROM {} WHERE name = 'deliveries'").format(
                sql.Identifier(store.schema, "counters")
            )
        ).fetchone()
    return {str(d): str(p) for d, p in rows}, int(counted[0]) if counted else 0


def test_new_keys_are_copied_straight_and_counted(store: Store) -> None:
    writer = Writer(store)
    writer.write(delivery("d1"), delivery("d2"))  # an empty table
    writer.write(delivery("d3"), delivery("d4"))
    writer.write(delivery("d5"))
    assert stored(store) == ({f"d{i}": "{}" for i in range(1, 6)}, 5)
    assert store.paths["deliveries", "empty"] == 1
    assert store.paths["deliveries", "straight"] == 2
    assert store.paths["deliveries", "upsert"] == 0


def test_a_stored_key_undoes_the_straight_copy_and_the_first_row_wins(store: Store) -> None:
    writer = Writer(store)
    writer.write(delivery("d1", '{"first": 1}'))
    writer.write(delivery("d2"), delivery("d1", '{"second": 2}'), delivery("d3"))
    rows, counted = stored(store)
    assert rows == {"d1": '{"first": 1}', "d2": "{}", "d3": "{}"}
    assert counted == 3  # d2 and d3 inserted by the upsert, d1 not again
    assert store.paths["deliveries", "conflict"] == 1
    assert store.paths["deliveries", "upsert"] == 1
    # The table is upserted for a while after the conflict, then copied straight again.
    for i in range(UPSERT_AFTER_CONFLICT):
        writer.write(delivery(f"e{i}"))
    assert store.paths["deliveries", "upsert"] == 1 + UPSERT_AFTER_CONFLICT
    writer.write(delivery("f"), delivery("d2", '{"late": true}'))
    writer.write(delivery("g"))
    rows, counted = stored(store)
    assert rows["d2"] == "{}" and rows["g"] == "{}" and counted == 3 + UPSERT_AFTER_CONFLICT + 2
    assert store.paths["deliveries", "conflict"] == 2
    assert store.paths["deliveries", "straight"] == 0


def test_a_failed_batch_leaves_nothing_and_the_retry_stores_it_once(store: Store) -> None:
    """A straight copy that succeeded is undone with its transaction when a later table of
    the batch fails; writing the batch again stores and counts it once."""
    writer = Writer(store)
    writer.write(delivery("d1"))
    missing_columns: RowOp = ("delivery_outcomes", {"delivery_id": "o1"})
    batch = [delivery("d2"), missing_columns]
    with pytest.raises(KeyError):
        store.write(batch, {TOPIC: 2}, {TOPIC: 1})
    store.conn.rollback()
    assert stored(store) == ({"d1": "{}"}, 1)
    assert store.paths["deliveries", "straight"] == 1
    writer.write(delivery("d2"))
    assert stored(store) == ({"d1": "{}", "d2": "{}"}, 2)
    assert Counter(dict(store.paths)) == Counter(
        {("deliveries", "empty"): 1, ("deliveries", "straight"): 2}
    )


def test_a_nul_in_a_straight_copy_is_scrubbed_and_stored(store: Store) -> None:
    writer = Writer(store)
    writer.write(delivery("d1"))
    writer.write(delivery("d\x002", '{"x": "a\x00b"}'))
    rows, counted = stored(store)
    assert counted == 2 and len(rows) == 2 and "d1" in rows
    assert all("\x00" not in k + v for k, v in rows.items())


def test_the_database_refuses_what_is_not_a_stored_key(store: Store) -> None:
    """Only a stored key turns the straight copy into an upsert: another error (a NOT NULL
    column left empty) fails the batch and stores nothing."""
    writer = Writer(store)
    writer.write(delivery("d1"))
    broken = delivery("d2")
    broken[1]["subscription"] = None
    with pytest.raises(psycopg.errors.NotNullViolation):
        store.write([broken], {TOPIC: 2}, {TOPIC: 1})
    store.conn.rollback()
    assert stored(store) == ({"d1": "{}"}, 1)


@hsettings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=12),
        min_size=1,
        max_size=40,
    )
)
def test_any_pattern_of_stored_keys_ends_as_first_wins(
    store: Store, batches: list[list[tuple[int, int]]]
) -> None:
    """Batches of (key, version) with keys repeating within and across batches, in any
    pattern, conflicts and cool-downs included: the table holds the first version written
    of each key, and the counter counts each key once."""
    schema_rows = sql.SQL("TRUNCATE {}, {}, {}").format(
        sql.Identifier(store.schema, "deliveries"),
        sql.Identifier(store.schema, "counters"),
        sql.Identifier(store.schema, "offsets"),
    )
    with store.conn.transaction():
        store.conn.execute(schema_rows)
    writer = Writer(store)
    first: dict[str, str] = {}
    for batch in batches:
        merged: dict[str, str] = {}  # the projector's batches hold one row per key
        for key, version in batch:
            merged.setdefault(f"d{key}", f'{{"v": {version}}}')
        for delivery_id, payload in merged.items():
            first.setdefault(delivery_id, payload)
        writer.write(*(delivery(k, p) for k, p in merged.items()))
    assert stored(store) == (first, len(first))
