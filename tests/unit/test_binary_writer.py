"""The direct Avro writer (schemas/binary.py) writes exactly the bytes fastavro writes."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from fastavro import schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.binary import long_bytes
from schemas.codec import decode, encode
from schemas.mirror import FieldKind
from schemas.registry import RecordSchema, get_registry

AVRO_LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
VALUES: dict[FieldKind, st.SearchStrategy[Any]] = {
    "string": TEXT,
    "long": AVRO_LONG,
    "optional_string": st.none() | TEXT,
    "optional_long": st.none() | AVRO_LONG,
    "string_array": st.lists(TEXT, max_size=5).map(tuple),
}
SCHEMAS = sorted(get_registry().by_class.values(), key=lambda s: s.name)


def fastavro_bytes(schema: RecordSchema, values: tuple[object, ...]) -> bytes:
    buffer = BytesIO()
    buffer.write(schema.header)
    schemaless_writer(buffer, schema.parsed, dict(zip(schema.field_names, values, strict=True)))
    return buffer.getvalue()


@st.composite
def records(draw: st.DrawFn) -> tuple[RecordSchema, tuple[object, ...]]:
    schema = draw(st.sampled_from(SCHEMAS))
    return schema, tuple(draw(VALUES[kind]) for kind in schema.field_kinds)


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
