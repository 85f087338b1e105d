"""Binance Spot REST client: a :class:`~consumers.venue.adapter.VenueAdapter`.

Real request signing (HMAC-SHA256 of the exact query string or body, hex, with the API secret;
``X-MBX-APIKEY`` header) and real endpoints: ``POST/GET/DELETE /api/v3/order``,
``GET /api/v3/openOrders``, ``GET /api/v3/myTrades``, ``GET /api/v3/account``,
``GET /api/v3/exchangeInfo``, ``GET /api/v3/time``. Point ``base_url`` at the paper venue
(``http://127.0.0.1:8090``), at the Spot testnet (:data:`TESTNET_URL`) or at production.

``timestamp``/``recvWindow`` come from the :class:`Attempt`, never from this client's clock, so
a request from a paused process is refused by Binance itself (-1021). Keep the host clock in
sync (NTP): Binance also refuses a timestamp more than 1 s ahead of its own. Error answers are
mapped by :mod:`consumers.venue.binance_codes`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlencode

from consumers.venue.adapter import (
    Accepted,
    Attempt,
    Balance,
    Balances,
    BalancesAnswer,
    CancelAnswer,
    Exposure,
    ExposureAnswer,
    Fill,
    NotFound,
    OpenOrders,
    OpenOrdersAnswer,
    OrderRequest,
    OrderStatus,
    OrderType,
    PlaceAnswer,
    QueryAnswer,
    Rejected,
    RejectReason,
    Side,
    TimeInForce,
    Unknown,
    UnknownReason,
    amount,
    epoch_ms,
)
from consumers.venue.binance_codes import Op, classify
from consumers.venue.binance_trades import order_trades
from consumers.venue.http import HttpAnswer, HttpSession, TransportFailure

TESTNET_URL = "https://testnet.binance.vision"
PRODUCTION_URL = "https://api.binance.com"
_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def sign(secret: str, payload: str) -> str:
    """Binance's HMAC signature: hex HMAC-SHA256 of ``payload`` keyed with ``secret``."""
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def _amount(value: Decimal) -> str:
    return format(value, "f")  # never exponent notation (1E-8)


def _transport(failure: TransportFailure, op: Op) -> Rejected | Unknown:
    if failure.kind == "not_sent" and op in (Op.PLACE, Op.CANCEL):
        return Rejected(RejectReason.NOT_SENT, None, failure.detail)
    reason = UnknownReason.TIMEOUT if failure.kind == "timeout" else UnknownReason.CONNECTION
    return Unknown(reason, failure.detail)


def parse_order(d: dict[str, Any], fills: tuple[Fill, ...] | None) -> Accepted:
    """An :class:`Accepted` from Binance's order JSON (place, query, cancel or open orders);
    ``ValueError``, ``KeyError`` or ``TypeError`` for an answer that is not one."""
    type_ = OrderType(d["type"])
    price = amount(d["price"])
    quote = amount(d.get("origQuoteOrderQty", "0"))
    tif = d.get("timeInForce")
    return Accepted(
        venue_order_id=str(d["orderId"]),
        client_order_id=str(d.get("origClientOrderId") or d["clientOrderId"]),
        symbol=d["symbol"],
        side=Side(d["side"]),
        type=type_,
        status=OrderStatus(d["status"]),
        quantity=amount(d["origQty"]),
        executed_quantity=amount(d["executedQty"]),
        cumulative_quote_quantity=amount(d["cummulativeQuoteQty"]),
        price=price if price > 0 else None,
        quote_quantity=quote if quote > 0 else None,
        time_in_force=TimeInForce(tif) if tif and type_ is not OrderType.MARKET else None,
        created_at_ms=epoch_ms(d.get("time", d.get("transactTime"))),
        updated_at_ms=epoch_ms(d.get("updateTime", d.get("transactTime"))),
        fills=fills,
    )


def parse_fills(items: list[dict[str, Any]]) -> tuple[Fill, ...]:
    """Fills from a FULL placement answer (``tradeId``) or ``myTrades`` (``id``)."""
    return tuple(
        Fill(
            price=amount(f["price"]),
            quantity=amount(f["qty"]),
            commission=amount(f["commission"]),
            commission_asset=f["commissionAsset"],
            trade_id=str(f.get("tradeId", f.get("id"))),
        )
        for f in items
    )


class BinanceSpotClient:
    """Binance Spot over one keep-alive connection. Synchronous; not thread-safe.

    ``response_type`` FULL (default) returns fills with each placement; RESULT omits them
    (``fills`` is None). ACK is not offered: it carries no status.
    """

    name = "binance-spot"

    def __init__(
        self,
        base_url: str,
        api_key: str,
        api_secret: str,
        *,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
        response_type: str = "FULL",
    ) -> None:
        if response_type not in ("FULL", "RESULT"):
            raise ValueError("response_type is FULL or RESULT")
        self._http = HttpSession(
            base_url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s
        )
        self._key = api_key
        self._secret = api_secret
        self._response_type = response_type
        self._assets: dict[str, tuple[str, str]] = {}
        self._steps: dict[str, Decimal] = {}

    def close(self) -> None:
        self._http.close()

    # -- the interface -----------------------------------------------------------------------

    def place(self, order: OrderRequest, attempt: Attempt) -> PlaceAnswer:
        params: list[tuple[str, str]] = [
            ("symbol", order.symbol),
            ("side", order.side.value),
            ("type", order.type.value),
        ]
        if order.type is OrderType.LIMIT:
            params.append(("timeInForce", (order.time_in_force or TimeInForce.GTC).value))
        if order.quantity is not None:
            params.append(("quantity", _amount(order.quantity)))
        if order.quote_quantity is not None:
            params.append(("quoteOrderQty", _amount(order.quote_quantity)))
        if order.price is not None:
            params.append(("price", _amount(order.price)))
        params += [
            ("newClientOrderId", order.client_order_id),
            ("newOrderRespType", self._response_type),
        ]
        answer = self._signed("POST", "/api/v3/order", params, attempt, Op.PLACE)
        if isinstance(answer, Rejected | NotFound | Unknown):
            return answer if not isinstance(answer, NotFound) else _unexpected(answer)
        return self._accepted(answer, lambda d: parse_fills(d["fills"]) if "fills" in d else None)

    def query(self, symbol: str, client_order_id: str, attempt: Attempt) -> QueryAnswer:
        return self._query(symbol, [("origClientOrderId", client_order_id)], attempt)

    def query_by_venue_id(self, symbol: str, venue_order_id: str, attempt: Attempt) -> QueryAnswer:
        return self._query(symbol, [("orderId", venue_order_id)], attempt)

    def cancel(self, symbol: str, client_order_id: str, attempt: Attempt) -> CancelAnswer:
        params = [("symbol", symbol), ("origClientOrderId", client_order_id)]
        answer = self._signed("DELETE", "/api/v3/order", params, attempt, Op.CANCEL)
        if isinstance(answer, Rejected | NotFound | Unknown):
            return answer
        return self._accepted(answer, lambda d: None)

    def open_orders(self, symbol: str | None, attempt: Attempt) -> OpenOrdersAnswer:
        params = [("symbol", symbol)] if symbol else []
        answer = self._signed("GET", "/api/v3/openOrders", params, attempt, Op.READ)
        if isinstance(answer, Rejected | NotFound | Unknown):
            return _as_unknown(answer)
        try:
            return OpenOrders(tuple(parse_order(d, None) for d in answer))
        except (KeyError, TypeError, ValueError, ArithmeticError) as e:
            return Unknown(UnknownReason.UNREADABLE, f"open orders: {e!r}")

    def balances(self, attempt: Attempt) -> BalancesAnswer:
        params = [("omitZeroBalances", "true")]
        answer = self._signed("GET", "/api/v3/account", params, attempt, Op.READ)
        if isinstance(answer, Rejected | NotFound | Unknown):
            return _as_unknown(answer)
        try:
            return Balances(
                tuple(
                    Balance(b["asset"], amount(b["free"]), amount(b["locked"]))
                    for b in answer["balances"]
                )
            )
        except (KeyError, TypeError, ValueError, ArithmeticError) as e:
            return Unknown(UnknownReason.UNREADABLE, f"account: {e!r}")

    def exposure(self, symbol: str, attempt: Attempt) -> ExposureAnswer:
        assets = self._symbol_assets(symbol)
        if isinstance(assets, Unknown):
            return assets
        balances = self.balances(attempt)
        if isinstance(balances, Unknown):
            return balances
        orders = self.open_orders(symbol, attempt)
        if isinstance(orders, Unknown):
            return orders
        base, quote = assets
        return Exposure(
            symbol,
            balances.get(base),
            balances.get(quote),
            orders.orders,
            lot_step=self._steps.get(symbol),
        )

    # -- extras ------------------------------------------------------------------------------

    def server_time_ms(self) -> int | Unknown:
        """Binance's clock (``GET /api/v3/time``), to check this host's clock against it."""
        answer = self._public("/api/v3/time")
        if isinstance(answer, Unknown):
            return answer
        value = answer.get("serverTime") if isinstance(answer, dict) else None
        return value if isinstance(value, int) else Unknown(UnknownReason.UNREADABLE, "time")

    # -- internals ---------------------------------------------------------------------------

    def _query(self, symbol: str, key: list[tuple[str, str]], attempt: Attempt) -> QueryAnswer:
        answer = self._signed("GET", "/api/v3/order", [("symbol", symbol), *key], attempt, Op.QUERY)
        if isinstance(answer, NotFound | Unknown):
            return answer
        if isinstance(answer, Rejected):  # classify never rejects a query; be safe anyway
            return _as_unknown(answer)
        order = self._accepted(answer, lambda d: ())
        if isinstance(order, Unknown) or order.executed_quantity == 0:
            return order

        def fetch(params: list[tuple[str, str]]) -> Any:
            by_symbol = [("symbol", symbol), *params]
            return self._signed("GET", "/api/v3/myTrades", by_symbol, attempt, Op.READ)

        fills: tuple[Fill, ...] | None = None
        try:
            trades = order_trades(fetch, order.venue_order_id, order.executed_quantity)
            fills = None if trades is None else parse_fills(trades)
        except (KeyError, TypeError, ValueError, ArithmeticError):
            fills = None
        return replace(order, fills=fills)

    def _accepted(self, answer: Any, fills: Any) -> Accepted | Unknown:
        try:
            return parse_order(answer, fills(answer))
        except (KeyError, TypeError, ValueError, ArithmeticError) as e:
            return Unknown(UnknownReason.UNREADABLE, f"order answer: {e!r}")

    def _symbol_assets(self, symbol: str) -> tuple[str, str] | Unknown:
        if symbol not in self._assets:
            answer = self._public(f"/api/v3/exchangeInfo?{urlencode({'symbol': symbol})}")
            if isinstance(answer, Unknown):
                return answer
            try:
                info = answer["symbols"][0]
                self._assets[symbol] = (info["baseAsset"], info["quoteAsset"])
                step = _lot_step(info.get("filters"))
                if step is not None:
                    self._steps[symbol] = step
            except (KeyError, IndexError, TypeError) as e:
                return Unknown(UnknownReason.UNREADABLE, f"exchangeInfo: {e!r}")
        return self._assets[symbol]

    def _public(self, target: str) -> Any:
        try:
            answer = self._http.request("GET", target, idempotent=True)
        except TransportFailure as failure:
            return _as_unknown(_transport(failure, Op.READ))
        return _as_unknown_any(_decode(answer, Op.READ))

    def _signed(
        self, method: str, path: str, params: list[tuple[str, str]], attempt: Attempt, op: Op
    ) -> Any:
        """The decoded 2xx body, or the outcome of a failed request."""
        query = urlencode(
            [
                *params,
                ("recvWindow", str(attempt.window_ms)),
                ("timestamp", str(attempt.sent_at_ms)),
            ]
        )
        payload = f"{query}&signature={sign(self._secret, query)}"
        headers = {"X-MBX-APIKEY": self._key}
        try:
            if method == "POST":
                answer = self._http.request(method, path, payload.encode(), {**headers, **_FORM})
            else:
                answer = self._http.request(
                    method, f"{path}?{payload}", None, headers, idempotent=method == "GET"
                )
        except TransportFailure as failure:
            return _transport(failure, op)
        return _decode(answer, op)


def _decode(answer: HttpAnswer, op: Op) -> Any:
    try:
        body = json.loads(answer.body, parse_float=Decimal)
    except (ValueError, UnicodeDecodeError):
        body = None
    if 200 <= answer.status < 300:
        if body is None:
            return Unknown(
                UnknownReason.UNREADABLE, "a 2xx answer that is not JSON", None, answer.status
            )
        return body
    code = body.get("code") if isinstance(body, dict) else None
    msg = body.get("msg") if isinstance(body, dict) else None
    return classify(op, answer.status, code if isinstance(code, int) else None, str(msg or ""))


def _as_unknown(answer: Rejected | NotFound | Unknown) -> Unknown:
    if isinstance(answer, Unknown):
        return answer
    return Unknown(UnknownReason.QUERY_REFUSED, answer.message, answer.code)


def _as_unknown_any(answer: Any) -> Any:
    return _as_unknown(answer) if isinstance(answer, Rejected | NotFound | Unknown) else answer


def _unexpected(answer: NotFound) -> Unknown:
    return Unknown(UnknownReason.UNRECOGNIZED, answer.message, answer.code)


def _lot_step(filters: object) -> Decimal | None:
    """The LOT_SIZE ``stepSize`` of a symbol's filters; ``None`` if absent or not a positive
    decimal (then quantities are not rounded, as before the step was read)."""
    if not isinstance(filters, list):
        return None
    for item in filters:
        if isinstance(item, dict) and item.get("filterType") == "LOT_SIZE":
            try:
                step = Decimal(str(item.get("stepSize")))
            except InvalidOperation:
                return None
            return step if step.is_finite() and step > 0 else None
    return None
