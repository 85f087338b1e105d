"""The generated fast reader (schemas/binary_reader.py) reads what fastavro reads, and
leaves everything else to fastavro: hostile bytes get exactly fastavro's answer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.binary_reader import Unread, long_at
from schemas.codec import _decode_resolved, _writer_of, decode, encode
from schemas.errors import SchemaError
from schemas.registry import HEADER_LENGTH, RecordSchema
from tests.support.record_values import records


def _record(drawn: tuple[RecordSchema, tuple[object, ...]]) -> object:
    schema, values = drawn
    arguments: tuple[Any, ...] = values
    return schema.cls(*arguments)


def _outcome(data: bytes, fast: bool) -> tuple[Any, ...]:
    try:
        return ("read", decode(data) if fast else _decode_resolved(_writer_of(data), data))
    except SchemaError as e:
        return ("refused", type(e), str(e))


@settings(max_examples=1500)
@given(records())
def test_every_record_type_is_read_back_by_the_fast_reader(
    drawn: tuple[RecordSchema, tuple[object, ...]],
) -> None:
    record = _record(drawn)
    data = encode(record)
    fast = _writer_of(data).read
    assert fast is not None
    assert fast(data) == record
    assert fast(data) == _decode_resolved(_writer_of(data), data)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid message of any type, then cut, extended, or with bytes changed in its body."""
    data = bytearray(encode(_record(draw(records()))))
    body = len(data) - HEADER_LENGTH
    how = draw(st.sampled_from(["cut", "extend", "change", "insert", "varint"]))
    at = HEADER_LENGTH + draw(st.integers(min_value=0, max_value=max(body - 1, 0)))
    if how == "cut":
        del data[at:]
    elif how == "extend":
        data += draw(st.binary(min_size=1, max_size=4))
    elif how == "change" and body:
        data[at] = draw(st.integers(min_value=0, max_value=255))
    elif how == "insert":
        data[at:at] = draw(st.binary(min_size=1, max_size=4))
    else:  # a long run of continuation bytes: overlong varints
        data[at:at] = b"\xff" * draw(st.integers(min_value=8, max_value=12))
    return bytes(data)


@settings(max_examples=3000)
@given(mutated())
def test_hostile_bytes_get_fastavros_answer(data: bytes) -> None:
    assert _outcome(data, fast=True) == _outcome(data, fast=False)


def test_varints_longer_than_ten_bytes_or_outside_the_long_range_are_left_to_fastavro() -> None:
    assert long_at(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 0) == (2**63 - 1, 10)
    assert long_at(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 0) == (-(2**63), 10)
    with pytest.raises(Unread):
        long_at(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x03", 0)
    with pytest.raises(Unread):
        long_at(b"\xff" * 11 + b"\x01", 0)
