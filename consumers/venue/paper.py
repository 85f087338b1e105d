"""The paper venue's native adapter: a :class:`~consumers.venue.adapter.VenueAdapter` over
``/paper/v1/account`` (JSON, lower-case enums, string ids), independent of Binance's API.

Requests are signed with ``X-Paper-Key``/``X-Paper-Timestamp``/``X-Paper-Window``/
``X-Paper-Signature`` (see :mod:`consumers.paper_venue.native_api`); the timestamp and window
come from the :class:`Attempt`. Native error codes map to outcomes as follows (any 5xx, any
transport failure after connecting, and any code not listed are Unknown):

===============================  ============================  ========================
native code (HTTP)               place / cancel                query / reads
===============================  ============================  ========================
``order_not_found`` (404)        —                             NotFound
``order_not_open`` (409)         cancel: NotFound              Unknown query_refused
``duplicate_client_order_id``    Rejected duplicate_...        Unknown query_refused
``insufficient_balance``         Rejected insufficient_...     Unknown query_refused
``filter_failure``               Rejected filter_failure       Unknown query_refused
``request_expired``              Rejected outside_recv_window  Unknown query_refused
``unauthorized`` (401)           Rejected unauthorized         Unknown query_refused
``invalid_request``,             Rejected invalid_request      Unknown query_refused
``unknown_symbol`` (400)
``order_rejected``,              Rejected order_rejected       Unknown query_refused
``request_rejected`` (4xx)
``outcome_unknown`` (5xx)        Unknown server_error          Unknown server_error
===============================  ============================  ========================
"""

from __future__ import annotations

import hashlib
import hmac
import json
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
from consumers.venue.http import HttpSession, TransportFailure

PREFIX = "/paper/v1/account"

REJECTIONS: dict[str, RejectReason] = {
    "duplicate_client_order_id": RejectReason.DUPLICATE_CLIENT_ORDER_ID,
    "insufficient_balance": RejectReason.INSUFFICIENT_BALANCE,
    "filter_failure": RejectReason.FILTER_FAILURE,
    "request_expired": RejectReason.OUTSIDE_RECV_WINDOW,
    "unauthorized": RejectReason.UNAUTHORIZED,
    "invalid_request": RejectReason.INVALID_REQUEST,
    "unknown_symbol": RejectReason.INVALID_REQUEST,
    "order_rejected": RejectReason.ORDER_REJECTED,
    "request_rejected": RejectReason.ORDER_REJECTED,
}

_Failure = Rejected | NotFound | Unknown


def classify(op: str, http_status: int, code: str | None, message: str) -> _Failure:
    """The outcome of a native error answer; ``op`` is place, cancel, query or read."""
    if http_status >= 500:
        return Unknown(
            UnknownReason.SERVER_ERROR, message or f"HTTP {http_status}", code, http_status
        )
    if op == "query" and code == "order_not_found":
        return NotFound(code, message)
    if op == "cancel" and code == "order_not_open":
        return NotFound(code, message)
    reason = REJECTIONS.get(code or "")
    if reason is None or not 400 <= http_status < 500:
        return Unknown(
            UnknownReason.UNRECOGNIZED, message or f"HTTP {http_status}", code, http_status
        )
    if op in ("query", "read"):
        return Unknown(UnknownReason.QUERY_REFUSED, message, code, http_status)
    return Rejected(reason, code, message, http_status)


def parse_order(d: dict[str, Any]) -> Accepted:
    """An :class:`Accepted` from the native order JSON; ``ValueError``, ``KeyError``,
    ``TypeError`` or ``AttributeError`` for an answer that is not one."""
    tif = d.get("time_in_force")
    return Accepted(
        venue_order_id=d["venue_order_id"],
        client_order_id=d["client_order_id"],
        symbol=d["symbol"],
        side=Side(d["side"].upper()),
        type=OrderType(d["type"].upper()),
        status=OrderStatus(d["status"].upper()),
        quantity=amount(d["quantity"]),
        executed_quantity=amount(d["executed_quantity"]),
        cumulative_quote_quantity=amount(d["cumulative_quote_quantity"]),
        price=amount(d["price"]) if d.get("price") is not None else None,
        quote_quantity=amount(d["quote_quantity"]) if d.get("quote_quantity") else None,
        time_in_force=TimeInForce(tif.upper()) if tif else None,
        created_at_ms=epoch_ms(d["created_at_ms"]),
        updated_at_ms=epoch_ms(d["updated_at_ms"]),
        fills=tuple(
            Fill(
                amount(f["price"]),
                amount(f["quantity"]),
                amount(f["commission"]),
                f["commission_asset"],
                f["trade_id"],
            )
            for f in d["fills"]
        ),
    )


_PARSE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, ArithmeticError)


class PaperVenueClient:
    """The paper venue's native API over one keep-alive connection. Not thread-safe."""

    name = "paper"

    def __init__(
        self,
        base_url: str,
        api_key: str,
        api_secret: str,
        *,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 10.0,
    ) -> None:
        self._http = HttpSession(
            base_url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s
        )
        self._key = api_key
        self._secret = api_secret
        self._assets: dict[str, tuple[str, str]] = {}
        self._steps: dict[str, Decimal] = {}

    def close(self) -> None:
        self._http.close()

    def place(self, order: OrderRequest, attempt: Attempt) -> PlaceAnswer:
        body: dict[str, Any] = {
            "symbol": order.symbol,
            "side": order.side.value.lower(),
            "type": order.type.value.lower(),
            "client_order_id": order.client_order_id,
        }
        for name, value in (
            ("quantity", order.quantity),
            ("quote_quantity", order.quote_quantity),
            ("price", order.price),
        ):
            if value is not None:
                body[name] = format(value, "f")
        if order.type is OrderType.LIMIT:
            body["time_in_force"] = (order.time_in_force or TimeInForce.GTC).value.lower()
        answer = self._call("POST", f"{PREFIX}/orders", attempt, "place", body)
        if isinstance(answer, NotFound):
            return Unknown(UnknownReason.UNRECOGNIZED, answer.message, answer.code)
        return answer if isinstance(answer, Rejected | Unknown) else self._order(answer)

    def query(self, symbol: str, client_order_id: str, attempt: Attempt) -> QueryAnswer:
        return self._query(symbol, {"client_order_id": client_order_id}, attempt)

    def query_by_venue_id(self, symbol: str, venue_order_id: str, attempt: Attempt) -> QueryAnswer:
        return self._query(symbol, {"venue_order_id": venue_order_id}, attempt)

    def cancel(self, symbol: str, client_order_id: str, attempt: Attempt) -> CancelAnswer:
        target = (
            f"{PREFIX}/orders?{urlencode({'symbol': symbol, 'client_order_id': client_order_id})}"
        )
        answer = self._call("DELETE", target, attempt, "cancel")
        return answer if isinstance(answer, Rejected | NotFound | Unknown) else self._order(answer)

    def open_orders(self, symbol: str | None, attempt: Attempt) -> OpenOrdersAnswer:
        query = f"?{urlencode({'symbol': symbol})}" if symbol else ""
        answer = self._call("GET", f"{PREFIX}/open-orders{query}", attempt, "read")
        if isinstance(answer, Rejected | NotFound | Unknown):
            return _unknown(answer)
        try:
            return OpenOrders(tuple(parse_order(d) for d in answer["orders"]))
        except _PARSE_ERRORS as e:
            return Unknown(UnknownReason.UNREADABLE, f"open orders: {e!r}")

    def balances(self, attempt: Attempt) -> BalancesAnswer:
        answer = self._call("GET", f"{PREFIX}/balances", attempt, "read")
        if isinstance(answer, Rejected | NotFound | Unknown):
            return _unknown(answer)
        try:
            return Balances(
                tuple(
                    Balance(b["asset"], amount(b["free"]), amount(b["locked"]))
                    for b in answer["balances"]
                )
            )
        except _PARSE_ERRORS as e:
            return Unknown(UnknownReason.UNREADABLE, f"balances: {e!r}")

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
        return Exposure(
            symbol,
            balances.get(assets[0]),
            balances.get(assets[1]),
            orders.orders,
            lot_step=self._steps.get(symbol),
        )

    # -- internals ---------------------------------------------------------------------------

    def _query(self, symbol: str, key: dict[str, str], attempt: Attempt) -> QueryAnswer:
        target = f"{PREFIX}/orders?{urlencode({'symbol': symbol, **key})}"
        answer = self._call("GET", target, attempt, "query")
        if isinstance(answer, Rejected):
            return _unknown(answer)
        return answer if isinstance(answer, NotFound | Unknown) else self._order(answer)

    def _order(self, answer: Any) -> Accepted | Unknown:
        try:
            return parse_order(answer["order"])
        except _PARSE_ERRORS as e:
            return Unknown(UnknownReason.UNREADABLE, f"order answer: {e!r}")

    def _symbol_assets(self, symbol: str) -> tuple[str, str] | Unknown:
        if symbol not in self._assets:
            try:
                answer = self._http.request("GET", "/paper/v1/symbols", idempotent=True)
                symbols = json.loads(answer.body)["symbols"]
            except TransportFailure as failure:
                return Unknown(UnknownReason.CONNECTION, failure.detail)
            except _PARSE_ERRORS as e:
                return Unknown(UnknownReason.UNREADABLE, f"symbols: {e!r}")
            for s in symbols:
                self._assets[s["symbol"]] = (s["base"], s["quote"])
                step = _positive(s.get("step_size"))
                if step is not None:
                    self._steps[s["symbol"]] = step
            if symbol not in self._assets:
                return Unknown(UnknownReason.QUERY_REFUSED, f"the venue lists no symbol {symbol}")
        return self._assets[symbol]

    def _call(
        self,
        method: str,
        target: str,
        attempt: Attempt,
        op: str,
        body: dict[str, Any] | None = None,
    ) -> Any:
        """The decoded 2xx body, or the outcome of a failed request."""
        data = json.dumps(body).encode() if body is not None else b""
        ts, window = str(attempt.sent_at_ms), str(attempt.window_ms)
        payload = f"{ts}\n{window}\n{method}\n{target}\n".encode() + data
        headers = {
            "X-Paper-Key": self._key,
            "X-Paper-Timestamp": ts,
            "X-Paper-Window": window,
            "X-Paper-Signature": hmac.new(
                self._secret.encode(), payload, hashlib.sha256
            ).hexdigest(),
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            answer = self._http.request(
                method,
                target,
                data if body is not None else None,
                headers,
                idempotent=method == "GET",
            )
        except TransportFailure as failure:
            if failure.kind == "not_sent" and op in ("place", "cancel"):
                return Rejected(RejectReason.NOT_SENT, None, failure.detail)
            kind = UnknownReason.TIMEOUT if failure.kind == "timeout" else UnknownReason.CONNECTION
            return Unknown(kind, failure.detail)
        try:
            decoded = json.loads(answer.body)
        except (ValueError, UnicodeDecodeError):
            decoded = None
        if 200 <= answer.status < 300:
            if not isinstance(decoded, dict):
                return Unknown(UnknownReason.UNREADABLE, "a 2xx answer that is not a JSON object")
            return decoded
        error = decoded.get("error") if isinstance(decoded, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return classify(
            op, answer.status, code if isinstance(code, str) else None, str(message or "")
        )


def _unknown(answer: Rejected | NotFound | Unknown) -> Unknown:
    if isinstance(answer, Unknown):
        return answer
    return Unknown(UnknownReason.QUERY_REFUSED, answer.message, answer.code)


def _positive(text: object) -> Decimal | None:
    """A positive finite decimal from the venue's text, else ``None``."""
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        return None
    return value if value.is_finite() and value > 0 else None
