"""CloudEvents 1.0 envelopes (``streams.core.cloudevents``): the spec's checks, every mode."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.cloudevents import (
    MAX_BATCH_EVENTS,
    CloudEvent,
    binary_event,
    decode_header_value,
    read_batch,
    read_event,
)
from streams.core.errors import FieldRole, Refusal

EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "evt-1",
    "source": "https://signals.example/alerts",
    "type": "com.example.signal.fired",
    "time": "2026-11-30T12:01:00Z",
    "datacontenttype": "application/json",
    "data": {"instrument": "BTCUSDT", "side": "buy", "price": "97000.5"},
}


def refused(value: object) -> dict[str, str]:
    """The problems of a refused event, attribute -> message."""
    result = read_event(value)
    assert isinstance(result, Refusal), result
    assert result.reason == "invalid_cloudevent"
    assert all(p.role is FieldRole.ATTRIBUTE for p in result.problems)
    return {p.field: p.message for p in result.problems}


def with_(**changes: object) -> dict[str, object]:
    event = dict(EVENT)
    for name, value in changes.items():
        if value is ...:
            event.pop(name, None)
        else:
            event[name] = value
    return event


def test_a_valid_event_is_its_json_format_with_nulls_dropped() -> None:
    result = read_event({**EVENT, "subject": None, "comexampleext": 5, "flag": True})
    assert isinstance(result, CloudEvent)
    assert result.envelope == {**EVENT, "comexampleext": 5, "flag": True}


@pytest.mark.parametrize("name", ["id", "source", "specversion", "type"])
@pytest.mark.parametrize("value", [..., None, ""])
def test_each_required_attribute_missing_null_or_empty_is_named(name: str, value: object) -> None:
    problems = refused(with_(**{name: value}))
    assert name in problems, problems
    if value is not ... and value is not None:
        assert ("must be 1.0" if name == "specversion" else "non-empty") in problems[name]
    else:
        assert problems[name] == "missing"


@pytest.mark.parametrize("name", ["id", "source", "specversion", "type"])
@pytest.mark.parametrize("value", [1, True, ["x"], {"a": 1}])
def test_a_required_attribute_that_is_not_a_string_is_named(name: str, value: object) -> None:
    assert name in refused(with_(**{name: value}))


@pytest.mark.parametrize("version", ["0.3", "1", "1.0.2", "2.0", " 1.0"])
def test_a_specversion_other_than_1_0_is_refused(version: str) -> None:
    assert "must be 1.0" in refused(with_(specversion=version))["specversion"]


@pytest.mark.parametrize(
    "time",
    [
        "2026-11-30T12:01:00",  # no offset
        "2026-11-30 12:01:00Z",  # RFC 3339 section 5.6 wants the T
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-11-30T24:00:00Z",
        "2026-11-30T12:60:00Z",
        "2026-11-30T12:00:00+24:00",
        "2026-11-30",
        "yesterday",
        "",
        1796040060000,
    ],
)
def test_an_invalid_time_is_refused(time: object) -> None:
    assert "time" in refused(with_(time=time))


@pytest.mark.parametrize(
    "time",
    ["2026-11-30T12:01:00Z", "2026-11-30t12:01:00.123456789123z", "2016-12-31T23:59:60+01:30"],
)
def test_rfc_3339_times_are_accepted(time: str) -> None:
    assert isinstance(read_event(with_(time=time)), CloudEvent)


def test_attribute_names_types_and_values_follow_the_spec() -> None:
    problems = refused(
        with_(
            Type="x",
            com_example="x",
            ext1=1.5,
            ext2={"a": 1},
            ext3=2**31,
            subject="",
            dataschema="schemas/v1",
            datacontenttype="json",
            source="not a uri",
            ext4="bell\x07",
            ext5="\ufffe",
        )
    )
    assert set(problems) == {
        "Type",
        "com_example",
        "ext1",
        "ext2",
        "ext3",
        "subject",
        "dataschema",
        "datacontenttype",
        "data",  # with no JSON media type, data must be a string
        "source",
        "ext4",
        "ext5",
    }


def test_data_and_data_base64() -> None:
    assert "data_base64" in refused(with_(data_base64="aGk="))
    assert "data_base64" in refused(with_(data=..., data_base64="not base64!"))
    assert "data" in refused(with_(datacontenttype="text/plain", data={"a": 1}))
    for ok in (
        with_(data=..., data_base64="aGk=", datacontenttype="application/octet-stream"),
        with_(datacontenttype="text/plain", data="hi"),
        with_(datacontenttype=..., data=[1, 2]),  # no datacontenttype: application/json
        with_(datacontenttype="application/vnd.x+json", data=None),  # an explicit null
        with_(data=...),
    ):
        assert isinstance(read_event(ok), CloudEvent), ok


def test_not_an_object_and_problem_lists_are_bounded() -> None:
    assert "event" in refused([EVENT])
    result = read_event({f"Bad{i}": 1 for i in range(100)} | {"X" * 500: 1})
    assert isinstance(result, Refusal)
    assert len(result.problems) == 17
    assert "more problem(s)" in result.problems[-1].message
    assert all(len(p.field) <= 64 for p in result.problems)


def test_a_batch_answers_each_event_in_order() -> None:
    answers = read_batch([EVENT, with_(id=...), "junk", with_(id="evt-2")])
    assert not isinstance(answers, Refusal)
    assert [type(a) for a in answers] == [CloudEvent, Refusal, Refusal, CloudEvent]
    assert read_batch([]) == []
    assert isinstance(read_batch({"not": "a batch"}), Refusal)
    assert isinstance(read_batch([EVENT] * (MAX_BATCH_EVENTS + 1)), Refusal)


HEADERS = [
    ("ce-specversion", "1.0"),
    ("CE-ID", "evt-1"),
    ("ce-source", "https://signals.example/alerts"),
    ("ce-type", "com.example.signal.fired"),
    ("ce-time", "2026-11-30T12:01:00Z"),
]


def test_binary_mode_maps_headers_content_type_and_body() -> None:
    body = b'{"instrument": "BTCUSDT", "side": "buy", "price": "97000.5"}'
    result = binary_event(HEADERS, "application/json", body)
    assert isinstance(result, CloudEvent)
    assert result.envelope == EVENT
    text = binary_event(HEADERS, "text/plain; charset=utf-8", "héllo".encode())
    assert isinstance(text, CloudEvent) and text.envelope["data"] == "héllo"
    raw = binary_event(HEADERS, "application/octet-stream", b"\x00\xff")
    assert isinstance(raw, CloudEvent)
    assert raw.envelope["data_base64"] == base64.b64encode(b"\x00\xff").decode()
    assert "data" not in raw.envelope
    empty = binary_event(HEADERS, None, b"")
    assert isinstance(empty, CloudEvent)
    assert set(empty.envelope) == {"specversion", "id", "source", "type", "time"}


def test_binary_mode_header_values_are_unquoted_then_percent_decoded() -> None:
    assert decode_header_value("Euro%20%E2%82%AC%20%F0%9F%98%80") == "Euro € 😀"
    assert decode_header_value("%e2%82%ac") == "€"  # lower-case hex accepted
    assert decode_header_value('"a \\"quoted\\" value"') == 'a "quoted" value'
    assert decode_header_value("%41") == "A"  # needlessly encoded: accepted
    assert decode_header_value("%C0%A0") is None  # overlong UTF-8
    assert decode_header_value("%ED%A0%80") is None  # a surrogate
    assert decode_header_value("caf\udcc3\udca9") is None  # raw non-ASCII bytes


def binary_problems(headers: list[tuple[str, str]], body: bytes = b"") -> dict[str, str]:
    result = binary_event(headers, "application/json", body)
    assert isinstance(result, Refusal)
    return {p.field: p.message for p in result.problems}


def test_binary_mode_refusals_name_the_attribute() -> None:
    assert "id" in binary_problems([h for h in HEADERS if h[0] != "CE-ID"])
    assert "id" in binary_problems([*HEADERS, ("ce-id", "evt-2")])  # given twice
    assert "datacontenttype" in binary_problems([*HEADERS, ("ce-datacontenttype", "a/b")])
    assert "subject" in binary_problems([*HEADERS, ("ce-subject", "%C0%A0")])
    assert "time" in binary_problems([*HEADERS[:4], ("ce-time", "noon")])
    assert "ce-Bad_Name" in binary_problems([*HEADERS, ("ce-Bad_Name", "x")])
    both = binary_problems([*HEADERS[:1], ("ce-time", "noon")], b"{")
    assert {"id", "source", "type", "time", "data"} <= set(both)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=10,
)


@given(
    st.dictionaries(
        st.sampled_from([*EVENT, "data_base64", "subject", "x", "Y", ""]) | st.text(max_size=8),
        json_values,
    )
)
def test_any_json_object_gets_an_event_or_a_refusal(value: dict[str, Any]) -> None:
    result = read_event({**EVENT, **value} if len(value) % 2 else value)
    assert isinstance(result, CloudEvent | Refusal)


@given(
    st.lists(st.tuples(st.text(max_size=20).map(lambda t: "ce-" + t), st.text(max_size=20))),
    st.none() | st.sampled_from(["application/json", "text/plain", "x/y", ""]),
    st.binary(max_size=50),
)
def test_any_headers_and_body_get_an_event_or_a_refusal(
    headers: list[tuple[str, str]], content_type: str | None, body: bytes
) -> None:
    assert isinstance(binary_event([*HEADERS, *headers], content_type, body), CloudEvent | Refusal)
