"""Two writers of one schema, each given a :class:`~projections.share.Share` of the partitions
(the workers of a parallel rebuild), on the real PostgreSQL: each checks and stores only its
share's offsets, and rows of one key held by both end as the tables' policies say, whichever
writes first."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from psycopg import sql

from projections.db import connect, drop_schema
from projections.errors import OffsetsMoved
from projections.migrate import migrate
from projections.model import RowBuffer, RowOp
from projections.rebuild import stored_offsets
from projections.share import Share
from projections.store import Store
from streams.settings import load_settings
from tests.integration.test_projection_store_first import delivery, stored

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def schema() -> Iterator[str]:
    settings = load_settings()
    name = f"sg_test_shares_{uuid.uuid4().hex[:10]}"
    with connect(settings.pg_dsn, autocommit=True) as conn:
        migrate(conn, name, f"test-shares-{name}.")
    yield name
    with connect(settings.pg_dsn, autocommit=True) as conn:
        drop_schema(conn, name)


def _store(schema: str, share: Share | None) -> Store:
    return Store(connect(load_settings().pg_dsn), schema, share)


def status(run_id: str, value: str, rank: int) -> RowOp:
    return (
        "run_status",
        {
            "run_id": run_id,
            "status": value,
            "previous_status": None,
            "changed_at_ms": rank,
            "rank": (rank,),
        },
    )


def test_without_shares_the_second_writer_finds_the_offsets_moved(schema: str) -> None:
    first, second = _store(schema, None), _store(schema, None)
    try:
        first.write([delivery("d1")], {("deliveries", 0): 1}, {})
        with pytest.raises(OffsetsMoved):
            second.write([delivery("d2")], {("deliveries", 1): 1}, {})
    finally:
        first.conn.close()
        second.conn.close()


@pytest.mark.parametrize("order", ["even first", "odd first"])
def test_rows_of_one_key_held_by_two_shares_end_by_the_tables_policies(
    schema: str, order: str
) -> None:
    even, odd = _store(schema, Share(0, 2)), _store(schema, Share(1, 2))
    held = {even: RowBuffer(), odd: RowBuffer()}
    try:
        # Both hold a delivery d1 ("first": whoever writes first wins, counted once) and a
        # status of run r1 ("max": the greater rank wins, whoever writes last).
        even.write(
            [delivery("d1", '{"by": "even"}'), delivery("d2"), status("r1", "failed", 9)],
            {("deliveries", 0): 3},
            {},
            held=held[even],
            hold_up_to=1000,
        )
        odd.write(
            [delivery("d1", '{"by": "odd"}'), delivery("d3"), status("r1", "pending", 4)],
            {("deliveries", 1): 3},
            {},
            held=held[odd],
            hold_up_to=1000,
        )
        writers = [(even, 0), (odd, 1)] if order == "even first" else [(odd, 1), (even, 0)]
        for writer, partition in writers:
            writer.flush(held[writer], {("deliveries", partition): 3})
        rows, counted = stored(even)
        winner = "even" if order == "even first" else "odd"
        assert rows == {"d1": f'{{"by": "{winner}"}}', "d2": "{}", "d3": "{}"}
        assert counted == 3
        with even.conn.transaction():
            final = even.conn.execute(
                sql.SQL("SELECT status FROM {} WHERE run_id = 'r1'").format(
                    sql.Identifier(schema, "run_status")
                )
            ).fetchone()
            assert final == ("failed",)
            assert stored_offsets(even.conn, schema) == {
                ("deliveries", 0): 3,
                ("deliveries", 1): 3,
            }
    finally:
        even.conn.close()
        odd.conn.close()
