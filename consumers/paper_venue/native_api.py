"""The venue's native JSON API, ``/paper/v1/account/...`` (deliberately not Binance's).

Authentication: headers ``X-Paper-Key``, ``X-Paper-Timestamp`` (epoch ms), ``X-Paper-Window``
(ms, default 5000, at most 60000) and ``X-Paper-Signature``: hex HMAC-SHA256 with the account's
secret of ``"<timestamp>\\n<window>\\n<METHOD>\\n<path with query>\\n<body>"``. The same window
rule as Binance's applies (a request older than its window, or a second early, is refused).

Errors are ``{"error": {"code": "...", "message": "..."}}``; see :data:`STATUS` for codes and
HTTP statuses. A 5xx ``outcome_unknown`` means the request may or may not have been performed.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from aiohttp import web

from consumers.paper_venue.binance_params import CLIENT_ID_PATTERN, CLIENT_ID_RE
from consumers.paper_venue.context import Shaper, Venue
from consumers.paper_venue.engine import NewOrder, OrderView
from consumers.paper_venue.errors import Refusal, RefusalKind
from consumers.paper_venue.faults import Fault
from consumers.paper_venue.money import parse_decimal, parse_whole
from consumers.paper_venue.rows import OrderRow, TradeRow
from consumers.paper_venue.signing import (
    MSG_BAD_SIGNATURE,
    Window,
    parse_window,
    signature_matches,
    wall_us,
)

API = "native"
PREFIX = "/paper/v1/account"

STATUS: dict[RefusalKind, int] = {
    RefusalKind.INVALID_REQUEST: 400,
    RefusalKind.UNKNOWN_SYMBOL: 400,
    RefusalKind.UNAUTHORIZED: 401,
    RefusalKind.ORDER_NOT_FOUND: 404,
    RefusalKind.DUPLICATE_CLIENT_ORDER_ID: 409,
    RefusalKind.ORDER_NOT_OPEN: 409,
    RefusalKind.REQUEST_EXPIRED: 422,
    RefusalKind.FILTER_FAILURE: 422,
    RefusalKind.INSUFFICIENT_BALANCE: 422,
    RefusalKind.ORDER_REJECTED: 422,
}


def error(refusal: Refusal) -> web.Response:
    """The native error answer for a refusal."""
    return web.json_response(
        {"error": {"code": refusal.kind.value, "message": refusal.msg}},
        status=STATUS[refusal.kind],
    )


def _fault_answer(fault: Fault) -> web.StreamResponse:
    code = "outcome_unknown" if fault.status >= 500 else "request_rejected"
    return web.json_response({"error": {"code": code, "message": fault.msg}}, status=fault.status)


def _bad(message: str) -> Refusal:
    return Refusal(RefusalKind.INVALID_REQUEST, -1102, message)


def _amount(body: dict[str, Any], name: str) -> Decimal | None:
    value = body.get(name)
    if value is None:
        return None
    parsed = parse_decimal(value) if isinstance(value, str) else None
    if parsed is None:
        raise _bad(f"'{name}' must be a decimal string such as \"0.01\"")
    if parsed.as_tuple().exponent not in range(-8, 1):
        raise _bad(f"'{name}' has more than 8 decimals")
    return parsed


def parse_order(body: object) -> NewOrder:
    """A :class:`NewOrder` from a native placement body."""
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object")
    known = {
        "symbol",
        "side",
        "type",
        "client_order_id",
        "time_in_force",
        "quantity",
        "quote_quantity",
        "price",
    }
    unknown = sorted(set(body) - known)
    if unknown:
        raise _bad(f"unknown field(s): {', '.join(unknown)}")
    symbol, side, type_ = body.get("symbol"), body.get("side"), body.get("type")
    if not isinstance(symbol, str) or not symbol:
        raise _bad("'symbol' is required")
    if side not in ("buy", "sell"):
        raise _bad("'side' must be 'buy' or 'sell'")
    if type_ not in ("market", "limit"):
        raise _bad("'type' must be 'market' or 'limit'")
    cid = body.get("client_order_id")
    if not isinstance(cid, str) or not CLIENT_ID_RE.fullmatch(cid):
        raise _bad(f"'client_order_id' must match {CLIENT_ID_PATTERN}")
    tif = body.get("time_in_force")
    qty, quote, price = (
        _amount(body, "quantity"),
        _amount(body, "quote_quantity"),
        _amount(body, "price"),
    )
    if type_ == "market":
        if tif is not None or price is not None:
            raise _bad("a market order takes neither 'time_in_force' nor 'price'")
        if (qty is None) == (quote is None):
            raise _bad("a market order takes exactly one of 'quantity' and 'quote_quantity'")
    else:
        tif = tif or "gtc"
        if tif not in ("gtc", "ioc", "fok"):
            raise _bad("'time_in_force' must be 'gtc', 'ioc' or 'fok'")
        if qty is None or price is None or quote is not None:
            raise _bad("a limit order takes 'quantity' and 'price' (not 'quote_quantity')")
    return NewOrder(
        symbol, side.upper(), type_.upper(), cid, tif.upper() if tif else None, qty, quote, price
    )


def _text(value: Decimal) -> str:
    return format(value, "f")


def fill_json(t: TradeRow) -> dict[str, Any]:
    return {
        "trade_id": str(t.trade_id),
        "price": _text(t.price),
        "quantity": _text(t.qty),
        "commission": _text(t.commission),
        "commission_asset": t.commission_asset,
        "maker": t.is_maker,
        "time_ms": t.time_ms,
    }


def order_json(o: OrderRow, fills: list[TradeRow]) -> dict[str, Any]:
    """An order in the native vocabulary (lower-case enums, decimal strings, string ids)."""
    return {
        "venue_order_id": str(o.order_id),
        "client_order_id": o.client_order_id,
        "symbol": o.symbol,
        "side": o.side.lower(),
        "type": o.type.lower(),
        "time_in_force": o.time_in_force.lower() if o.type == "LIMIT" else None,
        "status": o.status.lower(),
        "price": _text(o.price) if o.type == "LIMIT" else None,
        "quantity": _text(o.orig_qty),
        "quote_quantity": _text(o.orig_quote_qty) if o.orig_quote_qty else None,
        "executed_quantity": _text(o.executed_qty),
        "cumulative_quote_quantity": _text(o.cumm_quote_qty),
        "created_at_ms": o.time_ms,
        "updated_at_ms": o.update_time_ms,
        "fills": [fill_json(t) for t in fills],
    }


def _view(view: OrderView, status: int = 200) -> web.Response:
    return web.json_response({"order": order_json(view.order, view.fills)}, status=status)


class NativeApi:
    """The ``/paper/v1/account`` routes over one :class:`Venue`."""

    def __init__(self, venue: Venue) -> None:
        self.venue = venue
        self.shape = Shaper(venue, API, _fault_answer)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/paper/v1/time", self.time),
            web.get("/paper/v1/symbols", self.symbols),
            web.post(f"{PREFIX}/orders", self.place),
            web.get(f"{PREFIX}/orders", self.query),
            web.delete(f"{PREFIX}/orders", self.cancel),
            web.get(f"{PREFIX}/open-orders", self.open_orders),
            web.get(f"{PREFIX}/balances", self.balances),
        ]

    async def _auth(self, request: web.Request) -> tuple[str, bytes, Window]:
        account = self.venue.accounts_by_key.get(request.headers.get("X-Paper-Key", ""))
        if account is None:
            raise Refusal(RefusalKind.UNAUTHORIZED, -2015, "unknown or missing X-Paper-Key")
        timestamp = request.headers.get("X-Paper-Timestamp", "")
        window_text = request.headers.get("X-Paper-Window", "5000")
        try:
            window = parse_window(timestamp, window_text)
        except Refusal as e:
            raise _bad(f"X-Paper-Timestamp/X-Paper-Window: {e.msg}") from None
        body = await request.read()
        payload = f"{timestamp}\n{window_text}\n{request.method}\n{request.raw_path}\n"
        signature = request.headers.get("X-Paper-Signature", "")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad("the body must be UTF-8") from None
        if not signature_matches(account.api_secret, payload + text, signature):
            raise Refusal(RefusalKind.UNAUTHORIZED, -1022, MSG_BAD_SIGNATURE)
        window.check(wall_us())
        return account.name, body, window

    async def time(self, request: web.Request) -> web.Response:
        return web.json_response({"time_ms": self.venue.exchange.clock()})

    async def symbols(self, request: web.Request) -> web.Response:
        prices = self.venue.exchange.store.prices()
        return web.json_response(
            {
                "symbols": [
                    {
                        "symbol": s.symbol,
                        "base": s.base,
                        "quote": s.quote,
                        "price": _text(prices.get(s.symbol, (s.price, 0))[0]),
                        "tick_size": _text(s.tick_size),
                        "step_size": _text(s.step_size),
                        "min_quantity": _text(s.min_qty),
                        "max_quantity": _text(s.max_qty),
                        "min_notional": _text(s.min_notional),
                    }
                    for s in self.venue.config.symbols.values()
                ]
            }
        )

    async def place(self, request: web.Request) -> web.StreamResponse:
        account, body, window = await self._auth(request)
        try:
            new = parse_order(json.loads(body))
        except json.JSONDecodeError:
            raise _bad("the body is not JSON") from None
        decision = self.shape.decide(
            request, "place", client_order_id=new.client_order_id, symbol=new.symbol
        )
        quiet = decision.fault.quiet_ms if decision is not None else 0
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.place(
                account, new, api=API, quiet_ms=quiet, still_fresh=lambda: window.check(wall_us())
            ),
            lambda view: _view(view, 201),
        )

    def _lookup(self, request: web.Request) -> tuple[str, int | None, str | None]:
        symbol = request.query.get("symbol", "")
        venue_id = request.query.get("venue_order_id")
        client_id = request.query.get("client_order_id")
        if not symbol or (venue_id is None) == (client_id is None):
            raise _bad("give 'symbol' and one of 'client_order_id' and 'venue_order_id'")
        number = None if venue_id is None else parse_whole(venue_id)
        if venue_id is not None and number is None:
            raise _bad("'venue_order_id' must be an order id: up to 19 ASCII digits")
        return symbol, number, client_id

    async def query(self, request: web.Request) -> web.StreamResponse:
        account, _, _ = await self._auth(request)
        symbol, venue_id, client_id = self._lookup(request)
        decision = self.shape.decide(request, "query", client_order_id=client_id, symbol=symbol)
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.get(
                account, symbol, order_id=venue_id, client_id=client_id
            ),
            _view,
        )

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        account, _, _ = await self._auth(request)
        symbol, venue_id, client_id = self._lookup(request)
        decision = self.shape.decide(request, "cancel", client_order_id=client_id, symbol=symbol)
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.cancel(
                account, symbol, order_id=venue_id, client_id=client_id
            ),
            _view,
        )

    async def open_orders(self, request: web.Request) -> web.StreamResponse:
        account, _, _ = await self._auth(request)
        symbol = request.query.get("symbol") or None
        decision = self.shape.decide(request, "open_orders", symbol=symbol)
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.open_orders(account, symbol),
            lambda views: web.json_response(
                {"orders": [order_json(v.order, v.fills) for v in views]}
            ),
        )

    async def balances(self, request: web.Request) -> web.StreamResponse:
        account, _, _ = await self._auth(request)
        decision = self.shape.decide(request, "account")
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.balances(account),
            lambda rows: web.json_response(
                {
                    "balances": [
                        {"asset": a, "free": _text(f), "locked": _text(lk)} for a, f, lk in rows
                    ]
                }
            ),
        )
