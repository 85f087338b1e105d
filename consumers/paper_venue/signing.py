"""Request authentication and timing, as Binance does it.

A signed request carries ``timestamp`` (ms, or µs when it has 16+ digits) and an optional
``recvWindow`` (ms, up to three decimals, default 5000, at most 60000). It is processed only if
``timestamp < server_time + 1 s`` and ``server_time - timestamp <= recvWindow``; the venue checks
the window again just before an order reaches the matching engine. The signature is the hex
HMAC-SHA256 of the payload with the account's secret, compared case-insensitively.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from decimal import Decimal

from consumers.paper_venue.errors import Refusal, RefusalKind, invalid, mandatory
from consumers.paper_venue.money import parse_decimal, parse_whole

DEFAULT_WINDOW_MS = 5000
MAX_WINDOW_MS = 60000
_AHEAD_US = 1_000_000
_MICROSECOND_DIGITS = 16

MSG_OUTSIDE_WINDOW = "Timestamp for this request is outside of the recvWindow."
MSG_AHEAD = "Timestamp for this request was 1000ms ahead of the server's time."
MSG_BAD_SIGNATURE = "Signature for this request is not valid."


def wall_us() -> int:
    """Microseconds since the epoch, from the system clock."""
    return time.time_ns() // 1000


def hmac_hex(secret: str, payload: str) -> str:
    """Hex HMAC-SHA256 of ``payload`` keyed with ``secret`` (both UTF-8)."""
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def signature_matches(secret: str, payload: str, given: str) -> bool:
    """Whether ``given`` is the payload's signature (hex, any letter case)."""
    expected = hmac_hex(secret, payload).encode("ascii")
    return hmac.compare_digest(expected, given.lower().encode("ascii", "replace"))


@dataclass(frozen=True)
class Window:
    """The time window a request asked for, in microseconds."""

    timestamp_us: int
    window_us: int

    def check(self, now_us: int) -> None:
        """Refuse (-1021) a request that is early by a second or more, or late."""
        if self.timestamp_us >= now_us + _AHEAD_US:
            raise Refusal(RefusalKind.REQUEST_EXPIRED, -1021, MSG_AHEAD)
        if now_us - self.timestamp_us > self.window_us:
            raise Refusal(RefusalKind.REQUEST_EXPIRED, -1021, MSG_OUTSIDE_WINDOW)


def parse_window(timestamp: str | None, recv_window: str | None) -> Window:
    """The window of a request from its ``timestamp`` and ``recvWindow`` parameters."""
    ts = parse_whole(timestamp) if timestamp else None
    if timestamp is None or ts is None:  # both: mypy narrows ``timestamp`` by the first
        raise mandatory("timestamp")
    ts_us = ts if len(timestamp) >= _MICROSECOND_DIGITS else ts * 1000
    window_ms = Decimal(DEFAULT_WINDOW_MS)
    if recv_window is not None:
        parsed = parse_decimal(recv_window)
        if parsed is None or parsed.as_tuple().exponent not in range(-3, 1) or parsed <= 0:
            raise mandatory("recvWindow")
        if parsed > MAX_WINDOW_MS:
            raise invalid(
                -1102,
                f"'recvWindow' contains unexpected value. Cannot be greater than {MAX_WINDOW_MS}.",
            )
        window_ms = parsed
    return Window(ts_us, int(window_ms * 1000))
