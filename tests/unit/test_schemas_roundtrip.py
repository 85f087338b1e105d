"""Every record type survives encode -> decode and to_json_dict -> from_json_dict unchanged.

Strategies are built from the dataclass fields themselves (not from the registry), so a
record type added to ``schemas/events.py`` or ``schemas/commands.py`` is covered without
touching this file.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas.commands
import schemas.events
from schemas import (
    InvalidRecord,
    Record,
    decode,
    encode,
    from_json_dict,
    record_name,
    to_json_dict,
)
from schemas.events import AdmissionRecordEvicted, RunAdmitted
from schemas.records import RECORD_CLASSES
from schemas.registry import get_registry

AVRO_LONG_MIN = -(2**63)
AVRO_LONG_MAX = 2**63 - 1


def _declared_record_classes() -> list[type[Any]]:
    found: list[type[Any]] = []
    for module in (schemas.events, schemas.commands):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and (value.__module__ + ".").startswith(module.__name__ + ".")
            ):
                found.append(value)
    return found


ALL_CLASSES = _declared_record_classes()

_STRATEGY_BY_TYPE: dict[object, st.SearchStrategy[Any]] = {
    str: st.text(),
    int: st.integers(min_value=AVRO_LONG_MIN, max_value=AVRO_LONG_MAX),
    str | None: st.none() | st.text(),
    int | None: st.none() | st.integers(min_value=AVRO_LONG_MIN, max_value=AVRO_LONG_MAX),
    tuple[str, ...]: st.lists(st.text(), max_size=5).map(tuple),
}


def records_of(cls: type[Any]) -> st.SearchStrategy[Any]:
    """A strategy for instances of ``cls`` built from its field annotations."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: _STRATEGY_BY_TYPE[hints[f.name]] for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


def test_record_alias_and_registry_cover_every_declared_class() -> None:
    assert set(typing.get_args(Record)) == set(ALL_CLASSES)
    assert set(RECORD_CLASSES) == set(ALL_CLASSES)
    assert len(ALL_CLASSES) == len(set(ALL_CLASSES)) == 46


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_encode_decode_roundtrip(cls: type[Any], data: st.DataObject) -> None:
    record = data.draw(records_of(cls))
    message = encode(record)
    assert message[:2] == b"\xc3\x01"
    assert message[2:10] == get_registry().by_class[cls].fingerprint
    decoded = decode(message)
    assert type(decoded) is cls
    assert decoded == record
    for field in dataclasses.fields(cls):
        assert type(getattr(decoded, field.name)) is type(getattr(record, field.name))
    assert record_name(message) == cls.__name__
    assert encode(decoded) == message


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_json_dict_roundtrip(cls: type[Any], data: st.DataObject) -> None:
    record = data.draw(records_of(cls))
    as_dict = to_json_dict(record)
    assert list(as_dict) == ["type", *(f.name for f in dataclasses.fields(cls))]
    assert as_dict["type"] == cls.__name__
    assert not any(isinstance(v, tuple) for v in as_dict.values())
    assert from_json_dict(cls.__name__, as_dict) == record
    through_json = orjson.loads(orjson.dumps(as_dict))
    assert from_json_dict(through_json["type"], through_json) == record


def _run_admitted() -> RunAdmitted:
    return RunAdmitted(
        run_id="run-1",
        admission_key="sub/live/tv/evt-1",
        delivery_id="d-1",
        subscription="sub",
        environment="live",
        workflow_revision=3,
        source="tradingview",
        event_id="evt-1",
        content_digest="sha256:00",
        source_time_ms=1_700_000_000_000,
        expires_at_ms=1_700_000_060_000,
        validity_source_time="bar_close_time",
        validity_window_ms=60_000,
        slots=("analysis", "signal"),
        scope_key=None,
        sequence=None,
        payload_json="{}",
        rerun_number=0,
        rerun_of=None,
        rerun_reason=None,
        admitted_at_ms=1_700_000_000_500,
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workflow_revision", True),
        ("workflow_revision", 3.0),
        ("source_time_ms", AVRO_LONG_MAX + 1),
        ("source_time_ms", AVRO_LONG_MIN - 1),
        ("slots", "analysis"),
        ("slots", ["analysis"]),
        ("slots", (1, 2)),
        ("run_id", 7),
        ("run_id", None),
        ("event_id", 7),
        ("payload_json", "\ud800"),
    ],
)
def test_encode_refuses_values_that_do_not_fit(field: str, value: object) -> None:
    changes: dict[str, Any] = {field: value}
    record = dataclasses.replace(_run_admitted(), **changes)
    with pytest.raises(InvalidRecord, match=field if field != "payload_json" else "RunAdmitted"):
        encode(record)


def test_encode_refuses_non_records() -> None:
    with pytest.raises(TypeError, match="not a Sluicegate record type"):
        encode({"run_id": "x"})
    with pytest.raises(TypeError):
        to_json_dict(object())


def test_avro_long_bounds_roundtrip() -> None:
    for value in (AVRO_LONG_MIN, -1, 0, AVRO_LONG_MAX):
        record = AdmissionRecordEvicted("k", ("r",), value)
        assert decode(encode(record)) == record


def test_from_json_dict_rejects_bad_input() -> None:
    good = to_json_dict(_run_admitted())
    with pytest.raises(InvalidRecord, match="unknown record type"):
        from_json_dict("NoSuchRecord", good)
    with pytest.raises(InvalidRecord, match="says type"):
        from_json_dict("BranchStarted", good)
    with pytest.raises(InvalidRecord, match="no fields"):
        from_json_dict("RunAdmitted", {**good, "extra": 1})
    without_run_id = {k: v for k, v in good.items() if k != "run_id"}
    with pytest.raises(InvalidRecord, match="run_id is missing"):
        from_json_dict("RunAdmitted", without_run_id)
    for field, value in [
        ("workflow_revision", True),
        ("workflow_revision", "3"),
        ("source_time_ms", AVRO_LONG_MAX + 1),
        ("slots", "analysis"),
        ("slots", [1]),
        ("run_id", None),
        ("event_id", 5),
    ]:
        with pytest.raises(InvalidRecord, match=field):
            from_json_dict("RunAdmitted", {**good, field: value})


def test_from_json_dict_fills_avro_defaults_for_missing_optional_fields() -> None:
    record = _run_admitted()
    partial = {k: v for k, v in to_json_dict(record).items() if k not in {"type", "rerun_of"}}
    assert from_json_dict("RunAdmitted", partial) == record
