"""The Binance Spot REST subset: ``/api/v3/...`` with Binance's signing, timing and errors.

Parameters come from the query string and, for POST/DELETE, a form-encoded body; a parameter in
both is taken from the query string. The signature covers the query string (without
``signature``) concatenated without separator with the body (without ``signature``). Checks run
in this order: API key (-2014/-2015), parameters (-1101/-1102), signature (-1022), time window
(-1021), then the endpoint's own parameters and rules.
"""

from __future__ import annotations

from aiohttp import web

from consumers.paper_venue import binance_json as bj
from consumers.paper_venue import binance_params as bp
from consumers.paper_venue.context import Shaper, Venue
from consumers.paper_venue.engine import OrderView
from consumers.paper_venue.errors import Refusal, RefusalKind, invalid, mandatory
from consumers.paper_venue.faults import Fault
from consumers.paper_venue.money import fmt
from consumers.paper_venue.signing import (
    MSG_BAD_SIGNATURE,
    parse_window,
    signature_matches,
    wall_us,
)

API = "binance"


def error(refusal: Refusal) -> web.Response:
    """Binance's error shape: ``{"code": ..., "msg": ...}`` with the refusal's HTTP status."""
    return web.json_response({"code": refusal.code, "msg": refusal.msg}, status=refusal.status)


def _fault_answer(fault: Fault) -> web.StreamResponse:
    return web.json_response({"code": fault.code, "msg": fault.msg}, status=fault.status)


class BinanceApi:
    """The ``/api/v3`` routes over one :class:`Venue`."""

    def __init__(self, venue: Venue) -> None:
        self.venue = venue
        self.shape = Shaper(venue, API, _fault_answer)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/api/v3/ping", self.ping),
            web.get("/api/v3/time", self.time),
            web.get("/api/v3/exchangeInfo", self.exchange_info),
            web.get("/api/v3/ticker/price", self.ticker_price),
            web.post("/api/v3/order", self.new_order),
            web.get("/api/v3/order", self.query_order),
            web.delete("/api/v3/order", self.cancel_order),
            web.get("/api/v3/openOrders", self.open_orders),
            web.get("/api/v3/myTrades", self.my_trades),
            web.get("/api/v3/account", self.account),
        ]

    async def _signed(self, request: web.Request) -> bp.Signed:
        key = request.headers.get("X-MBX-APIKEY", "")
        if not key:
            raise Refusal(RefusalKind.UNAUTHORIZED, -2014, "API-key format invalid.", 401)
        account = self.venue.accounts_by_key.get(key)
        if account is None:
            raise Refusal(
                RefusalKind.UNAUTHORIZED,
                -2015,
                "Invalid API-key, IP, or permissions for action.",
                401,
            )
        raw_query = request.raw_path.partition("?")[2]
        raw_body = ""
        form = request.content_type in ("application/x-www-form-urlencoded", "", "text/plain")
        if request.method in ("POST", "PUT", "DELETE") and request.can_read_body and form:
            try:
                raw_body = (await request.read()).decode("ascii")
            except UnicodeDecodeError:
                raise invalid(-1100, "Illegal characters found in a parameter.") from None
        params = {**bp.parse_pairs(raw_body), **bp.parse_pairs(raw_query)}
        signature = params.pop("signature", "")
        if not signature:
            raise mandatory("signature")
        window = parse_window(params.get("timestamp"), params.get("recvWindow"))
        if not signature_matches(
            account.api_secret, bp.signature_payload(raw_query, raw_body), signature
        ):
            raise Refusal(RefusalKind.UNAUTHORIZED, -1022, MSG_BAD_SIGNATURE)
        window.check(wall_us())
        return bp.Signed(account.name, params, window)

    # -- public ------------------------------------------------------------------------------

    async def ping(self, request: web.Request) -> web.Response:
        return web.json_response({})

    async def time(self, request: web.Request) -> web.Response:
        return web.json_response({"serverTime": self.venue.exchange.clock()})

    async def exchange_info(self, request: web.Request) -> web.Response:
        symbol = request.query.get("symbol")
        specs = (
            [self.venue.exchange.spec(symbol)]
            if symbol
            else list(self.venue.config.symbols.values())
        )
        return web.json_response(
            {
                "timezone": "UTC",
                "serverTime": self.venue.exchange.clock(),
                "rateLimits": [],
                "exchangeFilters": [],
                "symbols": [bj.symbol_info(s) for s in specs],
            }
        )

    async def ticker_price(self, request: web.Request) -> web.Response:
        prices = self.venue.exchange.store.prices()
        symbol = request.query.get("symbol")
        if symbol:
            spec = self.venue.exchange.spec(symbol)
            return web.json_response({"symbol": spec.symbol, "price": fmt(prices[spec.symbol][0])})
        return web.json_response([{"symbol": s, "price": fmt(p)} for s, (p, _) in prices.items()])

    # -- trading -----------------------------------------------------------------------------

    async def new_order(self, request: web.Request) -> web.StreamResponse:
        signed = await self._signed(request)
        new, resp_type = bp.parse_new_order(signed.params)
        decision = self.shape.decide(
            request, "place", client_order_id=new.client_order_id, symbol=new.symbol
        )
        quiet = decision.fault.quiet_ms if decision is not None else 0

        def perform() -> OrderView:
            return self.venue.exchange.place(
                signed.account,
                new,
                api=API,
                quiet_ms=quiet,
                still_fresh=lambda: signed.window.check(wall_us()),
            )

        return await self.shape(
            request,
            decision,
            perform,
            lambda view: web.json_response(bj.placed(view, resp_type)),
        )

    def _lookup(self, signed: bp.Signed, allowed: set[str]) -> tuple[str, int | None, str | None]:
        bp.require_known(signed.params, allowed | bp.SIGNED)
        symbol = signed.params.get("symbol") or ""
        if not symbol:
            raise mandatory("symbol")
        order_id = bp.order_id_param(signed.params)
        client_id = signed.params.get("origClientOrderId") or None
        if order_id is None and client_id is None:
            raise invalid(
                -1102,
                "Param 'origClientOrderId' or 'orderId' must be sent, but both were empty/null!",
            )
        return symbol, order_id, client_id

    async def query_order(self, request: web.Request) -> web.StreamResponse:
        signed = await self._signed(request)
        symbol, order_id, client_id = self._lookup(
            signed, {"symbol", "orderId", "origClientOrderId"}
        )
        decision = self.shape.decide(request, "query", client_order_id=client_id, symbol=symbol)
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.get(
                signed.account, symbol, order_id=order_id, client_id=client_id
            ),
            lambda view: web.json_response(bj.queried(view.order)),
        )

    async def cancel_order(self, request: web.Request) -> web.StreamResponse:
        signed = await self._signed(request)
        symbol, order_id, client_id = self._lookup(
            signed,
            {"symbol", "orderId", "origClientOrderId", "newClientOrderId", "cancelRestrictions"},
        )
        cancel_id = signed.params.get("newClientOrderId") or bp.generated_client_id()
        decision = self.shape.decide(request, "cancel", client_order_id=client_id, symbol=symbol)
        exchange = self.venue.exchange
        return await self.shape(
            request,
            decision,
            lambda: exchange.cancel(signed.account, symbol, order_id=order_id, client_id=client_id),
            lambda view: web.json_response(bj.canceled(view.order, cancel_id, exchange.clock())),
        )

    async def open_orders(self, request: web.Request) -> web.StreamResponse:
        signed = await self._signed(request)
        bp.require_known(signed.params, {"symbol"} | bp.SIGNED)
        symbol = signed.params.get("symbol") or None
        decision = self.shape.decide(request, "open_orders", symbol=symbol)
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.open_orders(signed.account, symbol),
            lambda views: web.json_response([bj.queried(v.order) for v in views]),
        )

    async def my_trades(self, request: web.Request) -> web.StreamResponse:
        signed = await self._signed(request)
        params = signed.params
        bp.require_known(
            params, {"symbol", "orderId", "fromId", "limit", "startTime", "endTime"} | bp.SIGNED
        )
        symbol = params.get("symbol") or ""
        if not symbol:
            raise mandatory("symbol")
        order_id = bp.order_id_param(params)
        from_id = bp.whole_param(params, "fromId")
        since_ms = bp.whole_param(params, "startTime")
        until_ms = bp.whole_param(params, "endTime")
        limit = bp.whole_param(params, "limit")
        if limit is not None and not 1 <= limit <= 1000:
            raise invalid(-1130, "Data sent for parameter 'limit' is not valid.")
        decision = self.shape.decide(request, "trades", symbol=symbol)
        return await self.shape(
            request,
            decision,
            lambda: self.venue.exchange.trades(
                signed.account,
                symbol,
                order_id=order_id,
                from_id=from_id,
                limit=limit or 500,
                since_ms=since_ms,
                until_ms=until_ms,
            ),
            lambda rows: web.json_response([bj.trade(t) for t in rows]),
        )

    async def account(self, request: web.Request) -> web.StreamResponse:
        signed = await self._signed(request)
        bp.require_known(signed.params, {"omitZeroBalances"} | bp.SIGNED)
        omit = signed.params.get("omitZeroBalances") == "true"
        decision = self.shape.decide(request, "account")
        exchange = self.venue.exchange
        return await self.shape(
            request,
            decision,
            lambda: exchange.balances(signed.account),
            lambda rows: web.json_response(
                bj.account(self.venue.config, signed.account, rows, exchange.clock(), omit)
            ),
        )
