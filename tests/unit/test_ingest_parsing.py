"""Body parsing: JSON objects, TradingView JSON and plain-text alerts, field mapping."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumers.ingest.errors import InvalidBody, UnsupportedMediaType
from consumers.ingest.parsing import JSON, TEXT, body_kind, parse_body, parse_pairs
from streams.core.intake import declared_fields, map_fields
from tests.unit.test_ingest_auth import workflow


@pytest.mark.parametrize(
    ("content_type", "charset", "kind"),
    [
        ("application/json", None, JSON),
        ("application/json", "utf-8", JSON),
        ("Application/JSON", "UTF-8", JSON),
        ("application/vnd.tradingview+json", None, JSON),
        ("text/plain", None, TEXT),
        ("text/plain", "utf-8", TEXT),
    ],
)
def test_accepted_media_types(content_type: str, charset: str | None, kind: str) -> None:
    assert body_kind(content_type, charset) == kind


@pytest.mark.parametrize(
    ("content_type", "charset"),
    [
        ("application/octet-stream", None),
        ("application/x-www-form-urlencoded", None),
        ("multipart/form-data", None),
        ("text/html", None),
        ("application/json", "latin-1"),
        ("text/plain", "utf-16"),
        ("", None),
    ],
)
def test_other_media_types_are_refused(content_type: str, charset: str | None) -> None:
    with pytest.raises(UnsupportedMediaType):
        body_kind(content_type, charset)


TV_JSON = (
    b'{"source":"tradingview","venue":"binance","instrument":"BTCUSDT","interval":"1",'
    b'"candle_open":"2026-11-30T12:00:00Z","rule":"breakout-v1","side":"buy","price":97000.5}'
)


def test_tradingview_json_body() -> None:
    payload = parse_body(TV_JSON, JSON)
    assert payload["instrument"] == "BTCUSDT"
    assert payload["price"] == 97000.5


def test_tradingview_json_sent_as_text_plain_with_bom_and_newline() -> None:
    assert parse_body(b"\xef\xbb\xbf" + TV_JSON + b"\n", TEXT) == parse_body(TV_JSON, JSON)


def test_tradingview_plain_text_key_value_lines() -> None:
    body = (
        b"source=tradingview\n"
        b"venue = binance\n"
        b"instrument=BTCUSDT, interval=60\r\n"
        b"candle_open=2026-11-30T12:00:00Z rule=breakout-v1;side=buy\n"
        b'note="breakout, confirmed \\"strong\\""\n'
    )
    assert parse_body(body, TEXT) == {
        "source": "tradingview",
        "venue": "binance",
        "instrument": "BTCUSDT",
        "interval": "60",
        "candle_open": "2026-11-30T12:00:00Z",
        "rule": "breakout-v1",
        "side": "buy",
        "note": 'breakout, confirmed "strong"',
    }


def test_an_empty_value_is_kept_for_identity_to_judge() -> None:
    assert parse_pairs("a= ,b=1") == {"a": "", "b": "1"}


@pytest.mark.parametrize(
    ("body", "kind", "fields"),
    [
        (b"", JSON, ["body"]),
        (b"   \n", TEXT, ["body"]),
        (b"{", JSON, ["body"]),
        (b'{"a":1,}', JSON, ["body"]),
        (b"[1,2]", JSON, ["body"]),
        (b'"text"', JSON, ["body"]),
        (b"42", JSON, ["body"]),
        (b"null", JSON, ["body"]),
        (b"NaN", JSON, ["body"]),
        (b'{"a": 1e999}', JSON, ["body"]),
        (b"\xff\xfe", JSON, ["body"]),
        (b"\xff\xfe", TEXT, ["body"]),
        (b"{not json", TEXT, ["body"]),
        (b"[1]", TEXT, ["body"]),
        (b"BTC buy now", TEXT, ["body", "body", "body"]),
        (b"a=1 lonely b=2", TEXT, ["body"]),
        (b"a=1\na=2", TEXT, ["a"]),
        (b'a="open', TEXT, ["a"]),
        (b"=value", TEXT, ["body"]),
    ],
)
def test_malformed_bodies_list_their_problems(body: bytes, kind: str, fields: list[str]) -> None:
    with pytest.raises(InvalidBody) as caught:
        parse_body(body, kind)
    assert [p.field for p in caught.value.problems] == fields
    assert caught.value.status == 422


def test_problem_messages_do_not_quote_the_body() -> None:
    secret = "tok-5ecr3t"
    for body, kind in (
        (f'{{"token": "{secret}",'.encode(), JSON),
        (f"token {secret}".encode(), TEXT),
        (f'token="{secret}'.encode(), TEXT),
    ):
        with pytest.raises(InvalidBody) as caught:
            parse_body(body, kind)
        rendered = str(caught.value.body())
        assert secret not in rendered


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,10}", fullmatch=True),
        st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=12),
        min_size=1,
        max_size=6,
    )
)
def test_quoted_key_value_text_round_trips(pairs: dict[str, str]) -> None:
    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    text = "\n".join(f"{k}={quote(v)}" for k, v in pairs.items())
    assert parse_body(text.encode(), TEXT) == pairs


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([JSON, TEXT]))
def test_any_bytes_give_a_dict_or_invalid_body(body: bytes, kind: str) -> None:
    with contextlib.suppress(InvalidBody):
        assert isinstance(parse_body(body, kind), dict)


def test_declared_fields_of_a_candle_close_workflow() -> None:
    wf = workflow(
        identity_event_id_field="event_id",
        identity_derived_fields=("venue", "instrument"),
        immutable_fields=("side", "price"),
        validity_source_time="candle_close",
        scope_fields=("account", "instrument"),
        scope_sequence_field="candle_open",
    )
    assert declared_fields(wf) == (
        "source",
        "event_id",
        "venue",
        "instrument",
        "side",
        "price",
        "candle_open",
        "interval",
        "account",
    )
    assert "candle_open" in declared_fields(replace(wf, validity_source_time="candle_open"))


def test_near_miss_keys_are_mapped_to_declared_names() -> None:
    declared = ("instrument", "candle_open", "interval")
    assert map_fields(
        {"Instrument": "BTCUSDT", "candle-open": "2026-11-30T12:00:00Z", "INTERVAL": "1"},
        declared,
    ) == {"instrument": "BTCUSDT", "candle_open": "2026-11-30T12:00:00Z", "interval": "1"}


def test_exact_names_win_and_other_keys_are_untouched() -> None:
    declared = ("instrument",)
    assert map_fields({"Instrument": "A", "instrument": "B", "Extra": 1}, declared) == {
        "Instrument": "A",
        "instrument": "B",
        "Extra": 1,
    }
    assert map_fields({"Instrument": "A", "INSTRUMENT": "B"}, declared) == {
        "instrument": "A",
        "INSTRUMENT": "B",
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"a":1,"b":2,"a":3}', "a"),
        (b'{"a":{"x":1,"y":{"z":1,"z":1}}}', "a.y.z"),
        (b'{"list":[{"k":1},{"k":1,"k":2}]}', "list[1].k"),
        (b'{"k\\u00e9":1,"k\xc3\xa9":2}', "k\u00e9"),
    ],
)
@pytest.mark.parametrize("kind", [JSON, TEXT])
def test_duplicate_json_keys_are_refused(body: bytes, field: str, kind: str) -> None:
    with pytest.raises(InvalidBody) as caught:
        parse_body(body, kind)
    assert [(p.field, p.message) for p in caught.value.problems] == [
        (field, "given more than once (JSON parsers disagree on which value counts)")
    ]


def test_deeply_nested_json_is_invalid_not_a_crash() -> None:
    for depth in (900, 1_000, 1_100, 5_000):
        body = b'{"a":' + b"[" * depth + b"]" * depth + b"}"
        with contextlib.suppress(InvalidBody):
            assert isinstance(parse_body(body, JSON), dict)
