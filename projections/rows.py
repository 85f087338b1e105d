"""The row mapping's mechanism: where a record came from, the handler registry, the event log.

Every record becomes an ``event_log`` row (:func:`event_log_row`); a record type with a
handler registered with :func:`handles` (the modules of :mod:`projections.handlers`) also
feeds the specific tables. Undecodable messages become ``parked`` rows (:func:`park`); the
records of ``dead-letters`` are never decoded and become ``dead_letters`` rows
(:func:`dead_letter`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import orjson

from projections.model import Row, RowOp, storable
from schemas.codec import to_json_dict
from schemas.registry import get_registry
from streams.kafka.headers import KIND, ORIGIN, REASON, Headers, as_text


class Source(NamedTuple):
    """Where a record was read: short topic name, partition, offset, key, Kafka timestamp.

    A named tuple: one is made per message, and a tuple is several times cheaper to make
    than a frozen dataclass."""

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


def dead_letter(source: Source, headers: Headers | None, value: bytes | None) -> list[RowOp]:
    """The row of a record the stream apps could not decide, as ``dead-letters`` holds it:
    kind, reason and origin from its headers (empty when a producer other than the engine,
    or the engine before 0.2.0 for the kind, left them out), its original bytes if any.
    Never decoded: they are what could not be."""
    given = as_text(headers)
    return [
        (
            "dead_letters",
            {
                "src_topic": source.topic,
                "src_partition": source.partition,
                "src_offset": source.offset,
                "key": source.key,
                "kind": given.get(KIND, ""),
                "reason": given.get(REASON, ""),
                "origin": given.get(ORIGIN, ""),
                "value": value,
                "kafka_ts_ms": source.timestamp_ms,
            },
        )
    ]


def retention_gap(topic: str, partition: int, first: int, end: int) -> list[RowOp]:
    """The row of offsets ``[first, end)`` of a partition that left the topic's retention
    before they were projected: the read model lacks whatever records they held."""
    row = {"src_topic": topic, "src_partition": partition, "first_offset": first}
    return [("retention_gaps", {**row, "end_offset": end})]


_LOG_FIELDS = ("run_id", "admission_key", "delivery_id", "subscription", "environment", "scope_key")
"""Text fields copied into ``event_log`` columns of their names, from record types having them."""

_TEXT_KINDS = frozenset({"string", "optional_string"})


@dataclass(frozen=True, slots=True)
class _LogPlan:
    """What one record type puts in its ``event_log`` row, worked out once per type."""

    name: str
    json_prefix: bytes
    """``{"type":"<name>",``: its JSON is this, then the dataclass's JSON after its ``{``."""
    text: tuple[str, ...]
    """The names of :data:`_LOG_FIELDS` the type has as text fields."""
    fields: tuple[str, ...]
    values: Callable[[object], tuple[object, ...]]
    """The record's field values, in the order of :attr:`fields`."""
    time_field: str | None
    """The record's own time: its last ``*_at_ms`` field (admitted_at_ms after expires_at_ms,
    decided_at_ms after received_at_ms, launched_at_ms after timeout_at_ms)."""


_PLANS: dict[type, _LogPlan] = {}


def _plan_of(cls: type) -> _LogPlan:
    plan = _PLANS.get(cls)
    if plan is None:
        schema = get_registry().by_class.get(cls)
        if schema is None:
            raise TypeError(f"{cls.__qualname__} is not a Sluicegate record type")
        kinds = dict(zip(schema.field_names, schema.field_kinds, strict=True))
        times = [n for n in kinds if n.endswith("_at_ms") and kinds[n].endswith("long")]
        plan = _PLANS[cls] = _LogPlan(
            name=cls.__name__,
            json_prefix=b'{"type":' + orjson.dumps(cls.__name__) + b",",
            text=tuple(n for n in _LOG_FIELDS if kinds.get(n) in _TEXT_KINDS),
            fields=schema.field_names,
            values=schema.values,
            time_field=times[-1] if times else None,
        )
    return plan


def record_time_ms(record: object) -> int | None:
    """The time a record states for itself (its last ``*_at_ms`` field), if any."""
    name = _plan_of(type(record)).time_field
    value = getattr(record, name) if name else None
    return value if isinstance(value, int) else None


def record_json(record: object) -> str:
    """``to_json_dict(record)`` as compact JSON text that PostgreSQL ``jsonb`` accepts."""
    body = orjson.dumps(record)
    if b"\\u0000" in body:
        return orjson.dumps(storable(to_json_dict(record))).decode("utf-8")
    prefix = _plan_of(type(record)).json_prefix
    # A record without fields dumps as {}: the prefix's comma must go.
    return (prefix + body[1:] if len(body) > 2 else prefix[:-1] + b"}").decode("utf-8")


def event_log_row(source: Source, record: object) -> Row:
    plan = _plan_of(type(record))
    time_ms = getattr(record, plan.time_field) if plan.time_field else None
    row: Row = {
        "src_topic": source.topic,
        "src_partition": source.partition,
        "src_offset": source.offset,
        "type": plan.name,
        "key": source.key,
        "run_id": None,
        "admission_key": None,
        "delivery_id": None,
        "subscription": None,
        "environment": None,
        "scope_key": None,
        "time_ms": time_ms,
        "kafka_ts_ms": source.timestamp_ms,
        "record": record_json(record),
    }
    for name in plan.text:
        row[name] = getattr(record, name)
    return row


def all_fields(record: object) -> Row:
    """Every field of ``record`` by name (tuples stay tuples)."""
    plan = _plan_of(type(record))
    return dict(zip(plan.fields, plan.values(record), strict=True))


def fields_of(record: object, *names: str) -> Row:
    """The fields ``names`` of ``record`` by name."""
    get = _GETTERS.get(names)
    if get is None:
        get = _GETTERS[names] = _getter(names)
    return dict(zip(names, get(record), strict=True))


_GETTERS: dict[tuple[str, ...], Callable[[object], tuple[object, ...]]] = {}


def _getter(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    if len(names) == 1:
        (only,) = names
        return lambda record: (getattr(record, only),)
    get: Callable[[object], tuple[object, ...]] = attrgetter(*names)
    return get
