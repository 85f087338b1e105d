"""Every trade of one order from ``GET /api/v3/myTrades``, page by page.

Binance answers at most ``limit`` trades (500 by default, 1,000 at most), the most recent
ones unless ``fromId`` is given, then those with an id from ``fromId`` on. An order that
filled in more parts than one page (a large order against many small resting ones) is read
with ``orderId`` + ``fromId`` pages, oldest first, until a page comes back short.

The list is trusted only when it adds up: the quantities of the trades must sum to the
order's executed quantity (a trade list that lags the order, or a page that failed, is
not the order's fills). The gateway charges the commission listed in the fills against the
executed quantity, so a list cut short would understate the fee.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

PAGE = 1000
"""Trades asked for per request: Binance's maximum ``limit``."""
MAX_PAGES = 100
"""An order with more trades than this many pages is reported without its fills."""

Fetch = Callable[[list[tuple[str, str]]], Any]
"""One signed ``myTrades`` request with these extra parameters: its decoded answer (a list on
success, anything else otherwise)."""


def order_trades(fetch: Fetch, order_id: str, executed: Decimal) -> list[dict[str, Any]] | None:
    """The trades of order ``order_id``, oldest first, if they sum to ``executed``; None if
    a request failed, an answer is not a list of trades, or they do not add up."""
    by_order = [("orderId", order_id)]
    page = fetch([*by_order, ("limit", str(PAGE))])
    if not isinstance(page, list):
        return None
    trades = page
    if len(page) >= PAGE:
        # A full page is the most recent trades: read them all again, oldest first.
        trades, next_id = [], 0
        for _ in range(MAX_PAGES):
            page = fetch([*by_order, ("fromId", str(next_id)), ("limit", str(PAGE))])
            if not isinstance(page, list):
                return None
            trades.extend(page)
            if len(page) < PAGE:
                break
            last = _trade_id(page[-1])
            if last < next_id:  # the venue ignored fromId: paging would never end
                return None
            next_id = last + 1
        else:
            return None
    return trades if _adds_up(trades, executed) else None


def _trade_id(trade: Any) -> int:
    identifier = trade.get("id") if isinstance(trade, dict) else None
    if not isinstance(identifier, int) or isinstance(identifier, bool) or identifier < 0:
        raise ValueError(f"a trade without a usable id: {trade!r}")
    return identifier


def _adds_up(trades: list[Any], executed: Decimal) -> bool:
    total = Decimal(0)
    for trade in trades:
        quantity = trade.get("qty") if isinstance(trade, dict) else None
        if not isinstance(quantity, str):
            return False
        try:
            total += Decimal(quantity)
        except ArithmeticError:
            return False
    return total == executed
