"""The direct Avro writer (schemas/binary.py) writes exactly the bytes fastavro writes, and
its generated fast path refuses exactly what the checked path refuses, with the same error."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from fastavro import schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.binary import long_bytes
from schemas.codec import _encode_checked, decode, encode
from schemas.errors import InvalidRecord
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


HOSTILE = st.one_of(
    st.booleans(),
    st.floats(allow_nan=False),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.none(),
    st.text(max_size=5),
    st.just("\ud800"),
    st.binary(max_size=5),
    st.lists(st.text(max_size=3), max_size=2),
    st.tuples(st.integers()),
    st.tuples(st.just("ok"), st.just("\udfff")),
)


def _outcome(schema: RecordSchema, record: object, fast: bool) -> tuple[object, ...]:
    try:
        return ("written", encode(record) if fast else _encode_checked(schema, record))
    except InvalidRecord as e:
        return ("refused", str(e))


@settings(max_examples=1500)
@given(records(), st.data())
def test_the_fast_path_refuses_what_the_checked_path_refuses(
    drawn: tuple[RecordSchema, tuple[object, ...]], data: st.DataObject
) -> None:
    schema, values = drawn
    hostile: list[Any] = list(values)
    at = data.draw(st.integers(min_value=0, max_value=len(hostile) - 1))
    hostile[at] = data.draw(HOSTILE)
    record = schema.cls(*hostile)
    assert _outcome(schema, record, fast=True) == _outcome(schema, record, fast=False)
