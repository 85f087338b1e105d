"""The notification channel: an HTTP POST with an idempotency key, and (if it can) a lookup.

A notification is an action like an order: its send is recorded (``AttemptStarted``) before
it leaves, and its key is the action's client order id (``Idempotency-Key`` header and
``idempotency_key`` in the body), the same for every attempt. The body is the notification's
spec (``channel``, ``text``) plus the run, the action and the ``outcomes`` of the run's other
actions.

=========================================  ======================  =====================
answer                                     send                    lookup
=========================================  ======================  =====================
2xx                                        acknowledged            acknowledged
404                                        rejected                not_found
other 4xx                                  rejected                unknown
5xx, timeout, connection lost              unknown                 unknown
no connection could be made                rejected (``not_sent``) unknown
=========================================  ======================  =====================

A channel that can be looked up (``GET <url>?idempotency_key=KEY``, the paper venue's sink)
makes an unknown send reconcilable like an order: nothing is posted twice unless the channel
proves it never got it. **A channel that cannot be looked up** answers every lookup
"not found", so after the quiet period the gateway sends again under the same key: such
notifications are at-least-once (a receiver that honours the idempotency key still shows
one). That repeats a message, never an order: orders and notifications are separate actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson

from consumers.gateway.orders import body_of
from consumers.venue.http import HttpSession, TransportFailure
from schemas.commands import LookupAnswered, VenueAnswered
from streams.core.journal import LookupRequest, SendRequest


class NotificationChannel:
    """One channel URL over one keep-alive connection. Not thread-safe."""

    def __init__(self, url: str, *, lookup: bool, read_timeout_s: float = 10.0) -> None:
        self.url = url
        self.can_lookup = lookup
        self._http = HttpSession(url, connect_timeout_s=3.0, read_timeout_s=read_timeout_s)

    def close(self) -> None:
        self._http.close()

    def send(self, send: SendRequest, now: Callable[[], int]) -> VenueAnswered:
        """POST the notification; ``now()`` gives the observation time."""
        body = {
            **body_of(send.request_json),
            "idempotency_key": send.client_order_id,
            "run_id": send.run_id,
            "action_id": send.action_id,
            "attempt": send.attempt,
        }
        headers = {"Content-Type": "application/json", "Idempotency-Key": send.client_order_id}
        try:
            answer = self._http.request("POST", "", orjson.dumps(body), headers)
        except TransportFailure as failure:
            outcome = "rejected" if failure.kind == "not_sent" else "unknown"
            code = "not_sent" if failure.kind == "not_sent" else None
            return _answered(
                send,
                outcome=outcome,
                notification_id=None,
                code=code,
                detail=failure.detail,
                at_ms=now(),
            )
        reply = _json(answer.body)
        if 200 <= answer.status < 300:
            return _answered(
                send,
                outcome="acknowledged",
                notification_id=_id(reply),
                code=None,
                detail=None,
                at_ms=now(),
            )
        detail = f"HTTP {answer.status}: {answer.body[:200].decode('utf-8', 'replace')}"
        if 400 <= answer.status < 500:
            return _answered(
                send,
                outcome="rejected",
                notification_id=None,
                code="notification_refused",
                detail=detail,
                at_ms=now(),
            )
        return _answered(
            send, outcome="unknown", notification_id=None, code=None, detail=detail, at_ms=now()
        )

    def lookup(self, lookup: LookupRequest, now: Callable[[], int]) -> LookupAnswered:
        """Ask the channel whether it has the notification (see the module docstring)."""
        queried = now()

        def answer(outcome: str, notification_id: str | None, detail: str | None) -> LookupAnswered:
            return _looked_up(
                lookup,
                outcome=outcome,
                notification_id=notification_id,
                detail=detail,
                queried_at_ms=queried,
                observed_at_ms=now(),
            )

        if not self.can_lookup:
            return answer("not_found", None, "this channel cannot be looked up")
        target = f"?idempotency_key={quote(lookup.client_order_id, safe='')}"
        try:
            reply = self._http.request("GET", target, idempotent=True)
        except TransportFailure as failure:
            return answer("unknown", None, failure.detail)
        if 200 <= reply.status < 300:
            return answer("acknowledged", _id(_json(reply.body)), None)
        if reply.status == 404:
            return answer("not_found", None, "HTTP 404")
        return answer("unknown", None, f"HTTP {reply.status}")


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _id(reply: Any) -> str | None:
    value = reply.get("notification_id") if isinstance(reply, dict) else None
    return str(value) if value is not None else None


def _answered(
    send: SendRequest,
    *,
    outcome: str,
    notification_id: str | None,
    code: str | None,
    detail: str | None,
    at_ms: int,
) -> VenueAnswered:
    return VenueAnswered(
        run_id=send.run_id,
        action_id=send.action_id,
        attempt=send.attempt,
        client_order_id=send.client_order_id,
        outcome=outcome,
        venue_order_id=notification_id,
        status="DELIVERED" if outcome == "acknowledged" else None,
        executed_quantity=None,
        fills_json=None,
        error_code=code,
        detail=None if detail is None else detail[:500],
        observed_at_ms=at_ms,
    )


def _looked_up(
    lookup: LookupRequest,
    *,
    outcome: str,
    notification_id: str | None,
    detail: str | None,
    queried_at_ms: int,
    observed_at_ms: int,
) -> LookupAnswered:
    return LookupAnswered(
        run_id=lookup.run_id,
        action_id=lookup.action_id,
        query_number=lookup.query_number,
        client_order_id=lookup.client_order_id,
        outcome=outcome,
        venue_order_id=notification_id,
        status="DELIVERED" if outcome == "acknowledged" else None,
        executed_quantity=None,
        fills_json=None,
        detail=detail,
        queried_at_ms=queried_at_ms,
        observed_at_ms=observed_at_ms,
    )
