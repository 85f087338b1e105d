"""The direct Avro writer (schemas/binary.py) writes exactly the bytes fastavro writes."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from fastavro import schemaless_writer
from hypothesis import given, settings

from schemas.binary import long_bytes
from schemas.codec import decode, encode
from schemas.registry import RecordSchema, get_registry
from tests.support.record_values import AVRO_LONG, SCHEMAS, VALUES, records


def fastavro_bytes(schema: RecordSchema, values: tuple[object, ...]) -> bytes:
    buffer = BytesIO()
    buffer.write(schema.header)
    schemaless_writer(buffer, schema.parsed, dict(zip(schema.field_names, values, strict=True)))
    return buffer.getvalue()


@settings(max_examples=2000)
@given(records())
def test_every_record_type_is_written_as_fastavro_writes_it(
    drawn: tuple[RecordSchema, tuple[object, ...]],
) -> None:
    schema, values = drawn
    fields: dict[str, Any] = dict(zip(schema.field_names, values, strict=True))
    record = schema.cls(**fields)
    written = encode(record)
    assert written == fastavro_bytes(schema, values)
    assert decode(written) == record


@given(AVRO_LONG)
def test_longs_are_zigzag_varints(value: int) -> None:
    buffer = BytesIO()
    schemaless_writer(buffer, "long", value)
    assert long_bytes(value) == buffer.getvalue()


def test_every_record_type_is_covered() -> None:
    assert len(SCHEMAS) == len(get_registry().by_class)
    assert {kind for schema in SCHEMAS for kind in schema.field_kinds} == set(VALUES)
