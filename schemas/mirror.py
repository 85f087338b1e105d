"""How a record dataclass and its ``.avsc`` mirror each other, field by field.

A dataclass field's type decides its Avro type (:data:`AVRO_TYPE_BY_KIND`): ``str ->
"string"``, ``int -> "long"``, ``str | None -> ["null", "string"]`` with default null,
``int | None -> ["null", "long"]``, ``tuple[str, ...] -> {"type": "array", "items":
"string"}``. :func:`mirror_problems` lists every way a schema document fails to mirror its
class (record name, namespace ``sluicegate``, field names, order and types).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Literal

from schemas.errors import SchemaMismatch
from schemas.records import Record

NAMESPACE = "sluicegate"

FieldKind = Literal["string", "long", "optional_string", "optional_long", "string_array"]

_KIND_BY_TYPE: dict[object, FieldKind] = {
    str: "string",
    int: "long",
    str | None: "optional_string",
    int | None: "optional_long",
    tuple[str, ...]: "string_array",
}

AVRO_TYPE_BY_KIND: Mapping[FieldKind, object] = {
    "string": "string",
    "long": "long",
    "optional_string": ["null", "string"],
    "optional_long": ["null", "long"],
    "string_array": {"type": "array", "items": "string"},
}
"""The Avro type each dataclass field kind is written as in an ``.avsc``."""


def field_kinds_of(cls: type[Record]) -> tuple[tuple[str, FieldKind], ...]:
    """Return ``(name, kind)`` for each dataclass field of ``cls``, in declaration order.

    Raises :class:`SchemaMismatch` for a field type that has no Avro mapping.
    """
    hints = typing.get_type_hints(cls)
    result: list[tuple[str, FieldKind]] = []
    for field in dataclasses.fields(cls):
        kind = _KIND_BY_TYPE.get(hints[field.name])
        if kind is None:
            raise SchemaMismatch(
                f"{cls.__name__}.{field.name}: type {hints[field.name]!r} has no Avro "
                "mapping; use str, int, str | None, int | None or tuple[str, ...]"
            )
        result.append((field.name, kind))
    return tuple(result)


def mirror_problems(cls: type[Record], raw: Mapping[str, Any]) -> list[str]:
    """List every way the ``.avsc`` document ``raw`` fails to mirror dataclass ``cls``.

    An empty list means it mirrors it 1:1: record name, namespace, field names and order,
    field types and optionality (``["null", "string"]`` with ``"default": null``).
    """
    name = cls.__name__
    problems: list[str] = []
    if raw.get("type") != "record":
        problems.append(f"{name}: type must be 'record', got {raw.get('type')!r}")
    if raw.get("name") != name:
        problems.append(f"{name}: record name must be {name!r}, got {raw.get('name')!r}")
    if raw.get("namespace") != NAMESPACE:
        problems.append(f"{name}: namespace must be {NAMESPACE!r}, got {raw.get('namespace')!r}")
    expected = field_kinds_of(cls)
    fields = raw.get("fields")
    if not isinstance(fields, list):
        return [*problems, f"{name}: 'fields' must be a list"]
    actual_names = [f.get("name") if isinstance(f, dict) else None for f in fields]
    expected_names = [n for n, _ in expected]
    if actual_names != expected_names:
        problems.append(
            f"{name}: fields must be {expected_names} in this order, got {actual_names}"
        )
    by_name = {f.get("name"): f for f in fields if isinstance(f, dict)}
    for field_name, kind in expected:
        field = by_name.get(field_name)
        if field is None:
            continue
        want = AVRO_TYPE_BY_KIND[kind]
        if field.get("type") != want:
            problems.append(
                f"{name}.{field_name}: type must be {json.dumps(want)} for {kind}, "
                f"got {json.dumps(field.get('type'))}"
            )
        optional = kind in ("optional_string", "optional_long")
        if optional and ("default" not in field or field["default"] is not None):
            problems.append(f'{name}.{field_name}: optional field needs "default": null')
    return problems
