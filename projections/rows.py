"""The row mapping's mechanism: where a record came from, the handler registry, the event log.

Every record becomes an ``event_log`` row (:func:`event_log_row`); a record type with a
handler registered with :func:`handles` (the modules of :mod:`projections.handlers`) also
feeds the specific tables. Undecodable messages become ``parked`` rows (:func:`park`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from projections.model import Row, RowOp, storable
from schemas.codec import to_json_dict


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record was read: short topic name, partition, offset, key, Kafka timestamp."""

    topic: str
    partition: int
    offset: int
    key: str | None = None
    timestamp_ms: int | None = None


Handler = Callable[[Source, Any], list[RowOp]]


HANDLERS: dict[type, Handler] = {}


_H = TypeVar("_H", bound=Handler)


def handles(*types: type) -> Callable[[_H], _H]:
    """Register a handler for record types (one handler per type)."""

    def register(fn: _H) -> _H:
        for t in types:
            if t in HANDLERS:
                raise RuntimeError(f"two handlers for {t.__name__}")
            HANDLERS[t] = fn
        return fn

    return register


def park(source: Source, value: bytes | None, error: str) -> list[RowOp]:
    """The row of a message that could not be decoded (kept, never dropped silently)."""
    return [
        (
            "parked",
            {
                "src_topic": source.topic,
                "src_partition": source.partition,
                "src_offset": source.offset,
                "key": source.key,
                "error": error,
                "value": value,
                "kafka_ts_ms": source.timestamp_ms,
            },
        )
    ]


_TIME_FIELDS: dict[type, str | None] = {}


def _time_field(cls: type) -> str | None:
    # The record's own time is its last *_at_ms field: admitted_at_ms after expires_at_ms,
    # decided_at_ms after received_at_ms, launched_at_ms after timeout_at_ms.
    if cls not in _TIME_FIELDS:
        names = [f.name for f in dataclasses.fields(cls) if f.name.endswith("_at_ms")]
        _TIME_FIELDS[cls] = names[-1] if names else None
    return _TIME_FIELDS[cls]


def record_time_ms(record: object) -> int | None:
    """The time a record states for itself (its last ``*_at_ms`` field), if any."""
    name = _time_field(type(record))
    value = getattr(record, name) if name else None
    return value if isinstance(value, int) else None


def record_json(record: object) -> str:
    """``to_json_dict(record)`` as compact JSON text that PostgreSQL ``jsonb`` accepts."""
    data = to_json_dict(record)
    text = orjson.dumps(data)
    if b"\\u0000" in text:
        text = orjson.dumps(storable(data))
    return text.decode("utf-8")


def _str_attr(record: object, name: str) -> str | None:
    value = getattr(record, name, None)
    return value if isinstance(value, str) else None


def event_log_row(source: Source, record: object) -> Row:
    return {
        "src_topic": source.topic,
        "src_partition": source.partition,
        "src_offset": source.offset,
        "type": type(record).__name__,
        "key": source.key,
        "run_id": _str_attr(record, "run_id"),
        "admission_key": _str_attr(record, "admission_key"),
        "delivery_id": _str_attr(record, "delivery_id"),
        "subscription": _str_attr(record, "subscription"),
        "environment": _str_attr(record, "environment"),
        "scope_key": _str_attr(record, "scope_key"),
        "time_ms": record_time_ms(record),
        "kafka_ts_ms": source.timestamp_ms,
        "record": record_json(record),
    }


def fields_of(record: object, *names: str) -> Row:
    return {n: getattr(record, n) for n in names}
