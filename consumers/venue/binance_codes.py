"""How a Binance Spot error answer maps to an adapter outcome — deliberately, code by code.

The gateway's safety depends on never reading an Unknown as a Rejected. So the rule is an
allow-list: only codes Binance documents as "refused before (or by) the matching engine" are
:class:`Rejected`; any HTTP 5xx, any "execution status unknown" code and any code not in this
table is :class:`Unknown`. A refused *query* proves nothing about the order, so for queries
and reads every error except "order does not exist" is Unknown.

=====================================  ========================  ==========================
answer                                 place / cancel            query / reads
=====================================  ========================  ==========================
HTTP 5xx (any body)                    Unknown server_error      Unknown server_error
-1000 -1001 -1006 -1007 -1008          Unknown status_unknown    Unknown status_unknown
-2013 Order does not exist.            (Unknown unrecognized)    NotFound
-2011 Unknown order sent.              cancel: NotFound (no      Unknown query_refused
                                       OPEN order)
-2011 other messages                   Rejected cancel_rejected  Unknown query_refused
-2010 Duplicate order sent.            Rejected duplicate_...    Unknown query_refused
-2010 Account has insufficient ...     Rejected insufficient_..  Unknown query_refused
-2010 other, -1010                     Rejected order_rejected   Unknown query_refused
-1021 outside recvWindow / ahead       Rejected outside_recv_..  Unknown query_refused
-1022 -1002 -2014 -2015, HTTP 403      Rejected unauthorized     Unknown query_refused
-1003 -1015, HTTP 429 / 418            Rejected rate_limited     Unknown query_refused
-1013 filter failure                   Rejected filter_failure   Unknown query_refused
-1014 -1020 -11xx listed below         Rejected invalid_request  Unknown query_refused
any other code, unreadable body        Unknown unrecognized      Unknown unrecognized
=====================================  ========================  ==========================
"""

from __future__ import annotations

from enum import StrEnum

from consumers.venue.adapter import (
    NotFound,
    Rejected,
    RejectReason,
    Unknown,
    UnknownReason,
)

MSG_DUPLICATE = "Duplicate order sent."
MSG_INSUFFICIENT = "Account has insufficient balance for requested action."
MSG_UNKNOWN_ORDER = "Unknown order sent."


class Op(StrEnum):
    PLACE = "place"
    CANCEL = "cancel"
    QUERY = "query"  # one order: -2013 is NotFound
    READ = "read"  # lists, account, server data


STATUS_UNKNOWN: frozenset[int] = frozenset({-1000, -1001, -1006, -1007, -1008})

_INVALID = RejectReason.INVALID_REQUEST
# Binance's 11xx "request issues" that this table knows: the request never reached matching.
_REQUEST_ISSUES = (-1100, -1101, -1102, -1103, -1104, -1105, -1106, -1108, -1111, -1114, -1115,
                   -1116, -1117, -1118, -1119, -1121, -1128, -1130, -1134, -1145)  # fmt: skip
NOT_PERFORMED: dict[int, RejectReason] = {
    -1002: RejectReason.UNAUTHORIZED,
    -1003: RejectReason.RATE_LIMITED,
    -1010: RejectReason.ORDER_REJECTED,
    -1013: RejectReason.FILTER_FAILURE,
    -1014: _INVALID,
    -1015: RejectReason.RATE_LIMITED,
    -1020: _INVALID,
    -1021: RejectReason.OUTSIDE_RECV_WINDOW,
    -1022: RejectReason.UNAUTHORIZED,
    **dict.fromkeys(_REQUEST_ISSUES, _INVALID),
    -2010: RejectReason.ORDER_REJECTED,
    -2011: RejectReason.CANCEL_REJECTED,
    -2014: RejectReason.UNAUTHORIZED,
    -2015: RejectReason.UNAUTHORIZED,
}

Outcome = Rejected | NotFound | Unknown


def classify(op: Op, http_status: int, code: int | None, msg: str) -> Outcome:
    """The outcome of an error answer (anything but a 2xx with the expected body)."""
    if http_status >= 500:
        return Unknown(UnknownReason.SERVER_ERROR, msg or f"HTTP {http_status}", code, http_status)
    if code in STATUS_UNKNOWN:
        return Unknown(UnknownReason.STATUS_UNKNOWN, msg, code, http_status)
    if op is Op.QUERY and code == -2013:
        return NotFound(code, msg)
    if op is Op.CANCEL and code == -2011 and msg == MSG_UNKNOWN_ORDER:
        return NotFound(code, msg)
    reason = _refusal_reason(http_status, code, msg)
    if reason is None:
        return Unknown(UnknownReason.UNRECOGNIZED, msg or f"HTTP {http_status}", code, http_status)
    if op in (Op.QUERY, Op.READ):
        return Unknown(UnknownReason.QUERY_REFUSED, msg, code, http_status)
    if op is Op.PLACE and reason is RejectReason.CANCEL_REJECTED:
        return Unknown(UnknownReason.UNRECOGNIZED, msg, code, http_status)
    return Rejected(reason, code, msg, http_status)


def _refusal_reason(http_status: int, code: int | None, msg: str) -> RejectReason | None:
    if code == -2010:
        if msg == MSG_DUPLICATE:
            return RejectReason.DUPLICATE_CLIENT_ORDER_ID
        if msg == MSG_INSUFFICIENT:
            return RejectReason.INSUFFICIENT_BALANCE
        return RejectReason.ORDER_REJECTED
    if code is not None and code in NOT_PERFORMED:
        return NOT_PERFORMED[code]
    if code is None and http_status in (418, 429):
        return RejectReason.RATE_LIMITED
    if code is None and http_status == 403:
        return RejectReason.UNAUTHORIZED
    return None
