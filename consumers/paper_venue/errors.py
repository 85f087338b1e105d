"""Errors of the paper venue.

:class:`PaperVenueError` is what an operator sees (bad configuration, unusable state
directory); its message says what to do. :class:`Refusal` is a request the venue refuses, in
Binance's terms (code, message, HTTP status) plus a venue-neutral ``kind`` that the native API
renders in its own vocabulary.
"""

from __future__ import annotations

from enum import StrEnum


class PaperVenueError(Exception):
    """A problem an operator must fix before the venue can run."""


class RefusalKind(StrEnum):
    """What a refusal means, independent of which API carries it."""

    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    REQUEST_EXPIRED = "request_expired"
    UNKNOWN_SYMBOL = "unknown_symbol"
    FILTER_FAILURE = "filter_failure"
    INSUFFICIENT_BALANCE = "insufficient_balance"
    DUPLICATE_CLIENT_ORDER_ID = "duplicate_client_order_id"
    ORDER_REJECTED = "order_rejected"
    ORDER_NOT_FOUND = "order_not_found"
    ORDER_NOT_OPEN = "order_not_open"


class Refusal(Exception):
    """A request refused by the venue; nothing it asked for happened."""

    def __init__(self, kind: RefusalKind, code: int, msg: str, status: int = 400) -> None:
        super().__init__(msg)
        self.kind = kind
        self.code = code
        self.msg = msg
        self.status = status


# Binance's messages, kept in one place so both APIs and the tests use the same text.
MSG_NO_SUCH_ORDER = "Order does not exist."
MSG_UNKNOWN_ORDER = "Unknown order sent."
MSG_DUPLICATE = "Duplicate order sent."
MSG_INSUFFICIENT = "Account has insufficient balance for requested action."
MSG_STATUS_UNKNOWN = (
    "Timeout waiting for response from backend server. Send status unknown; "
    "execution status unknown."
)


def invalid(code: int, msg: str) -> Refusal:
    """A malformed request (Binance's 11xx family, or -1013 filter failures)."""
    kind = RefusalKind.FILTER_FAILURE if code == -1013 else RefusalKind.INVALID_REQUEST
    return Refusal(kind, code, msg)


def mandatory(name: str) -> Refusal:
    """-1102 for a missing, empty or malformed mandatory parameter."""
    return invalid(
        -1102, f"Mandatory parameter '{name}' was not sent, was empty/null, or malformed."
    )


# Every Binance code this venue can answer with (the adapters' mapping covers each one).
EMITTED_CODES: frozenset[int] = frozenset(
    {
        -1007,  # fault: execution status unknown (5xx)
        -1013,  # filter failure
        -1021,  # outside recvWindow / ahead of server time
        -1022,  # bad signature
        -1100,  # illegal characters
        -1101,  # duplicate parameter
        -1102,  # mandatory parameter missing or malformed
        -1104,  # not all parameters read
        -1106,  # parameter sent when not required
        -1111,  # too much precision
        -1114,  # timeInForce sent when not required
        -1115,  # invalid timeInForce
        -1116,  # invalid order type
        -1117,  # invalid side
        -1118,  # empty newClientOrderId
        -1121,  # invalid symbol
        -1130,  # invalid parameter value
        -2010,  # new order rejected (duplicate, insufficient balance, fault)
        -2011,  # cancel rejected (unknown order)
        -2013,  # order does not exist
        -2014,  # API-key format invalid
        -2015,  # invalid API-key
    }
)
