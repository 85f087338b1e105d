"""Occurrence identity, admission keys and content digests (streams.core.identity)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from urllib.parse import quote, unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.errors import IdentityError
from streams.core.identity import (
    admission_key,
    content_digest,
    content_view,
    differing_fields,
    identify,
    rejection_key,
    run_id_for,
)
from tests.support.core import MINUTE, T0, candle, workflow

KEY_A = "btc-breakout/paper/tradingview/d:binance|BTCUSDT|1m|1796040000000|breakout-v1"


def test_contract_delivery_identity() -> None:
    occ = identify(workflow(), candle())
    assert occ.source == "tradingview"
    assert occ.event_id is None
    assert occ.identity_fields == (
        ("venue", "binance"),
        ("instrument", "BTCUSDT"),
        ("interval", "1m"),
        ("candle_open", str(T0)),
        ("rule", "breakout-v1"),
    )
    assert occ.admission_key == KEY_A
    assert occ.source_time_ms == T0 + MINUTE  # candle_close = candle_open + interval
    assert occ.expires_at_ms == T0 + MINUTE + 5_000
    assert occ.scope_key == "paper|account=acc-1|instrument=BTCUSDT|side=buy"
    assert occ.sequence == str(T0)
    assert occ.immutable_values == (("side", "buy"), ("rule", "breakout-v1"), ("price", "97000.5"))
    assert occ.payload_json.startswith('{"account":"acc-1","candle_open":')


@pytest.mark.parametrize(
    "open_time",
    [
        "2026-11-30T12:00:00Z",
        "2026-11-30T12:00:00.000+00:00",
        "2026-11-30T13:00:00+01:00",
        T0,
        str(T0),
    ],
)
def test_rfc3339_and_epoch_copies_are_the_same_occurrence(open_time: object) -> None:
    reference = identify(workflow(), candle())
    copy = identify(workflow(), candle(open_time))
    assert copy.admission_key == reference.admission_key
    assert copy.content_digest == reference.content_digest
    assert copy.source_time_ms == reference.source_time_ms


@pytest.mark.parametrize("price", ["97000.50", 97000.5, "97000.500", " 97000.5 ", "9.70005e4"])
def test_numbers_are_canonical(price: object) -> None:
    assert identify(workflow(), candle(price=price)).content_digest == (
        identify(workflow(), candle()).content_digest
    )


def test_leading_zero_strings_are_identifiers_not_numbers() -> None:
    wf = workflow(identity_derived_fields=("rule",), identity_event_id_field=None)
    a = identify(wf, candle(rule="007"))
    b = identify(wf, candle(rule="7"))
    c = identify(wf, candle(rule=7))
    assert a.admission_key != b.admission_key
    assert b.admission_key == c.admission_key


def test_whitespace_is_stripped_but_case_kept() -> None:
    wf = workflow(identity_case_sensitive_fields=("instrument",))
    assert identify(wf, candle(instrument=" BTCUSDT ")).admission_key == KEY_A
    assert identify(wf, candle(instrument="btcusdt")).admission_key != KEY_A


def test_next_candle_with_identical_values_is_a_new_occurrence() -> None:
    a = identify(workflow(), candle())
    b = identify(workflow(), candle("2026-11-30T12:01:00Z"))
    assert a.admission_key != b.admission_key
    assert a.immutable_values == b.immutable_values


def test_arrival_metadata_never_enters_the_identity() -> None:
    a = identify(workflow(), candle())
    b = identify(workflow(), candle(received_at="2026-11-30T12:01:07Z", attempt=4))
    assert a.admission_key == b.admission_key
    assert a.content_digest == b.content_digest


def test_event_id_route_wins_when_present() -> None:
    wf = workflow()
    occ = identify(wf, candle(event_id=" evt-1 "))
    assert occ.event_id == "evt-1"
    assert occ.identity_fields == (("event_id", "evt-1"),)
    assert occ.admission_key == "btc-breakout/paper/tradingview/e:evt-1"
    # The event id does not need the derived fields...
    bare = identify(wf, candle(event_id="evt-1", venue=None, rule=None))
    assert bare.admission_key == occ.admission_key
    # ...and an empty event id falls back to them.
    assert identify(wf, candle(event_id="  ")).admission_key == KEY_A


def test_event_id_is_opaque() -> None:
    wf = workflow()
    assert identify(wf, candle(event_id="007")).event_id == "007"
    assert identify(wf, candle(event_id="1e3")).event_id == "1e3"


def test_source_is_required() -> None:
    payload = candle()
    del payload["source"]
    with pytest.raises(IdentityError) as info:
        identify(workflow(), payload)
    assert info.value.missing == ("source",)


def test_two_subscriptions_get_different_admission_keys() -> None:
    a = identify(workflow(), candle())
    b = identify(workflow(subscription="eth-breakout"), candle())
    live = identify(workflow(environment="live"), candle())
    assert len({a.admission_key, b.admission_key, live.admission_key}) == 3


def test_missing_and_invalid_fields_are_all_listed() -> None:
    payload = candle(venue=None, rule="", candle_open="yesterday", account=None, side=[1])
    with pytest.raises(IdentityError) as info:
        identify(workflow(), payload)
    err = info.value
    assert err.missing == ("venue", "rule", "account")
    assert err.invalid == ("candle_open", "side")
    text = err.describe()
    assert "missing fields: venue, rule, account" in text
    assert "candle_open:" in text
    assert "RFC 3339" in text


def test_bad_interval_is_invalid_for_candle_close() -> None:
    with pytest.raises(IdentityError) as info:
        identify(workflow(), candle(interval="1M"))
    assert info.value.invalid == ("interval",)


def test_missing_interval_is_missing() -> None:
    with pytest.raises(IdentityError) as info:
        identify(workflow(), candle(interval=None))
    assert "interval" in info.value.missing


def test_missing_immutable_field_is_hashed_as_null() -> None:
    payload = candle()
    del payload["price"]
    occ = identify(workflow(), payload)
    assert dict(occ.immutable_values)["price"] is None
    assert occ.content_digest != identify(workflow(), candle()).content_digest


def test_structured_immutable_values_are_canonical_json() -> None:
    a = identify(workflow(), candle(price={"b": 1, "a": [1, 2]}))
    assert dict(a.immutable_values)["price"] == '{"a":[1,2],"b":1}'


def test_named_source_time_field_and_event_id_only_workflow() -> None:
    wf = workflow(
        identity_derived_fields=(),
        validity_source_time="signal_time",
        scope_fields=(),
        scope_sequence_field=None,
    )
    occ = identify(wf, {"source": "s", "event_id": "e1", "signal_time": "2026-11-30T12:00:00Z"})
    assert occ.source_time_ms == T0
    assert occ.scope_key is None
    assert occ.sequence is None
    with pytest.raises(IdentityError) as info:
        identify(wf, {"source": "s", "signal_time": T0})
    assert info.value.missing == ("event_id",)


def test_content_digest_covers_the_source_time() -> None:
    values = (("side", "buy"),)
    assert content_digest(values, 1) != content_digest(values, 2)
    expected = hashlib.sha256(b'{"immutable":{"side":"buy"},"source_time_ms":1}').hexdigest()
    assert content_digest(values, 1) == expected


def test_content_view_matches_identify_and_reports_differences() -> None:
    wf = workflow()
    original = content_view(wf, candle())
    assert original.digest == identify(wf, candle()).content_digest
    changed = content_view(wf, candle(price="97001", side="sell"))
    assert differing_fields(original, changed) == ("side", "price")
    broken = content_view(wf, {"candle_open": "garbage"})  # never raises
    assert broken.source_time_ms is None
    assert differing_fields(original, broken) == ("side", "rule", "price", "source_time")


def test_admission_key_quotes_separators() -> None:
    key = admission_key("s", "paper", "a/b", derived_values=("x|y", "z:w"))
    assert key == "s/paper/a%2Fb/d:x%7Cy|z%3Aw"
    assert admission_key("s", "paper", "src", event_id="a/b") == "s/paper/src/e:a%2Fb"
    # The separators in the two keys below differ, so they cannot collide.
    assert admission_key("s", "paper", "src", derived_values=("a|b",)) != admission_key(
        "s", "paper", "src", derived_values=("a", "b")
    )


@given(
    st.lists(st.text(max_size=8), min_size=1, max_size=4),
    st.lists(st.text(max_size=8), min_size=1, max_size=4),
    st.text(max_size=6),
    st.text(max_size=6),
)
def test_derived_keys_are_unambiguous(
    a: list[str], b: list[str], source_a: str, source_b: str
) -> None:
    key_a = admission_key("s", "paper", source_a, derived_values=tuple(a))
    key_b = admission_key("s", "paper", source_b, derived_values=tuple(b))
    assert (key_a == key_b) == ((source_a, a) == (source_b, b))
    *_, tail = key_a.split("/")
    assert [unquote(v) for v in tail.removeprefix("d:").split("|")] == a


_COMPONENT = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="AZaz09_.-~/|:%! ", max_size=12),
    st.sampled_from(["", "~", "BTCUSDT", "1m", "paper", "evt-0000001", "a b", "é", "\udcff"]),
)


@given(_COMPONENT, _COMPONENT, _COMPONENT, _COMPONENT, st.lists(_COMPONENT, max_size=3))
def test_every_component_is_quoted_as_urllib_quotes_it(
    subscription: str, environment: str, source: str, event_id: str, derived: list[str]
) -> None:
    def q(*values: str) -> list[str] | None:
        try:
            return [quote(v, safe="") for v in values]
        except UnicodeEncodeError:  # a lone surrogate: no key can be built from it
            return None

    def same(
        build: Callable[[], str], parts: list[str] | None, text: Callable[[list[str]], str]
    ) -> None:
        if parts is None:
            with pytest.raises(UnicodeEncodeError):
                build()
        else:
            assert build() == text(parts)

    same(
        lambda: admission_key(subscription, environment, source, event_id=event_id),
        q(subscription, environment, source, event_id),
        lambda p: f"{p[0]}/{p[1]}/{p[2]}/e:{p[3]}",
    )
    same(
        lambda: admission_key(subscription, environment, source, derived_values=tuple(derived)),
        q(subscription, environment, source, *derived),
        lambda p: f"{p[0]}/{p[1]}/{p[2]}/d:{'|'.join(p[3:])}",
    )
    same(
        lambda: rejection_key(subscription, environment, event_id),
        q(subscription, environment, event_id),
        lambda p: f"{p[0]}/{p[1]}/!{p[2]}",
    )


def test_rejection_key_and_run_id() -> None:
    assert rejection_key("btc-breakout", "paper", "dlv/1") == "btc-breakout/paper/!dlv%2F1"
    run = run_id_for(KEY_A, 0)
    assert run == "run-" + hashlib.sha256(f"{KEY_A}#0".encode()).hexdigest()[:24]
    assert run != run_id_for(KEY_A, 1)
    assert run == run_id_for(KEY_A, 0)
