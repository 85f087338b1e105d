"""Durations, instants and candle intervals (streams.core.durations)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.durations import (
    MAX_EPOCH_MS,
    MAX_INTERVAL_MS,
    MAX_SOURCE_TIME_MS,
    MIN_SOURCE_TIME_MS,
    check_source_time,
    format_duration,
    format_interval,
    format_time,
    parse_duration,
    parse_interval,
    parse_time,
)
from streams.core.errors import CoreError, InvalidValue

NOON = 1_796_040_000_000  # 2026-11-30T12:00:00Z


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("250ms", 250),
        ("5s", 5_000),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("7d", 604_800_000),
        ("0s", 0),
        (" 30s ", 30_000),
        (250, 250),
        (0, 0),
    ],
)
def test_parse_duration_accepts_the_documented_forms(text: object, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "bad", ["5x", "", "1.5s", "250", "-5s", "5 s", "s", True, -1, 1.5, None, "5S", "\uff11s"]
)
def test_parse_duration_refuses_everything_else(bad: object) -> None:
    with pytest.raises(InvalidValue) as info:
        parse_duration(bad)
    assert isinstance(info.value, CoreError)
    assert isinstance(info.value, ValueError)


def test_duration_error_names_the_accepted_forms() -> None:
    with pytest.raises(InvalidValue, match=r'"5x" is not a duration \(use 250ms, 5s, 2m, 1h, 7d\)'):
        parse_duration("5x")


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0ms"), (250, "250ms"), (5_000, "5s"), (90_000, "90s"), (120_000, "2m"),
     (3_600_000, "1h"), (604_800_000, "7d"), (1_500, "1500ms")],
)  # fmt: skip
def test_format_duration_uses_the_largest_exact_unit(ms: int, text: str) -> None:
    assert format_duration(ms) == text


@given(st.integers(min_value=0, max_value=10**15))
def test_format_then_parse_duration_round_trips(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms


def test_format_duration_refuses_negative() -> None:
    with pytest.raises(InvalidValue):
        format_duration(-1)


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-30T12:00:00Z",
        "2026-11-30T12:00:00z",
        "2026-11-30t12:00:00Z",
        "2026-11-30 12:00:00Z",
        "2026-11-30T12:00:00+00:00",
        "2026-11-30T12:00:00-00:00",
        "2026-11-30T13:00:00+01:00",
        "2026-11-30T06:30:00-05:30",
        "2026-11-30T12:00:00.000Z",
        "2026-11-30T12:00:00.000000000Z",
        NOON,
        str(NOON),
        float(NOON),
        f" {NOON} ",
    ],
)
def test_parse_time_agrees_across_forms_and_offsets(value: object) -> None:
    assert parse_time(value) == NOON


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("2026-11-30T12:00:00.5Z", NOON + 500),
        ("2026-11-30T12:00:00.25Z", NOON + 250),
        ("2026-11-30T12:00:00.123Z", NOON + 123),
        ("2026-11-30T12:00:00.1239Z", NOON + 123),  # sub-millisecond digits are truncated
        ("1970-01-01T00:00:00Z", 0),
        ("0", 0),
    ],
)
def test_parse_time_fractions_and_epoch(value: object, ms: int) -> None:
    assert parse_time(value) == ms


@pytest.mark.parametrize(
    "bad",
    [
        "2026-11-30T12:00:00",  # no offset: refusing beats guessing a zone
        "2026-11-30",
        "2026-02-30T12:00:00Z",
        "2026-11-30T24:00:00Z",
        "2026-11-30T12:00:00+24:00",
        "2026-11-30T12:00:00+01:60",
        "yesterday",
        "",
        "-5",
        "1.5",
        -1,
        True,
        None,
        1.5,
        [NOON],
        MAX_EPOCH_MS + 1,
        "\uff11\uff17\uff19\uff16" + "\uff10" * 9,
    ],
)
def test_parse_time_refuses(bad: object) -> None:
    with pytest.raises(InvalidValue, match="RFC 3339"):
        parse_time(bad)


@given(st.integers(min_value=0, max_value=MAX_EPOCH_MS))
def test_format_time_round_trips(ms: int) -> None:
    text = format_time(ms)
    assert text.endswith("Z")
    assert parse_time(text) == ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1m", 60_000),
        ("5m", 300_000),
        ("15m", 900_000),
        ("1h", 3_600_000),
        ("4h", 14_400_000),
        ("1d", 86_400_000),
        ("1w", 604_800_000),
        ("1s", 1_000),
        ("3d", 259_200_000),
        # TradingView's {{interval}} forms
        ("1", 60_000),
        ("60", 3_600_000),
        ("240", 14_400_000),
        ("D", 86_400_000),
        ("1D", 86_400_000),
        ("W", 604_800_000),
        ("1W", 604_800_000),
    ],
)
def test_parse_interval(text: str, ms: int) -> None:
    assert parse_interval(text) == ms
    if text.isdigit():
        assert parse_interval(int(text)) == ms  # the same digits as a JSON number


@pytest.mark.parametrize(
    "bad", ["0m", "367d", "999999w", "1M", "1mo", "", "m", "1.5h", "0", 0, 1.5, True, None, "1y"]
)
def test_parse_interval_refuses(bad: object) -> None:
    with pytest.raises(InvalidValue, match="candle interval"):
        parse_interval(bad)


@pytest.mark.parametrize(
    ("spellings", "canonical"),
    [
        (("1", "1m", "60s"), "1m"),
        (("60", "1h", "60m"), "1h"),
        (("D", "1D", "1d", "24h"), "1d"),
        (("W", "1W", "1w", "7d"), "1w"),
        (("S", "1S", "1s"), "1s"),
        (("90s",), "90s"),
        (("240", "4h"), "4h"),
    ],
)
def test_format_interval_gives_one_spelling(spellings: tuple[str, ...], canonical: str) -> None:
    assert {format_interval(parse_interval(s)) for s in spellings} == {canonical}


@given(st.integers(1, MAX_INTERVAL_MS // 1_000).map(lambda s: s * 1_000))
def test_format_interval_round_trips(ms: int) -> None:
    assert parse_interval(format_interval(ms)) == ms


def test_source_times_are_bounded() -> None:
    assert check_source_time(MIN_SOURCE_TIME_MS) is None
    assert check_source_time(MAX_SOURCE_TIME_MS - 1) is None
    assert "before 2000-01-01" in (check_source_time(MIN_SOURCE_TIME_MS - 1) or "")
    assert "2200-01-01" in (check_source_time(MAX_SOURCE_TIME_MS) or "")
    assert format_time(MIN_SOURCE_TIME_MS) == "2000-01-01T00:00:00.000Z"
    assert format_time(MAX_SOURCE_TIME_MS) == "2200-01-01T00:00:00.000Z"
