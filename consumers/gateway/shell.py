"""The gateway's shell: performs one effect request against the venue or the channel.

Called by the engine's effect workers (``streams.engine.effects``) only after the transaction
holding the request's record committed, and only while this instance still holds the run's
partition. Each worker thread has its own venue client and channel (the adapters are not
thread-safe); one run's effects never overlap.

A send is made at most once per ``AttemptStarted``, never retried here, and only if, just
before it leaves, ``now < send_by_ms`` (the attempt's recv window, or the deadline minus the
clock uncertainty if that is earlier). The venue request carries the attempt's time as
``timestamp`` and ``send_by_ms - attempted_at_ms`` as ``recvWindow``: a request that leaves
late anyway (the process was paused after the check) is refused by the venue itself, so a
zombie whose partitions moved on can never get an order accepted. Nothing here raises for
anything the venue does: every outcome is an answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from consumers.gateway.notify import NotificationChannel
from consumers.gateway.orders import (
    UNSUPPORTED,
    Unsendable,
    exposure_observed,
    lookup_answered,
    order_request,
    refused,
    venue_answered,
)
from consumers.gateway.settings import GatewaySettings
from consumers.venue.adapter import Attempt, Rejected, Unknown, VenueAdapter
from consumers.venue.binance_spot import BinanceSpotClient
from consumers.venue.paper import PaperVenueClient
from schemas.commands import VenueAnswered
from streams.core.journal import EffectRequest, ExposureRequest, LookupRequest, SendRequest
from streams.core.journal.commands import Command
from streams.core.journal.model import NOTIFICATION
from streams.engine.failpoints import Failpoints

log = logging.getLogger("sluicegate.gateway")

NOT_SENT = "not_sent"
MAX_WINDOW_MS = 60_000


def make_venue(settings: GatewaySettings) -> VenueAdapter:
    """The venue client the settings name."""
    if settings.venue == "binance":
        return BinanceSpotClient(
            settings.venue_url,
            settings.api_key,
            settings.api_secret,
            read_timeout_s=settings.read_timeout_s,
        )
    return PaperVenueClient(
        settings.venue_url,
        settings.api_key,
        settings.api_secret,
        read_timeout_s=settings.read_timeout_s,
    )


def send_window_ms(send: SendRequest) -> int:
    """The ``recvWindow`` of a send: until its ``send_by_ms`` (1 ms .. 60 s)."""
    return max(1, min(send.send_by_ms - send.timestamp_ms, send.recv_window_ms, MAX_WINDOW_MS))


class Shell:
    """Performs :class:`~streams.core.journal.EffectRequest` s (see the module docstring)."""

    def __init__(
        self,
        settings: GatewaySettings,
        clock: Callable[[], int],
        failpoints: Failpoints,
        venue_factory: Callable[[GatewaySettings], VenueAdapter] = make_venue,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.failpoints = failpoints
        self._factory = venue_factory
        self._local = threading.local()

    def _venue(self) -> VenueAdapter:
        venue: VenueAdapter | None = getattr(self._local, "venue", None)
        if venue is None:
            venue = self._factory(self.settings)
            self._local.venue = venue
        return venue

    def _channel(self) -> NotificationChannel | None:
        if self.settings.notify_url is None:
            return None
        channel: NotificationChannel | None = getattr(self._local, "channel", None)
        if channel is None:
            channel = NotificationChannel(
                self.settings.notify_url,
                lookup=self.settings.notify_lookup,
                read_timeout_s=self.settings.read_timeout_s,
            )
            self._local.channel = channel
        return channel

    def expired(self, effect: EffectRequest, now_ms: int) -> VenueAnswered | None:
        """``not_sent`` for a send past its ``send_by_ms``; ``None`` for anything fresh."""
        if isinstance(effect, SendRequest) and now_ms >= effect.send_by_ms:
            late = now_ms - effect.send_by_ms
            detail = f"not sent: {late} ms past send_by ({effect.send_by_ms})"
            return refused(effect, NOT_SENT, "stale_attempt", detail, now_ms)
        return None

    def perform(self, effect: EffectRequest) -> Command | None:
        if isinstance(effect, SendRequest):
            return self._send(effect)
        if isinstance(effect, LookupRequest):
            return self._lookup(effect)
        return self._exposure(effect)

    def _send(self, send: SendRequest) -> Command:
        if send.slot == NOTIFICATION:
            channel = self._channel()
            if channel is None:
                detail = "no notification channel is configured (SLUICEGATE_NOTIFY_URL)"
                return refused(send, "rejected", "no_notification_channel", detail, self.clock())
            if self.expired(send, self.clock()) is not None:
                return refused(send, NOT_SENT, "stale_attempt", "past send_by", self.clock())
            self.failpoints.check("before_send", (send,))
            return channel.send(send, self.clock)
        try:
            order = order_request(send)
        except Unsendable as e:
            return refused(send, "rejected", UNSUPPORTED, str(e), self.clock())
        late = self.expired(send, self.clock())
        if late is not None:
            return late
        self.failpoints.check("before_send", (send,))
        answer = self._venue().place(order, Attempt(send.timestamp_ms, send_window_ms(send)))
        observed = self.clock()
        shown = type(answer).__name__
        if isinstance(answer, Rejected | Unknown):
            shown += f"({answer.reason.value})"
        after_ms = observed - send.timestamp_ms
        log.info(
            "sent %s attempt %d: %s (%d ms after its attempt time)",
            send.action_id,
            send.attempt,
            shown,
            after_ms,
            extra={"fields": _sent_fields(send, shown, after_ms)},
        )
        return venue_answered(send, answer, observed)

    def _lookup(self, lookup: LookupRequest) -> Command:
        if lookup.slot == NOTIFICATION:
            channel = self._channel()
            if channel is not None:
                return channel.lookup(lookup, self.clock)
        queried = self.clock()
        window = min(self.settings.policy.recv_window_ms, MAX_WINDOW_MS)
        answer = self._venue().query(
            lookup.instrument, lookup.client_order_id, Attempt(queried, window)
        )
        return lookup_answered(lookup, answer, queried, self.clock())

    def _exposure(self, request: ExposureRequest) -> Command:
        queried = self.clock()
        window = min(self.settings.policy.recv_window_ms, MAX_WINDOW_MS)
        answer = self._venue().exposure(request.instrument, Attempt(queried, window))
        return exposure_observed(request, answer, queried, self.clock())


def _sent_fields(send: SendRequest, answer: str, after_ms: int) -> dict[str, object]:
    """What a log pipeline selects a venue request's line by (``SLUICEGATE_LOG_FORMAT``)."""
    return {
        "run_id": send.run_id,
        "action_id": send.action_id,
        "attempt": send.attempt,
        "client_order_id": send.client_order_id,
        "venue": send.venue,
        "account": send.account,
        "instrument": send.instrument,
        "answer": answer,
        "after_ms": after_ms,
    }
