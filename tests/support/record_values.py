"""Hypothesis strategies for field values of every record type, by its schema's field kinds."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

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


@st.composite
def records(draw: st.DrawFn) -> tuple[RecordSchema, tuple[object, ...]]:
    """A record type's schema and values for its fields, in field order."""
    schema = draw(st.sampled_from(SCHEMAS))
    return schema, tuple(draw(VALUES[kind]) for kind in schema.field_kinds)
