"""Pure mapping between the journal's requests and the venue adapter's orders and answers.

``request_json`` (what ``AttemptStarted`` recorded) becomes an :class:`OrderRequest`:

* ``type`` ``market``: MARKET with ``quantity``, or ``quoteOrderQty`` = ``notional``;
* ``type`` ``limit``: LIMIT ``quantity`` at ``limit_price``, ``time_in_force`` from the entry's
  ``params`` (GTC when absent);
* a protection is placed as a resting LIMIT at its spec's ``limit_price`` (the adapters place
  MARKET and LIMIT orders only: a protection without a limit price is refused here, answered
  ``rejected`` / ``unsupported_order``, and nothing is sent).

Adapter answers become the core's answer commands: an open order is ``acknowledged``, a
FILLED one ``filled``, a closed one with executions ``filled`` (done, with what executed),
a closed one without ``rejected``; Rejected is ``rejected`` with its reason as
``error_code`` (``duplicate_client_order_id`` makes the core look the order up); Unknown is
``unknown``; a lookup's NotFound is ``not_found``.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from consumers.venue.adapter import (
    Accepted,
    ExposureAnswer,
    NotFound,
    OrderRequest,
    OrderType,
    PlaceAnswer,
    QueryAnswer,
    Rejected,
    Side,
    TimeInForce,
    Unknown,
)
from schemas.commands import ExposureObserved, LookupAnswered, VenueAnswered
from streams.core.journal import ExposureRequest, LookupRequest, SendRequest

UNSUPPORTED = "unsupported_order"


class Unsendable(ValueError):
    """A recorded request the venue adapters cannot express; nothing is sent."""


def body_of(request_json: str) -> dict[str, Any]:
    body = orjson.loads(request_json)
    if not isinstance(body, dict):
        raise Unsendable("request_json is not a JSON object")
    return body


def order_request(send: SendRequest) -> OrderRequest:
    """The adapter order for a send (raises :class:`Unsendable` with the reason)."""
    body = body_of(send.request_json)
    side = {"buy": Side.BUY, "sell": Side.SELL}.get(body.get("side") or "")
    if side is None:
        raise Unsendable(f"side {body.get('side')!r} is not buy or sell")
    quantity = _amount(body.get("quantity"))
    limit_price = _amount(body.get("limit_price"))
    if body.get("kind") == "protection" and limit_price is None:
        raise Unsendable(
            "a protection needs a limit_price in its spec: the venue adapters place MARKET and "
            "LIMIT orders only, and a market order would close the position, not protect it"
        )
    try:
        if body.get("type") == "limit":
            if quantity is None or limit_price is None:
                raise Unsendable("a limit order needs a quantity and a limit_price")
            params = body.get("params")
            tif = str((params if isinstance(params, dict) else {}).get("time_in_force", "GTC"))
            tif = tif.upper()
            return OrderRequest(
                send.instrument,
                side,
                OrderType.LIMIT,
                send.client_order_id,
                quantity=quantity,
                price=limit_price,
                time_in_force=TimeInForce(tif),
            )
        notional = _amount(body.get("notional"))
        return OrderRequest(
            send.instrument,
            side,
            OrderType.MARKET,
            send.client_order_id,
            quantity=quantity,
            quote_quantity=None if quantity is not None else notional,
        )
    except ValueError as e:
        raise Unsendable(str(e)) from e


def _amount(value: object) -> Decimal | None:
    if not isinstance(value, str):
        return None
    try:
        amount = Decimal(value)
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and amount > 0 else None


def _text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def fills_json(order: Accepted) -> str | None:
    if order.fills is None:
        return None
    return orjson.dumps(
        [
            {
                "price": _text(f.price),
                "qty": _text(f.quantity),
                "commission": _text(f.commission),
                "commission_asset": f.commission_asset,
                "trade_id": f.trade_id,
            }
            for f in order.fills
        ]
    ).decode()


def outcome_of(order: Accepted) -> str:
    if order.is_open:
        return "acknowledged"
    if order.is_filled or order.executed_quantity > 0:
        return "filled"
    return "rejected"


def venue_answered(send: SendRequest, answer: PlaceAnswer, observed_at_ms: int) -> VenueAnswered:
    """The core's answer to a send."""
    fields: dict[str, Any] = {
        "venue_order_id": None,
        "status": None,
        "executed_quantity": None,
        "fills_json": None,
        "error_code": None,
        "detail": None,
    }
    if isinstance(answer, Accepted):
        outcome = outcome_of(answer)
        fields.update(
            venue_order_id=answer.venue_order_id,
            status=answer.status.value,
            executed_quantity=_text(answer.executed_quantity),
            fills_json=fills_json(answer),
        )
    elif isinstance(answer, Rejected):
        outcome = "rejected"
        fields.update(error_code=answer.reason.value, detail=f"{answer.code}: {answer.message}")
    else:
        outcome = "unknown"
        fields.update(detail=f"{answer.reason.value}: {answer.detail}"[:500])
    return VenueAnswered(
        run_id=send.run_id,
        action_id=send.action_id,
        attempt=send.attempt,
        client_order_id=send.client_order_id,
        outcome=outcome,
        observed_at_ms=observed_at_ms,
        **fields,
    )


def refused(send: SendRequest, outcome: str, code: str, detail: str, now_ms: int) -> VenueAnswered:
    """The gateway's own answer for a send it did not make (``not_sent`` or ``rejected``)."""
    return VenueAnswered(
        run_id=send.run_id,
        action_id=send.action_id,
        attempt=send.attempt,
        client_order_id=send.client_order_id,
        outcome=outcome,
        venue_order_id=None,
        status=None,
        executed_quantity=None,
        fills_json=None,
        error_code=code,
        detail=detail[:500],
        observed_at_ms=now_ms,
    )


def lookup_answered(
    lookup: LookupRequest, answer: QueryAnswer, queried_at_ms: int, observed_at_ms: int
) -> LookupAnswered:
    """The core's answer to a lookup by client order id."""
    found: dict[str, Any] = dict.fromkeys(
        ("venue_order_id", "status", "executed_quantity", "fills_json"), None
    )
    if isinstance(answer, Accepted):
        outcome, detail = outcome_of(answer), None
        found.update(
            venue_order_id=answer.venue_order_id,
            status=answer.status.value,
            executed_quantity=_text(answer.executed_quantity),
            fills_json=fills_json(answer),
        )
    elif isinstance(answer, NotFound):
        outcome, detail = "not_found", f"{answer.code}: {answer.message}"
    else:
        outcome, detail = "unknown", f"{answer.reason.value}: {answer.detail}"[:500]
    return LookupAnswered(
        run_id=lookup.run_id,
        action_id=lookup.action_id,
        query_number=lookup.query_number,
        client_order_id=lookup.client_order_id,
        outcome=outcome,
        detail=detail,
        queried_at_ms=queried_at_ms,
        observed_at_ms=observed_at_ms,
        **found,
    )


def exposure_observed(
    request: ExposureRequest, answer: ExposureAnswer, queried_at_ms: int, observed_at_ms: int
) -> ExposureObserved:
    """The core's answer to an exposure query: the account's *free* balance of the base asset.

    Free, not free + locked: what is locked is already promised to open orders (another
    run's protection, say), so a new protection can cover only what is free.
    """
    if isinstance(answer, Unknown):
        return ExposureObserved(
            run_id=request.run_id,
            action_id=request.action_id,
            query_number=request.query_number,
            outcome="unknown",
            asset=None,
            exposure_quantity=None,
            detail=f"{answer.reason.value}: {answer.detail}"[:500],
            queried_at_ms=queried_at_ms,
            observed_at_ms=observed_at_ms,
        )
    return ExposureObserved(
        run_id=request.run_id,
        action_id=request.action_id,
        query_number=request.query_number,
        outcome="observed",
        asset=answer.base.asset,
        exposure_quantity=_text(answer.base.free),
        detail=None,
        queried_at_ms=queried_at_ms,
        observed_at_ms=observed_at_ms,
        lot_step=None if answer.lot_step is None else _text(answer.lot_step),
    )
