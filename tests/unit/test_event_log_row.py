"""The event-log row of every record type, and the row buffer's merge rules.

The row is worked out once per record type (projections/rows.py); these properties hold it
to its plain definition, field by field, for any values, NUL characters included.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.model import TABLES_BY_NAME, RowBuffer, RowOp, reduce_rows, storable
from projections.rows import Source, event_log_row, record_json
from schemas.codec import to_json_dict
from schemas.registry import RecordSchema
from tests.support.record_values import records

TEXT_FIELDS = ("run_id", "admission_key", "delivery_id", "subscription", "environment", "scope_key")


def plain_row(source: Source, record: Any) -> dict[str, object]:
    """The event-log row by its definition: every value looked up by name."""
    names = [f.name for f in dataclasses.fields(record)]
    times = [n for n in names if n.endswith("_at_ms")]
    row: dict[str, object] = {
        "src_topic": source.topic,
        "src_partition": source.partition,
        "src_offset": source.offset,
        "type": type(record).__name__,
        "key": source.key,
        "time_ms": getattr(record, times[-1]) if times else None,
        "kafka_ts_ms": source.timestamp_ms,
    }
    for name in TEXT_FIELDS:
        value = getattr(record, name, None)
        row[name] = value if isinstance(value, str) else None
    return row


@settings(max_examples=1500)
@given(records(), st.booleans())
def test_the_event_log_row_is_its_definition(
    drawn: tuple[RecordSchema, tuple[object, ...]], nul: bool
) -> None:
    schema, values = drawn
    if nul:
        values = tuple(f"a\x00{v}" if isinstance(v, str) else v for v in values)
    fields: dict[str, Any] = dict(zip(schema.field_names, values, strict=True))
    record = schema.cls(**fields)
    source = Source("runs", 3, 17, "k", 5)
    row = event_log_row(source, record)
    text = row.pop("record")
    assert row == plain_row(source, record)
    assert isinstance(text, str)
    assert text == record_json(record)
    assert "\x00" not in text
    assert orjson.loads(text) == storable(to_json_dict(record))


def _ops(rng: random.Random, n: int) -> list[RowOp]:
    """Rows of a "first" and a "max" table with few keys, so that keys repeat."""
    ops: list[RowOp] = []
    for i in range(n):
        run = f"r{rng.randrange(5)}"
        if rng.random() < 0.5:
            ops.append(("runs", {"run_id": run, "at": i}))
        else:
            rank = (rng.randrange(4), rng.randrange(3))
            ops.append(("run_status", {"run_id": run, "rank": rank, "at": i}))
    return ops


@given(st.integers(0, 2**32), st.lists(st.integers(0, 40), max_size=6))
def test_a_buffer_of_many_batches_holds_what_one_reduction_of_them_gives(
    seed: int, sizes: list[int]
) -> None:
    rng = random.Random(seed)
    batches = [_ops(rng, n) for n in sizes]
    buffer = RowBuffer()
    for batch in batches:
        buffer.merge(batch)
    whole = reduce_rows(op for batch in batches for op in batch)
    assert len(buffer) == sum(len(rows) for rows in whole.values())
    assert _keyed(buffer.take()) == _keyed(whole)
    assert len(buffer) == 0


@given(st.integers(0, 2**32), st.integers(0, 40), st.integers(0, 40))
def test_restored_rows_count_as_older_than_rows_merged_since(
    seed: int, before: int, after: int
) -> None:
    rng = random.Random(seed)
    first, second = _ops(rng, before), _ops(rng, after)
    buffer = RowBuffer()
    buffer.merge(first)
    taken = buffer.take()
    buffer.merge(second)
    buffer.restore(taken)
    assert _keyed(buffer.take()) == _keyed(reduce_rows([*first, *second]))


def _keyed(tables: dict[str, list[dict[str, object]]]) -> dict[str, dict[object, object]]:
    return {
        table: {TABLES_BY_NAME[table].key_of(row): row["at"] for row in rows}
        for table, rows in tables.items()
    }
