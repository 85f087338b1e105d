"""Binance Spot JSON shapes for orders, fills, trades, accounts and symbols.

Field names, order and formats follow Binance's REST documentation: amounts are strings with at
least 8 decimals, times are epoch milliseconds, ``orderListId`` is -1, MARKET orders show a
price of 0.
"""

from __future__ import annotations

import zlib
from typing import Any

from consumers.paper_venue.config import SymbolSpec, VenueConfig
from consumers.paper_venue.engine import OrderView
from consumers.paper_venue.money import fmt
from consumers.paper_venue.rows import OrderRow, TradeRow

Json = dict[str, Any]
_ZERO = "0.00000000"


def _core(o: OrderRow) -> Json:
    return {
        "price": fmt(o.price),
        "origQty": fmt(o.orig_qty),
        "executedQty": fmt(o.executed_qty),
        "origQuoteOrderQty": fmt(o.orig_quote_qty),
        "cummulativeQuoteQty": fmt(o.cumm_quote_qty),
        "status": o.status,
        "timeInForce": o.time_in_force,
        "type": o.type,
        "side": o.side,
    }


def placed(view: OrderView, resp_type: str) -> Json:
    """The answer to ``POST /api/v3/order`` for ``newOrderRespType`` ACK, RESULT or FULL."""
    o = view.order
    out: Json = {
        "symbol": o.symbol,
        "orderId": o.order_id,
        "orderListId": -1,
        "clientOrderId": o.client_order_id,
        "transactTime": o.time_ms,
    }
    if resp_type == "ACK":
        return out
    out.update(_core(o))
    out["workingTime"] = o.time_ms
    out["selfTradePreventionMode"] = "NONE"
    if resp_type == "FULL":
        out["fills"] = [
            {
                "price": fmt(t.price),
                "qty": fmt(t.qty),
                "commission": fmt(t.commission),
                "commissionAsset": t.commission_asset,
                "tradeId": t.trade_id,
            }
            for t in view.fills
        ]
    return out


def queried(o: OrderRow) -> Json:
    """An order as ``GET /api/v3/order`` and ``GET /api/v3/openOrders`` show it."""
    return {
        "symbol": o.symbol,
        "orderId": o.order_id,
        "orderListId": -1,
        "clientOrderId": o.client_order_id,
        **_core(o),
        "stopPrice": _ZERO,
        "icebergQty": _ZERO,
        "time": o.time_ms,
        "updateTime": o.update_time_ms,
        "isWorking": True,
        "workingTime": o.time_ms,
        "selfTradePreventionMode": "NONE",
    }


def canceled(o: OrderRow, cancel_client_id: str, now_ms: int) -> Json:
    """The answer to ``DELETE /api/v3/order``."""
    return {
        "symbol": o.symbol,
        "origClientOrderId": o.client_order_id,
        "orderId": o.order_id,
        "orderListId": -1,
        "clientOrderId": cancel_client_id,
        "transactTime": now_ms,
        **_core(o),
        "selfTradePreventionMode": "NONE",
    }


def trade(t: TradeRow) -> Json:
    """One entry of ``GET /api/v3/myTrades``."""
    return {
        "symbol": t.symbol,
        "id": t.trade_id,
        "orderId": t.order_id,
        "orderListId": -1,
        "price": fmt(t.price),
        "qty": fmt(t.qty),
        "quoteQty": fmt(t.quote_qty),
        "commission": fmt(t.commission),
        "commissionAsset": t.commission_asset,
        "time": t.time_ms,
        "isBuyer": t.side == "BUY",
        "isMaker": t.is_maker,
        "isBestMatch": True,
    }


def account(
    config: VenueConfig,
    name: str,
    balances: list[tuple[str, Any, Any]],
    now_ms: int,
    omit_zero: bool,
) -> Json:
    """The answer to ``GET /api/v3/account``."""
    maker, taker = config.maker_commission, config.taker_commission
    return {
        "makerCommission": int(maker * 10000),
        "takerCommission": int(taker * 10000),
        "buyerCommission": 0,
        "sellerCommission": 0,
        "commissionRates": {
            "maker": fmt(maker),
            "taker": fmt(taker),
            "buyer": _ZERO,
            "seller": _ZERO,
        },
        "canTrade": True,
        "canWithdraw": False,
        "canDeposit": False,
        "brokered": False,
        "requireSelfTradePrevention": False,
        "preventSor": False,
        "updateTime": now_ms,
        "accountType": "SPOT",
        "balances": [
            {"asset": asset, "free": fmt(free), "locked": fmt(locked)}
            for asset, free, locked in balances
            if not (omit_zero and free == 0 and locked == 0)
        ],
        "permissions": ["SPOT"],
        "uid": zlib.crc32(name.encode()),
    }


def symbol_info(spec: SymbolSpec) -> Json:
    """One entry of ``GET /api/v3/exchangeInfo``'s ``symbols``."""
    return {
        "symbol": spec.symbol,
        "status": "TRADING",
        "baseAsset": spec.base,
        "baseAssetPrecision": 8,
        "quoteAsset": spec.quote,
        "quotePrecision": 8,
        "quoteAssetPrecision": 8,
        "orderTypes": ["LIMIT", "MARKET"],
        "icebergAllowed": False,
        "ocoAllowed": False,
        "quoteOrderQtyMarketAllowed": True,
        "allowTrailingStop": False,
        "cancelReplaceAllowed": False,
        "isSpotTradingAllowed": True,
        "isMarginTradingAllowed": False,
        "filters": [
            {
                "filterType": "PRICE_FILTER",
                "minPrice": fmt(spec.tick_size),
                "maxPrice": fmt(spec.tick_size * 10**12),
                "tickSize": fmt(spec.tick_size),
            },
            {
                "filterType": "LOT_SIZE",
                "minQty": fmt(spec.min_qty),
                "maxQty": fmt(spec.max_qty),
                "stepSize": fmt(spec.step_size),
            },
            {
                "filterType": "NOTIONAL",
                "minNotional": fmt(spec.min_notional),
                "applyMinToMarket": True,
                "maxNotional": fmt(spec.min_notional * 10**12),
                "applyMaxToMarket": False,
                "avgPriceMins": 0,
            },
        ],
        "permissions": [],
        "permissionSets": [["SPOT"]],
        "defaultSelfTradePreventionMode": "NONE",
        "allowedSelfTradePreventionModes": ["NONE"],
    }
