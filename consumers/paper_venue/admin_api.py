"""The admin API for drills: faults, prices, balances, the whole order book, reset, counters.

Every route except ``GET /paper/v1/health`` needs ``Authorization: Bearer <admin token>``.
The views here are the truth, unaffected by quiet periods: ``GET /paper/v1/orders`` lists every
order ever accepted (with its fills) and counts them per client order id, so a drill can assert
"exactly one order for this action".
"""

from __future__ import annotations

import hmac
import json
import secrets
from decimal import Decimal
from typing import Any

from aiohttp import web

from consumers.paper_venue.context import Venue
from consumers.paper_venue.errors import PaperVenueError, Refusal
from consumers.paper_venue.faults import FaultSpecError, parse_fault
from consumers.paper_venue.money import parse_decimal, parse_whole
from consumers.paper_venue.native_api import fill_json, order_json

PREFIX = "/paper/v1"


class Problem(Exception):
    """An admin request that cannot be served; rendered as the native error shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> web.Response:
        return web.json_response(
            {"error": {"code": self.code, "message": self.message}}, status=self.status
        )


class AdminApi:
    """The admin routes over one :class:`Venue`."""

    def __init__(self, venue: Venue) -> None:
        self.venue = venue

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(f"{PREFIX}/health", self.health),
            web.get(f"{PREFIX}/faults", self.list_faults),
            web.post(f"{PREFIX}/faults", self.add_faults),
            web.delete(f"{PREFIX}/faults", self.delete_faults),
            web.delete(f"{PREFIX}/faults/{{fault_id}}", self.delete_fault),
            web.get(f"{PREFIX}/prices", self.prices),
            web.post(f"{PREFIX}/prices", self.set_price),
            web.get(f"{PREFIX}/balances", self.balances),
            web.put(f"{PREFIX}/balances", self.set_balance),
            web.get(f"{PREFIX}/orders", self.orders),
            web.get(f"{PREFIX}/trades", self.trades),
            web.get(f"{PREFIX}/stats", self.stats),
            web.post(f"{PREFIX}/reset", self.reset),
        ]

    def _authorize(self, request: web.Request) -> None:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), self.venue.admin_token.encode()):
            raise Problem(401, "unauthorized", "send Authorization: Bearer <admin token>")

    async def _json(self, request: web.Request) -> Any:
        try:
            return json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise Problem(400, "invalid_request", "the body is not JSON") from None

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    # -- faults ------------------------------------------------------------------------------

    async def list_faults(self, request: web.Request) -> web.Response:
        self._authorize(request)
        return web.json_response({"faults": self.venue.faults.rules()})

    async def add_faults(self, request: web.Request) -> web.Response:
        """Body: one fault object, or ``{"faults": [...]}``. 201 with the stored rules."""
        self._authorize(request)
        body = await self._json(request)
        items = body["faults"] if isinstance(body, dict) and "faults" in body else [body]
        if not isinstance(items, list):
            raise Problem(400, "invalid_fault", "'faults' must be a list")
        now = self.venue.exchange.clock()
        parsed = []
        for index, item in enumerate(items):
            try:
                parsed.append(parse_fault(item, f"fault-{secrets.token_hex(4)}"))
            except FaultSpecError as e:
                raise Problem(400, "invalid_fault", f"fault {index}: {e}") from None
        added = []
        for fault in parsed:
            fault_id = self.venue.faults.add(fault, now)
            if fault_id is None:
                raise Problem(409, "duplicate_fault", f"a fault named {fault.name!r} exists")
            added.append(fault_id)
        rules = [r for r in self.venue.faults.rules() if r["id"] in added]
        return web.json_response({"faults": rules}, status=201)

    async def delete_faults(self, request: web.Request) -> web.Response:
        self._authorize(request)
        return web.json_response({"deleted": self.venue.faults.delete()})

    async def delete_fault(self, request: web.Request) -> web.Response:
        self._authorize(request)
        fault_id = request.match_info["fault_id"]
        number = parse_whole(fault_id)
        if number is None or not self.venue.faults.delete(number):
            raise Problem(404, "not_found", f"no fault {fault_id}")
        return web.json_response({"deleted": 1})

    # -- prices and balances -----------------------------------------------------------------

    async def prices(self, request: web.Request) -> web.Response:
        self._authorize(request)
        prices = self.venue.exchange.store.prices()
        return web.json_response(
            {
                "prices": {
                    s: {"price": format(p, "f"), "updated_at_ms": t} for s, (p, t) in prices.items()
                }
            }
        )

    async def set_price(self, request: web.Request) -> web.Response:
        """Body ``{"symbol", "price", "volume"?}``: resting orders the move crosses fill."""
        self._authorize(request)
        body = await self._json(request)
        if not isinstance(body, dict):
            raise Problem(400, "invalid_request", "the body must be a JSON object")
        price = _positive(body.get("price"), "price")
        volume = None if body.get("volume") is None else _positive(body["volume"], "volume")
        try:
            fills = self.venue.exchange.set_price(str(body.get("symbol", "")), price, volume)
        except Refusal as e:
            raise Problem(400, e.kind.value, e.msg) from None
        return web.json_response(
            {
                "symbol": body["symbol"],
                "price": format(price, "f"),
                "fills": [{"order_id": str(t.order_id), **fill_json(t)} for t in fills],
            }
        )

    async def balances(self, request: web.Request) -> web.Response:
        self._authorize(request)
        return web.json_response(
            {
                "balances": {
                    account: [
                        {"asset": a, "free": format(f, "f"), "locked": format(lk, "f")}
                        for a, f, lk in rows
                    ]
                    for account, rows in self.venue.exchange.store.all_balances().items()
                }
            }
        )

    async def set_balance(self, request: web.Request) -> web.Response:
        """Body ``{"account", "asset", "free"}``: sets the free amount (locked is kept)."""
        self._authorize(request)
        body = await self._json(request)
        if not isinstance(body, dict) or not all(
            isinstance(body.get(k), str) for k in ("account", "asset")
        ):
            raise Problem(400, "invalid_request", "give 'account', 'asset' and 'free'")
        if body["account"] not in {a.name for a in self.venue.config.accounts}:
            raise Problem(404, "not_found", f"no account {body['account']!r}")
        free = parse_decimal(body["free"]) if isinstance(body.get("free"), str) else None
        if free is None:
            raise Problem(400, "invalid_request", "'free' must be a decimal string")
        self.venue.exchange.set_balance(body["account"], body["asset"].upper(), free)
        return web.json_response({"ok": True})

    # -- the book ----------------------------------------------------------------------------

    async def orders(self, request: web.Request) -> web.Response:
        """Every order ever accepted, oldest first, filtered by ``account``, ``symbol`` or
        ``client_order_id``; with ``count_by_client_order_id``."""
        self._authorize(request)
        store = self.venue.exchange.store
        rows = store.all_orders(
            account=request.query.get("account"),
            symbol=request.query.get("symbol"),
            client_id=request.query.get("client_order_id"),
        )
        trades = store.trades(order_ids=[o.order_id for o in rows]) if rows else []
        counts: dict[str, int] = {}
        orders: list[dict[str, Any]] = []
        for o in rows:
            counts[o.client_order_id] = counts.get(o.client_order_id, 0) + 1
            fills = [t for t in trades if t.order_id == o.order_id]
            orders.append(
                {
                    **order_json(o, fills),
                    "account": o.account,
                    "api": o.api,
                    "visible_from_ms": o.visible_from_ms,
                }
            )
        return web.json_response({"orders": orders, "count_by_client_order_id": counts})

    async def trades(self, request: web.Request) -> web.Response:
        self._authorize(request)
        rows = self.venue.exchange.store.trades()
        return web.json_response(
            {
                "trades": [
                    {
                        "order_id": str(t.order_id),
                        "account": t.account,
                        "symbol": t.symbol,
                        "side": t.side.lower(),
                        **fill_json(t),
                    }
                    for t in rows
                ]
            }
        )

    async def stats(self, request: web.Request) -> web.Response:
        """Requests since the venue started, by API, operation and outcome (not durable)."""
        self._authorize(request)
        return web.json_response(
            {
                "requests": [
                    {"api": api, "op": op, "outcome": outcome, "count": n}
                    for (api, op, outcome), n in sorted(self.venue.stats.items())
                ]
            }
        )

    async def reset(self, request: web.Request) -> web.Response:
        """Forget every order, trade and fault; balances, prices and faults as configured."""
        self._authorize(request)
        self.venue.exchange.reset()
        self.venue.faults.delete()
        seed_faults(self.venue)
        return web.json_response({"ok": True})


def seed_faults(venue: Venue) -> None:
    """Arm the configured faults that are not stored yet (by name)."""
    now = venue.exchange.clock()
    for index, item in enumerate(venue.config.faults):
        try:
            fault = parse_fault(item, f"config-{index}")
        except FaultSpecError as e:
            raise PaperVenueError(f"[[faults]] {index}: {e}") from None
        venue.faults.add(fault, now)


def _positive(value: object, name: str) -> Decimal:
    parsed = parse_decimal(value) if isinstance(value, str) else None
    if parsed is None or parsed <= 0:
        raise Problem(400, "invalid_request", f"'{name}' must be a positive decimal string")
    return parsed
