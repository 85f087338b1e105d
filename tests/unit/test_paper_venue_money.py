"""Fill and balance arithmetic of the paper venue: Decimal, exact, explicit rounding only."""

from __future__ import annotations

from decimal import Decimal, Inexact

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumers.paper_venue.money import (
    commission_on,
    fill_effect,
    floor_to_step,
    fmt,
    mul,
    parse_decimal,
    parse_whole,
    quantity_for_quote,
    reserve_for,
)

D = Decimal


def test_buy_pays_notional_and_receives_quantity_less_commission_in_base() -> None:
    effect = fill_effect("BUY", D("50000.00"), D("0.01"), D("0.002"))
    assert effect.quote_change == D("-500.0000")
    assert effect.quote_quantity == D("500.0000")
    assert effect.commission == D("0.00002000")
    assert effect.commission_in_base
    assert effect.base_change == D("0.00998")


def test_sell_gives_quantity_and_receives_notional_less_commission_in_quote() -> None:
    effect = fill_effect("SELL", D("51000.00"), D("0.4"), D("0.001"))
    assert effect.base_change == D("-0.4")
    assert effect.quote_quantity == D("20400.000")
    assert effect.commission == D("20.40000000")
    assert effect.quote_change == D("20379.6")
    assert not effect.commission_in_base


def test_commission_rounds_half_up_to_eight_decimals() -> None:
    assert commission_on(D("0.00001"), D("0.001")) == D("0.00000001")  # 1e-8 exactly
    assert commission_on(D("0.000015"), D("0.001")) == D("0.00000002")  # 1.5e-8 -> 2e-8
    assert commission_on(D("0.000014"), D("0.001")) == D("0.00000001")


def test_quote_quantity_is_floored_to_the_lot_step() -> None:
    assert quantity_for_quote(D("1234.56"), D("50000.00"), D("0.00001")) == D("0.02469")
    assert mul(D("0.02469"), D("50000.00")) <= D("1234.56")
    assert quantity_for_quote(D("0.4"), D("50000"), D("0.00001")) == D("0")
    assert floor_to_step(D("1.99999"), D("0.5")) == D("1.5")


def test_reserve_is_notional_for_buys_and_quantity_for_sells() -> None:
    assert reserve_for("BUY", D("49000.00"), D("0.1")) == D("4900.000")
    assert reserve_for("SELL", D("51000.00"), D("1")) == D("1")


def test_exact_context_refuses_to_round() -> None:
    with pytest.raises(Inexact):
        mul(D("1." + "1" * 50), D("1." + "1" * 50))


def test_formatting_and_parsing_follow_binance() -> None:
    assert fmt(D("1E-8")) == "0.00000001"
    assert fmt(D("970")) == "970.00000000"
    assert fmt(D("0.000000001")) == "0.000000001"  # never rounded for display
    assert parse_decimal("0.1") == D("0.1")
    for bad in ("1e-8", "-1", ".5", "1.", "NaN", "1,5", " 1", "1.5\n", "\uff11"):
        assert parse_decimal(bad) is None


def test_whole_numbers_are_ascii_digits_sqlite_holds() -> None:
    assert parse_whole("0") == 0
    assert parse_whole(str(2**63 - 1)) == 2**63 - 1
    assert parse_whole("65535", 65535) == 65535
    assert parse_whole("65536", 65535) is None
    for bad in ("", "\u00b2", "\uff11", "\u0661", "12\n", " 1", "-1", "+1", "1.0", str(2**63)):
        assert parse_whole(bad) is None, repr(bad)


@given(st.text(max_size=25))
def test_parse_whole_never_raises_and_is_an_ascii_reading(text: str) -> None:
    value = parse_whole(text)
    assert value is None or (str(value) == text.lstrip("0") or (value == 0 and set(text) == {"0"}))


prices = st.integers(1, 10**10).map(lambda n: D(n) / 100)  # tick 0.01
quantities = st.integers(1, 10**9).map(lambda n: D(n) / 100000)  # step 0.00001
rates = st.sampled_from([D("0"), D("0.001"), D("0.00075"), D("0.002")])


@given(prices, quantities, rates)
def test_a_fill_moves_exactly_what_it_trades(price: Decimal, qty: Decimal, rate: Decimal) -> None:
    buy = fill_effect("BUY", price, qty, rate)
    sell = fill_effect("SELL", price, qty, rate)
    assert buy.quote_change == -(price * qty) == -buy.quote_quantity
    assert buy.base_change + buy.commission == qty
    assert sell.base_change == -qty
    assert sell.quote_change + sell.commission == sell.quote_quantity == price * qty
    for effect, base in ((buy, qty), (sell, price * qty)):
        assert abs(effect.commission - base * rate) <= D("0.000000005")
        assert all(
            isinstance(v, Decimal)
            for v in (effect.base_change, effect.quote_change, effect.commission)
        )
