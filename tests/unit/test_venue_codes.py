"""Every error answer maps deliberately to Rejected, NotFound or Unknown — never by accident.

The rule under test: only documented "not performed" codes are Rejected; 5xx, "execution status
unknown" and anything unlisted are Unknown; a refused query is Unknown, never NotFound.
"""

from __future__ import annotations

import pytest

from consumers.paper_venue.errors import EMITTED_CODES
from consumers.venue import paper
from consumers.venue.adapter import NotFound, Rejected, RejectReason, Unknown, UnknownReason
from consumers.venue.binance_codes import (
    MSG_DUPLICATE,
    MSG_INSUFFICIENT,
    MSG_UNKNOWN_ORDER,
    NOT_PERFORMED,
    STATUS_UNKNOWN,
    Op,
    classify,
)


def test_every_code_the_paper_venue_emits_is_in_the_table() -> None:
    unmapped = {c for c in EMITTED_CODES if c not in NOT_PERFORMED and c not in STATUS_UNKNOWN}
    assert unmapped == {-2013}  # "order does not exist": NotFound for queries
    assert classify(Op.QUERY, 400, -2013, "Order does not exist.") == NotFound(
        -2013, "Order does not exist."
    )


@pytest.mark.parametrize(
    ("status", "code", "msg", "reason"),
    [
        (400, -2010, MSG_DUPLICATE, RejectReason.DUPLICATE_CLIENT_ORDER_ID),
        (400, -2010, MSG_INSUFFICIENT, RejectReason.INSUFFICIENT_BALANCE),
        (400, -2010, "Market is closed.", RejectReason.ORDER_REJECTED),
        (
            400,
            -1021,
            "Timestamp for this request is outside of the recvWindow.",
            RejectReason.OUTSIDE_RECV_WINDOW,
        ),
        (400, -1022, "Signature for this request is not valid.", RejectReason.UNAUTHORIZED),
        (401, -2014, "API-key format invalid.", RejectReason.UNAUTHORIZED),
        (401, -2015, "Invalid API-key, IP, or permissions for action.", RejectReason.UNAUTHORIZED),
        (400, -1013, "Filter failure: LOT_SIZE", RejectReason.FILTER_FAILURE),
        (400, -1102, "Mandatory parameter 'side' was not sent", RejectReason.INVALID_REQUEST),
        (429, -1003, "Too many requests queued.", RejectReason.RATE_LIMITED),
        (429, None, "", RejectReason.RATE_LIMITED),
        (418, None, "", RejectReason.RATE_LIMITED),
        (403, None, "", RejectReason.UNAUTHORIZED),
    ],
)
def test_refusals_before_the_matching_engine_are_rejected_for_place(
    status: int, code: int | None, msg: str, reason: RejectReason
) -> None:
    assert classify(Op.PLACE, status, code, msg) == Rejected(reason, code, msg, status)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (503, -1007),
        (500, -1000),
        (502, None),
        (504, -2010),
        (503, -1021),
        (408, -1007),
        (400, -1006),
        (400, -1001),
        (400, -1008),
        (400, -9999),
        (400, None),
        (409, -2021),
        (400, -2013),
        (400, -2011),
    ],
)
def test_anything_else_is_unknown_for_place(status: int, code: int | None) -> None:
    outcome = classify(Op.PLACE, status, code, "x")
    assert isinstance(outcome, Unknown), outcome
    if status >= 500:
        assert outcome.reason is UnknownReason.SERVER_ERROR
    elif code in STATUS_UNKNOWN:
        assert outcome.reason is UnknownReason.STATUS_UNKNOWN


def test_cancel_of_no_open_order_is_not_found_other_cancel_refusals_rejected() -> None:
    assert classify(Op.CANCEL, 400, -2011, MSG_UNKNOWN_ORDER) == NotFound(-2011, MSG_UNKNOWN_ORDER)
    restricted = "Order was not canceled due to cancel restrictions."
    assert classify(Op.CANCEL, 400, -2011, restricted) == Rejected(
        RejectReason.CANCEL_REJECTED, -2011, restricted, 400
    )
    assert isinstance(classify(Op.CANCEL, 503, -2011, MSG_UNKNOWN_ORDER), Unknown)


@pytest.mark.parametrize("op", [Op.QUERY, Op.READ])
@pytest.mark.parametrize(
    ("status", "code"), [(400, -1021), (400, -1022), (401, -2015), (429, -1003), (400, -2010)]
)
def test_a_refused_query_proves_nothing(op: Op, status: int, code: int) -> None:
    outcome = classify(op, status, code, "refused")
    assert isinstance(outcome, Unknown)
    assert outcome.reason is UnknownReason.QUERY_REFUSED


def test_native_codes_follow_the_same_rule() -> None:
    assert paper.classify("query", 404, "order_not_found", "m") == NotFound("order_not_found", "m")
    assert paper.classify("cancel", 409, "order_not_open", "m") == NotFound("order_not_open", "m")
    assert paper.classify("place", 409, "duplicate_client_order_id", "m") == Rejected(
        RejectReason.DUPLICATE_CLIENT_ORDER_ID, "duplicate_client_order_id", "m", 409
    )
    assert paper.classify("place", 422, "request_expired", "m") == Rejected(
        RejectReason.OUTSIDE_RECV_WINDOW, "request_expired", "m", 422
    )
    for op, status, code in (
        ("place", 503, "outcome_unknown"),
        ("place", 503, "insufficient_balance"),
        ("place", 422, "something_new"),
        ("place", 404, "order_not_found"),
        ("query", 422, "request_expired"),
        ("read", 401, "unauthorized"),
        ("place", 302, "invalid_request"),
    ):
        assert isinstance(paper.classify(op, status, code, "m"), Unknown), (op, status, code)
    for code in paper.REJECTIONS:
        assert isinstance(paper.classify("place", 422, code, "m"), Rejected)
