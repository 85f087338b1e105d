"""Parsing Binance Spot request parameters: pairs, signature payload, decimals, new orders.

Each function raises a :class:`~consumers.paper_venue.errors.Refusal` with Binance's code and
message for what it refuses (-1100 illegal characters, -1101 duplicate parameter, -1102
missing parameter, -1104 unread parameters, -1111 precision, ...).
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import parse_qsl

from consumers.paper_venue.engine import NewOrder
from consumers.paper_venue.errors import Refusal, RefusalKind, invalid, mandatory
from consumers.paper_venue.money import DECIMAL_PATTERN, WHOLE_PATTERN, parse_decimal, parse_whole
from consumers.paper_venue.signing import Window

CLIENT_ID_PATTERN = r"^[\.A-Z\:/a-z0-9_-]{1,36}$"
CLIENT_ID_RE = re.compile(CLIENT_ID_PATTERN)
ORDER_ID_PATTERN = "^[0-9]{1,19}$"
_ALPHABET = string.ascii_letters + string.digits
SIGNED = {"timestamp", "recvWindow", "signature"}
_PLACE_PARAMS = SIGNED | {
    "symbol",
    "side",
    "type",
    "timeInForce",
    "quantity",
    "quoteOrderQty",
    "price",
    "newClientOrderId",
    "newOrderRespType",
    "strategyId",
    "strategyType",
    "selfTradePreventionMode",
}
_UNSUPPORTED_TYPES = {
    "STOP_LOSS": "Stop loss orders are not supported for this symbol.",
    "STOP_LOSS_LIMIT": "Stop loss limit orders are not supported for this symbol.",
    "TAKE_PROFIT": "Take profit orders are not supported for this symbol.",
    "TAKE_PROFIT_LIMIT": "Take profit limit orders are not supported for this symbol.",
    "LIMIT_MAKER": "Unsupported order combination",
}


@dataclass(frozen=True)
class Signed:
    """An authenticated request: its account, parameters and time window."""

    account: str
    params: dict[str, str]
    window: Window


def generated_client_id() -> str:
    """A 22-character id, as Binance generates when ``newClientOrderId`` is not sent."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(22))


def signature_payload(raw_query: str, raw_body: str) -> str:
    """What a signature covers: the query string then the body, each without ``signature``."""
    return _without_signature(raw_query) + _without_signature(raw_body)


def _without_signature(raw: str) -> str:
    return "&".join(p for p in raw.split("&") if p and p.split("=", 1)[0] != "signature")


def parse_pairs(raw: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True, errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise invalid(-1100, "Illegal characters found in a parameter.") from None
    out: dict[str, str] = {}
    for key, value in pairs:
        if key in out:
            raise invalid(-1101, "Duplicate values for a parameter detected.")
        out[key] = value
    return out


def decimal_param(params: dict[str, str], name: str) -> Decimal | None:
    text = params.get(name)
    if text is None or text == "":
        return None
    value = parse_decimal(text)
    if value is None:
        raise invalid(
            -1100,
            f"Illegal characters found in parameter '{name}'; legal range is '{DECIMAL_PATTERN}'.",
        )
    if value.as_tuple().exponent not in range(-8, 1):  # more than 8 decimals
        raise invalid(-1111, f"Parameter '{name}' has too much precision.")
    return value


def require_known(params: dict[str, str], allowed: set[str]) -> None:
    read = sum(1 for k in params if k in allowed)
    if read != len(params):
        raise invalid(
            -1104,
            f"Not all sent parameters were read; read '{read}' parameter(s) but was sent "
            f"'{len(params)}'.",
        )


def order_id_param(params: dict[str, str]) -> int | None:
    """``orderId``, or None if absent or empty."""
    return whole_param(params, "orderId", ORDER_ID_PATTERN)


def whole_param(params: dict[str, str], name: str, pattern: str = WHOLE_PATTERN) -> int | None:
    """The whole-number parameter ``name``, or None if absent or empty; -1100 naming
    ``pattern`` if it is anything but ASCII digits worth an id the venue can hold."""
    text = params.get(name)
    if text is None or text == "":
        return None
    value = parse_whole(text)
    if value is None or not re.fullmatch(pattern, text):
        raise invalid(
            -1100, f"Illegal characters found in parameter '{name}'; legal range is '{pattern}'."
        )
    return value


def parse_new_order(params: dict[str, str]) -> tuple[NewOrder, str]:
    """A :class:`NewOrder` and the response type from ``POST /api/v3/order`` parameters."""
    require_known(params, _PLACE_PARAMS)
    symbol = params.get("symbol") or ""
    if not symbol:
        raise mandatory("symbol")
    side = params.get("side") or ""
    if not side:
        raise mandatory("side")
    if side not in ("BUY", "SELL"):
        raise invalid(-1117, "Invalid side.")
    type_ = params.get("type") or ""
    if not type_:
        raise mandatory("type")
    if type_ in _UNSUPPORTED_TYPES:
        raise Refusal(RefusalKind.ORDER_REJECTED, -2010, _UNSUPPORTED_TYPES[type_])
    if type_ not in ("MARKET", "LIMIT"):
        raise invalid(-1116, "Invalid orderType.")
    quantity, quote = decimal_param(params, "quantity"), decimal_param(params, "quoteOrderQty")
    price, tif = decimal_param(params, "price"), params.get("timeInForce") or None
    if type_ == "MARKET":
        if tif is not None:
            raise invalid(-1114, "TimeInForce parameter sent when not required.")
        if price is not None:
            raise invalid(-1106, "Parameter 'price' sent when not required.")
        if quantity is None and quote is None:
            raise invalid(
                -1102, "Param 'quantity' or 'quoteOrderQty' must be sent, but both were empty/null!"
            )
        if quantity is not None and quote is not None:
            raise invalid(-1106, "Parameter 'quoteOrderQty' sent when not required.")
    else:
        if tif is None:
            raise mandatory("timeInForce")
        if tif not in ("GTC", "IOC", "FOK"):
            raise invalid(-1115, "Invalid timeInForce.")
        if quantity is None:
            raise mandatory("quantity")
        if price is None:
            raise mandatory("price")
        if quote is not None:
            raise invalid(-1106, "Parameter 'quoteOrderQty' sent when not required.")
    client_id = params.get("newClientOrderId")
    if client_id is None:
        client_id = generated_client_id()
    elif client_id == "":
        raise invalid(-1118, "New client order ID was empty.")
    elif not CLIENT_ID_RE.fullmatch(client_id):
        raise invalid(
            -1100,
            "Illegal characters found in parameter 'newClientOrderId'; legal range is "
            f"'{CLIENT_ID_PATTERN}'.",
        )
    resp_type = params.get("newOrderRespType") or "FULL"
    if resp_type not in ("ACK", "RESULT", "FULL"):
        raise invalid(-1130, "Data sent for parameter 'newOrderRespType' is not valid.")
    return NewOrder(symbol, side, type_, client_id, tif, quantity, quote, price), resp_type
