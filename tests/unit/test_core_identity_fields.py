"""Field values in identity, scope, sequence and content: control characters, interval and
case canonical forms, the required ``source``, and problems that say what a field is for.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.errors import IdentityError
from streams.core.identity import content_view, identify
from tests.support.core import candle, workflow

KEY_A = "btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|1796040000000|breakout-v1"


def problems_of(payload: dict[str, object], **wf: Any) -> IdentityError:
    with pytest.raises(IdentityError) as info:
        identify(workflow(**wf), payload)
    return info.value


# --------------------------------------------------------------- control characters


@pytest.mark.parametrize(
    ("field", "value", "role"),
    [
        ("instrument", "BTC\x00USDT", "identity"),  # identity (and scope)
        ("rule", "breakout\x1b[31m", "identity"),
        ("account", "acc\x001", "scope"),
        ("side", "buy\x7f", "immutable"),
        ("price", {"limit": "1\x002"}, "immutable"),
        ("source", "tradingview\x00", "source"),
        ("event_id", "evt\x00-1", "identity"),
    ],
)
def test_control_characters_are_invalid(field: str, value: object, role: str) -> None:
    error = problems_of(candle(**{field: value}))
    assert error.reason == "invalid_field"
    [problem] = [p for p in error.problems if p.field == field]
    assert problem.role == role
    assert "control character" in problem.message
    assert not problem.missing


def test_a_sequence_field_with_a_control_character_is_invalid() -> None:
    error = problems_of(
        candle(seq="7\x00"), scope_sequence_field="seq", identity_event_id_field=None
    )
    [problem] = error.problems
    assert (problem.field, problem.role) == ("seq", "sequence")


def test_surrounding_whitespace_is_still_stripped() -> None:
    assert identify(workflow(), candle(instrument="\tBTCUSDT\n")).admission_key == KEY_A


# --------------------------------------------------------------- interval spellings


@pytest.mark.parametrize(
    "spellings",
    [("1", "1m", "60s"), ("60", "1h", "60m"), ("1D", "D", "1d", "24h"), ("1W", "W", "1w", "7d")],
)
def test_interval_spellings_of_one_candle_are_one_identity(spellings: tuple[str, ...]) -> None:
    keys = {identify(workflow(), candle(interval=s)).admission_key for s in spellings}
    assert len(keys) == 1, keys


def test_an_unquoted_tradingview_interval_is_the_same_identity_as_the_string() -> None:
    # `"interval": {{interval}}` without quotes in an alert message arrives as a JSON number.
    for number, text in ((1, "1m"), (60, "1h"), (240, "4h")):
        assert (
            identify(workflow(), candle(interval=number)).admission_key
            == identify(workflow(), candle(interval=text)).admission_key
        )
    wf = workflow(validity_source_time="candle_close")
    assert (
        identify(wf, candle(interval=60)).source_time_ms
        == identify(wf, candle(interval="1h")).source_time_ms
    )


def test_the_interval_is_canonical_in_the_key_and_the_digest() -> None:
    wf = workflow(immutable_fields=("side", "interval"))
    tv = identify(wf, candle(interval="60"))
    assert "|1h|" in tv.admission_key
    assert tv.content_digest == identify(wf, candle(interval="1h")).content_digest
    assert content_view(wf, candle(interval="60")).digest == tv.content_digest
    assert identify(workflow(), candle(interval="1m")).admission_key == KEY_A


# --------------------------------------------------------------- venue and instrument case


def test_venue_and_instrument_case_is_folded_by_default() -> None:
    shouted = identify(workflow(), candle(venue="BINANCE", instrument="btcusdt"))
    assert shouted.admission_key == KEY_A
    wf = workflow(scope_fields=("account", "instrument", "side"))
    assert identify(wf, candle(instrument="btcUSDT")).scope_key == (
        identify(wf, candle()).scope_key
    )


def test_case_sensitive_fields_can_be_opted_out() -> None:
    wf = workflow(identity_case_sensitive_fields=("instrument",))
    assert identify(wf, candle(instrument="btcusdt")).admission_key != (
        identify(wf, candle()).admission_key
    )
    reference = identify(wf, candle()).admission_key
    assert identify(wf, candle(venue="BINANCE")).admission_key == reference


def test_other_fields_keep_their_case() -> None:
    assert identify(workflow(), candle(rule="Breakout-V1")).admission_key != KEY_A


# --------------------------------------------------------------- source


def test_a_payload_without_source_is_refused() -> None:
    payload = candle()
    del payload["source"]
    error = problems_of(payload)
    assert error.reason == "missing_identity_fields"
    [problem] = error.problems
    assert (problem.field, problem.role, problem.missing) == ("source", "source", True)
    assert "source" in error.describe()


# --------------------------------------------------------------- what a field is for


def test_problems_say_what_each_field_is_for() -> None:
    payload = candle(venue=None, account=None, candle_open="yesterday", side=[1, "\x00"])
    error = problems_of(payload)
    roles = {p.field: (p.role, p.missing) for p in error.problems}
    assert roles == {
        "venue": ("identity", True),
        "candle_open": ("identity", False),
        "side": ("immutable", False),
        "account": ("scope", True),
    }
    text = error.describe()
    assert "account" in text and "scope" in text


def test_a_source_time_only_field_is_reported_as_the_source_time() -> None:
    error = problems_of(
        {"source": "s", "event_id": "e1", "signal_time": "soon"},
        identity_derived_fields=(),
        validity_source_time="signal_time",
        scope_fields=(),
        scope_sequence_field=None,
    )
    [problem] = error.problems
    assert (problem.field, problem.role) == ("signal_time", "source_time")


def test_a_scope_only_field_is_not_an_identity_field() -> None:
    error = problems_of(candle(account=None))
    [problem] = error.problems
    assert (problem.field, problem.role) == ("account", "scope")
    assert "scope" in problem.describe()
    assert "identif" not in problem.describe()
