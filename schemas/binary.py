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


def unfit_field(kinds: Sequence[FieldKind], values: tuple[object, ...]) -> int | None:
    """The position of the first value its kind cannot write (to name it in an error)."""
    for i, (kind, value) in enumerate(zip(kinds, values, strict=True)):
        try:
            _BY_KIND[kind](value)
        except (TypeError, ValueError, OverflowError, AttributeError):
            return i
    return None
