"""Paging an order's trades out of ``myTrades`` (``consumers/venue/binance_trades.py``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumers.venue import binance_trades
from consumers.venue.binance_trades import order_trades


class Venue:
    """Binance's answers to ``myTrades`` for one order whose trades are ``trades``."""

    def __init__(self, count: int, *, first_id: int = 7) -> None:
        self.trades: list[dict[str, Any]] = [
            {"id": first_id + 3 * n, "qty": "0.001"} for n in range(count)
        ]
        self.requests: list[dict[str, str]] = []

    def __call__(self, params: list[tuple[str, str]]) -> Any:
        asked = dict(params)
        self.requests.append(asked)
        limit = int(asked["limit"])
        if "fromId" not in asked:
            return self.trades[-limit:]  # the most recent ones
        return [t for t in self.trades if t["id"] >= int(asked["fromId"])][:limit]


def executed(count: int) -> Decimal:
    return Decimal("0.001") * count


@given(count=st.integers(0, 40), page=st.integers(1, 12))
def test_every_trade_once_oldest_first_whatever_the_page_size(count: int, page: int) -> None:
    venue = Venue(count)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(binance_trades, "PAGE", page)
        patch.setattr(binance_trades, "MAX_PAGES", 100)
        assert order_trades(venue, "42", executed(count)) == venue.trades
    assert all(r["orderId"] == "42" for r in venue.requests)
    if count < page:
        assert len(venue.requests) == 1  # the common case is one request, as before


def test_an_order_with_more_pages_than_allowed_has_no_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(binance_trades, "PAGE", 2)
    monkeypatch.setattr(binance_trades, "MAX_PAGES", 3)
    assert order_trades(Venue(6), "1", executed(6)) is None
    assert order_trades(Venue(5), "1", executed(5)) is not None


def test_trades_that_do_not_add_up_to_the_executed_quantity_are_not_the_fills() -> None:
    assert order_trades(Venue(3), "1", executed(4)) is None  # the list lags the order
    assert order_trades(Venue(3), "1", executed(2)) is None


@pytest.mark.parametrize("qty", [None, 1, "NaN", "sNaN", "x"])
def test_an_unreadable_quantity_is_not_a_fill(qty: object) -> None:
    def fetch(params: list[tuple[str, str]]) -> Any:
        return [{"id": 1, "qty": qty}]

    assert order_trades(fetch, "1", Decimal("1")) is None


def test_a_failed_page_means_no_fills(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binance_trades, "PAGE", 2)
    venue = Venue(5)
    answers = iter([venue.trades[-2:], venue.trades[:2], object()])
    assert order_trades(lambda params: next(answers), "1", executed(5)) is None


@pytest.mark.parametrize("bad_id", [None, "9", -1, True, 1.5])
def test_a_full_page_whose_last_trade_has_no_usable_id_raises(
    bad_id: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binance_trades, "PAGE", 1)
    with pytest.raises(ValueError):
        order_trades(lambda params: [{"id": bad_id, "qty": "1"}], "1", Decimal("2"))


def test_a_venue_that_ignores_from_id_is_not_paged_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(binance_trades, "PAGE", 2)
    calls: list[object] = []

    def same_page(params: list[tuple[str, str]]) -> Any:
        calls.append(params)
        return [{"id": 1, "qty": "1"}, {"id": 2, "qty": "1"}]

    assert order_trades(same_page, "1", Decimal("4")) is None
    assert len(calls) == 3  # the first page, then fromId 0 and fromId 3, answered the same
