"""Binance's documented answers parse into the adapter's value types (no float anywhere)."""

from __future__ import annotations

import json
from decimal import Decimal

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
