"""Avro binary bodies of Sluicegate records, written directly from their field kinds.

Every record field is one of five kinds (:data:`schemas.mirror.FieldKind`, kept 1:1 with the
``.avsc`` files by ``mirror_problems``): ``string``, ``long``, ``["null", "string"]``,
``["null", "long"]`` (null first, so branch 0 is null) and an array of strings. Writing those
directly is about twice as fast as the general-purpose writer, whose per-field dispatch and
union matching dominated encoding on the admission hot path. The bytes are the same:
``tests/unit/test_binary_writer.py`` compares them with fastavro's for every record type.

The writers assume values already checked by :func:`schemas.codec.encode` (ints in the long
range, tuples for arrays); anything else raises ``TypeError``, ``AttributeError``,
``ValueError`` or ``OverflowError``, which the codec turns into ``InvalidRecord``.

:func:`record_writer` is the codec's fast path: one function per record type, generated from
its field kinds, that reads the attributes, makes the codec's checks and writes the whole
message in one join, with no per-field calls or value tuple (about half the time of
``header + body_writer(values)``). It raises :class:`Unfit` (or the errors above) for any
value it cannot write, and the codec then takes the checked path, which names the field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from schemas.mirror import FieldKind

_ONE_BYTE = tuple(bytes((n,)) for n in range(128))
_NULL = b"\x00"
_PRESENT = b"\x02"


def _long_bytes(value: int) -> bytes:
    """Zig-zag varint of a signed 64-bit ``value``."""
    n = (value << 1) ^ (value >> 63)
    if n < 128:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# The events of one transaction share their decision time (and deadlines, revisions, windows
# and small counts repeat), so most longs were written a moment before.
long_bytes = lru_cache(maxsize=4096)(_long_bytes)


def string_bytes(value: str) -> bytes:
    data = value.encode()
    return long_bytes(len(data)) + data


def optional_string_bytes(value: str | None) -> bytes:
    return _NULL if value is None else _PRESENT + string_bytes(value)


def optional_long_bytes(value: int | None) -> bytes:
    return _NULL if value is None else _PRESENT + long_bytes(value)


def string_array_bytes(value: tuple[str, ...]) -> bytes:
    # One block holding every item, then the empty block that ends the array.
    if not value:
        return _NULL
    return b"".join([long_bytes(len(value)), *map(string_bytes, value), _NULL])


_BY_KIND: dict[FieldKind, Callable[[Any], bytes]] = {
    "string": string_bytes,
    "long": long_bytes,
    "optional_string": optional_string_bytes,
    "optional_long": optional_long_bytes,
    "string_array": string_array_bytes,
}


def body_writer(kinds: Sequence[FieldKind]) -> Callable[[tuple[object, ...]], bytes]:
    """A function from a record's field values (in field order) to its Avro body."""
    writers = tuple(_BY_KIND[kind] for kind in kinds)

    def write(values: tuple[object, ...]) -> bytes:
        return b"".join(
            [write_one(value) for write_one, value in zip(writers, values, strict=True)]
        )

    return write


class Unfit(ValueError):
    """A value :func:`record_writer` does not write; the checked path says why."""


_LONG_CHECK = f"type({{v}}) is not int or not {-(2**63)} <= {{v}} <= {2**63 - 1}"


def record_writer(
    header: bytes, names: Sequence[str], kinds: Sequence[FieldKind]
) -> Callable[[object], bytes]:
    """A function from a record to ``header`` + its Avro body, for fields ``names`` of
    ``kinds`` in schema order; it raises :class:`Unfit` where the codec's checks would fail
    (a ``long`` that is not an ``int`` in range, an array that is not a ``tuple``)."""
    lines = ["def write(record):"]
    parts = ["HEADER"]
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        if not name.isidentifier():
            raise ValueError(f"field name {name!r} is not an identifier")
        v, b = f"v{i}", f"b{i}"
        lines.append(f"    {v} = record.{name}")
        if kind == "string":
            lines.append(f"    {b} = {v}.encode()")
            parts += [f"long_bytes(len({b}))", b]
        elif kind == "long":
            lines.append(f"    if {_LONG_CHECK.format(v=v)}: raise Unfit")
            parts.append(f"long_bytes({v})")
        elif kind == "optional_string":
            lines.append(f"    if {v} is None: {b} = NULL")
            lines.append("    else:")
            lines.append(f"        {b} = {v}.encode()")
            lines.append(f"        {b} = PRESENT + long_bytes(len({b})) + {b}")
            parts.append(b)
        elif kind == "optional_long":
            lines.append(f"    if {v} is None: {b} = NULL")
            lines.append(f"    elif {_LONG_CHECK.format(v=v)}: raise Unfit")
            lines.append(f"    else: {b} = PRESENT + long_bytes({v})")
            parts.append(b)
        else:
            lines.append(f"    if type({v}) is not tuple: raise Unfit")
            parts.append(f"string_array_bytes({v})")
    lines.append(f"    return b''.join(({', '.join(parts)},))")
    namespace: dict[str, Any] = {
        "HEADER": header,
        "NULL": _NULL,
        "PRESENT": _PRESENT,
        "Unfit": Unfit,
        "long_bytes": long_bytes,
        "string_array_bytes": string_array_bytes,
    }
    # Built from the schema's own field names (checked above); the name shows in profiles.
    exec(compile("\n".join(lines), "<record_writer>", "exec"), namespace)
    writer: Callable[[object], bytes] = namespace["write"]
    return writer


def unfit_field(kinds: Sequence[FieldKind], values: tuple[object, ...]) -> int | None:
    """The position of the first value its kind cannot write (to name it in an error)."""
    for i, (kind, value) in enumerate(zip(kinds, values, strict=True)):
        try:
            _BY_KIND[kind](value)
        except (TypeError, ValueError, OverflowError, AttributeError):
            return i
    return None
