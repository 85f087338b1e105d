"""Binance's documented answers parse into the adapter's value types (no float anywhere)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from consumers.venue.adapter import (
    Accepted,
    Fill,
    OrderRequest,
    OrderStatus,
    OrderType,
    Side,
    TimeInForce,
)
from consumers.venue.binance_spot import parse_fills, parse_order
from consumers.venue.paper import parse_order as parse_paper_order

D = Decimal

# The FULL example of "New order (TRADE)" in Binance's REST documentation (two of its fills).
FULL = """{"symbol": "BTCUSDT", "orderId": 28, "orderListId": -1,
 "clientOrderId": "6gCrw2kRUAF9CvJDGP16IP", "transactTime": 1507725176595,
 "price": "0.00000000", "origQty": "10.00000000", "executedQty": "10.00000000",
 "origQuoteOrderQty": "0.000000", "cummulativeQuoteQty": "10.00000000", "status": "FILLED",
 "timeInForce": "GTC", "type": "MARKET", "side": "SELL", "workingTime": 1507725176595,
 "selfTradePreventionMode": "NONE", "fills": [
  {"price": "4000.00000000", "qty": "1.00000000", "commission": "4.00000000",
   "commissionAsset": "USDT", "tradeId": 56},
  {"price": "3999.00000000", "qty": "5.00000000", "commission": "19.99500000",
   "commissionAsset": "USDT", "tradeId": 57}]}"""

# The example of "Cancel order (TRADE)": clientOrderId is the cancel's own id.
CANCELED = """{"symbol": "LTCBTC", "origClientOrderId": "myOrder1", "orderId": 4,
 "orderListId": -1, "clientOrderId": "cancelMyOrder1", "transactTime": 1684804350068,
 "price": "2.00000000", "origQty": "1.00000000", "executedQty": "0.00000000",
 "origQuoteOrderQty": "0.000000", "cummulativeQuoteQty": "0.00000000", "status": "CANCELED",
 "timeInForce": "GTC", "type": "LIMIT", "side": "BUY", "selfTradePreventionMode": "NONE"}"""


def test_full_placement_answer() -> None:
    d = json.loads(FULL)
    order = parse_order(d, parse_fills(d["fills"]))
    assert order == Accepted(
        venue_order_id="28",
        client_order_id="6gCrw2kRUAF9CvJDGP16IP",
        symbol="BTCUSDT",
        side=Side.SELL,
        type=OrderType.MARKET,
        status=OrderStatus.FILLED,
        quantity=D("10"),
        executed_quantity=D("10"),
        cumulative_quote_quantity=D("10"),
        created_at_ms=1507725176595,
        updated_at_ms=1507725176595,
        fills=(
            Fill(D("4000"), D("1"), D("4"), "USDT", "56"),
            Fill(D("3999"), D("5"), D("19.995"), "USDT", "57"),
        ),
    )
    assert order.is_filled and not order.is_open


def test_cancel_answer_keeps_the_orders_own_client_id() -> None:
    order = parse_order(json.loads(CANCELED), None)
    assert order.client_order_id == "myOrder1"
    assert (order.status, order.price, order.time_in_force) == (
        OrderStatus.CANCELED,
        D("2"),
        TimeInForce.GTC,
    )
    assert order.fills is None


def test_requests_are_checked_for_shape() -> None:
    with pytest.raises(ValueError, match="LIMIT"):
        OrderRequest("BTCUSDT", Side.BUY, OrderType.LIMIT, "a", quantity=D("1"))
    with pytest.raises(ValueError, match="MARKET"):
        OrderRequest("BTCUSDT", Side.BUY, OrderType.MARKET, "a", D("1"), D("2"))
    with pytest.raises(ValueError, match="adapters place"):
        OrderRequest("BTCUSDT", Side.BUY, OrderType.STOP_LOSS, "a", quantity=D("1"))


AMOUNTS = ("price", "origQty", "executedQty", "origQuoteOrderQty", "cummulativeQuoteQty")
FILL_AMOUNTS = ("price", "qty", "commission")
# Not an amount a venue means: each must make the answer unreadable (the client answers
# Unknown, the gateway reconciles), never a NaN, negative or million-digit fill journaled.
HOSTILE_AMOUNTS = ["NaN", "sNaN", "Infinity", "-1", "-0.5", "1e999999", "1" + "0" * 100, True, None]


@pytest.mark.parametrize("value", HOSTILE_AMOUNTS, ids=repr)
def test_an_amount_that_is_not_a_finite_non_negative_decimal_is_unreadable(value: object) -> None:
    for name in AMOUNTS:
        d = {**json.loads(FULL), name: value}
        with pytest.raises((ValueError, TypeError, ArithmeticError)):
            parse_order(d, ())
    for name in FILL_AMOUNTS:
        fills = json.loads(FULL)["fills"]
        fills[0][name] = value
        with pytest.raises((ValueError, TypeError, ArithmeticError)):
            parse_fills(fills)


@pytest.mark.parametrize("value", ["1507725176595", 1.5, True, -1, 2**63], ids=repr)
def test_a_time_that_is_not_epoch_milliseconds_is_unreadable(value: object) -> None:
    d = {**json.loads(FULL), "transactTime": value, "workingTime": 1}
    with pytest.raises((ValueError, TypeError)):
        parse_order(d, ())


def test_paper_answers_with_hostile_amounts_are_unreadable() -> None:
    first_fill: dict[str, Any] = {
        "price": "50000",
        "quantity": "1",
        "commission": "0.001",
        "commission_asset": "BTC",
        "trade_id": "1",
    }
    order: dict[str, Any] = {
        "venue_order_id": "7",
        "client_order_id": "c",
        "symbol": "BTCUSDT",
        "side": "buy",
        "type": "market",
        "status": "filled",
        "quantity": "1",
        "executed_quantity": "1",
        "cumulative_quote_quantity": "50000",
        "price": None,
        "quote_quantity": None,
        "time_in_force": None,
        "created_at_ms": 1,
        "updated_at_ms": 1,
        "fills": [first_fill],
    }
    assert parse_paper_order(order).executed_quantity == D("1")
    for value in HOSTILE_AMOUNTS:
        for name in ("quantity", "executed_quantity", "cumulative_quote_quantity"):
            with pytest.raises((ValueError, TypeError, ArithmeticError)):
                parse_paper_order({**order, name: value})
        fill = {**first_fill, "quantity": value}
        with pytest.raises((ValueError, TypeError, ArithmeticError)):
            parse_paper_order({**order, "fills": [fill]})
