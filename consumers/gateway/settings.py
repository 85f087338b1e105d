"""The gateway's settings, from the environment (secrets from the environment only).

* ``SLUICEGATE_VENUE`` (``paper``): ``paper`` is the paper venue's native API, ``binance``
  Binance Spot REST (the paper venue's ``/api/v3``, the Spot testnet or production);
* ``SLUICEGATE_VENUE_URL`` (``http://127.0.0.1:8090``): the venue's base URL;
* ``SLUICEGATE_VENUE_API_KEY``, ``SLUICEGATE_VENUE_API_SECRET``: the account's credentials,
  required except for ``paper`` on a local URL (the built-in paper account's by default);
* ``SLUICEGATE_VENUE_RECV_WINDOW`` (``5s``, at most 60 s): a request's ``recvWindow``;
* ``SLUICEGATE_VENUE_QUIET_PERIOD`` (``30s``): how long the venue may say "not found" about
  an order it accepted;
* ``SLUICEGATE_GATEWAY_SEND_TIMEOUT`` (``10s``): a send still unanswered is looked up;
* ``SLUICEGATE_GATEWAY_LOOKUP_INTERVAL`` (``5s``): between lookups of an unknown outcome;
* ``SLUICEGATE_GATEWAY_RECONCILIATION_BUDGET`` (``2m``): lookups from the attempt before a
  hold (at least recv window + quiet period + one interval);
* ``SLUICEGATE_GATEWAY_FOLLOWUP_WINDOW`` (``5m``): a protection's or notification's deadline
  from its intent;
* ``SLUICEGATE_GATEWAY_APPROVAL_VALIDITY`` (``off``): how long the approval (the gate's
  dispatch request) authorizes a send; ``off``: only the deadline;
* ``SLUICEGATE_GATEWAY_RETENTION`` (``7d``, 2 h to 366 d): how long a finished run's
  journal stays in the gateway's state after its deadline (see
  :mod:`streams.core.journal.retention`); the clock difference between gateway hosts must
  stay below it less one hour;
* ``SLUICEGATE_GATEWAY_THREADS`` (``8``): venue calls in flight at once (one per run);
* ``SLUICEGATE_GATEWAY_TIMEOUT`` (``10s``): the venue client's read timeout (connect 3 s);
* ``SLUICEGATE_NOTIFY_URL`` (the paper venue's sink with ``paper``, else none): where
  notifications are POSTed;
* ``SLUICEGATE_NOTIFY_LOOKUP`` (``on`` for the paper venue's sink, else ``off``): whether the
  channel can be asked whether it has a notification.

Durations are ``250ms``, ``5s``, ``2m`` (see :func:`streams.core.durations.parse_duration`).
A wrong value stops the gateway at start with :class:`GatewaySettingsError` naming the variable.
The timing values are frozen into every intent: a change applies to later actions only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from consumers.gateway.errors import GatewayError
from streams.core.durations import parse_duration
from streams.core.errors import InvalidValue
from streams.core.journal import JournalPolicy
from streams.core.journal.errors import InvalidPolicy
from streams.core.journal.retention import MIN_RETENTION_MS
from streams.text import parse_whole

VENUES = ("paper", "binance")
DEFAULT_VENUE_URL = "http://127.0.0.1:8090"
PAPER_KEY, PAPER_SECRET = "paper-api-key", "paper-api-secret"
"""The built-in paper venue account (public: it exists only in a local paper venue)."""
SINK_PATH = "/paper/v1/notifications"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
RETENTION_DEFAULT_MS = 7 * 86_400_000
RETENTION_MAX_MS = 366 * 86_400_000


class GatewaySettingsError(GatewayError):
    """A gateway setting has a value the gateway cannot use; the message names it."""


@dataclass(frozen=True)
class GatewaySettings:
    """Resolved gateway settings (see the module table)."""

    venue: str = "paper"
    venue_url: str = DEFAULT_VENUE_URL
    api_key: str = PAPER_KEY
    api_secret: str = PAPER_SECRET
    policy: JournalPolicy = field(default_factory=JournalPolicy)
    approval_validity_ms: int | None = None
    retention_ms: int = RETENTION_DEFAULT_MS
    threads: int = 8
    read_timeout_s: float = 10.0
    notify_url: str | None = DEFAULT_VENUE_URL + SINK_PATH
    notify_lookup: bool = True

    @property
    def local_paper(self) -> bool:
        """A paper venue on this machine (``sluicegate serve`` runs it too)."""
        parts = urlsplit(self.venue_url)
        return self.venue == "paper" and parts.scheme == "http" and parts.hostname in LOCAL_HOSTS

    @property
    def venue_listen(self) -> str:
        """``HOST:PORT`` of the venue URL (for running the paper venue there)."""
        parts = urlsplit(self.venue_url)
        return f"{parts.hostname}:{parts.port or 80}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatewaySettings:
        env = os.environ if env is None else env
        venue = env.get("SLUICEGATE_VENUE", "paper").strip().lower()
        if venue not in VENUES:
            raise GatewaySettingsError(f"SLUICEGATE_VENUE={venue!r} must be paper or binance")
        url = env.get("SLUICEGATE_VENUE_URL", DEFAULT_VENUE_URL).strip().rstrip("/")
        _require_url("SLUICEGATE_VENUE_URL", url)
        local = venue == "paper" and urlsplit(url).hostname in LOCAL_HOSTS
        key = env.get("SLUICEGATE_VENUE_API_KEY") or (PAPER_KEY if local else "")
        secret = env.get("SLUICEGATE_VENUE_API_SECRET") or (PAPER_SECRET if local else "")
        if not key or not secret:
            raise GatewaySettingsError(
                "SLUICEGATE_VENUE_API_KEY and SLUICEGATE_VENUE_API_SECRET must be set for "
                f"{venue} at {url} (secrets come from the environment only)"
            )
        window = _duration(env, "SLUICEGATE_VENUE_RECV_WINDOW", "5s")
        if not 0 < window <= 60_000:
            raise GatewaySettingsError("SLUICEGATE_VENUE_RECV_WINDOW must be 1ms to 60s")
        try:
            policy = JournalPolicy(
                recv_window_ms=window,
                quiet_period_ms=_duration(env, "SLUICEGATE_VENUE_QUIET_PERIOD", "30s"),
                send_timeout_ms=_duration(env, "SLUICEGATE_GATEWAY_SEND_TIMEOUT", "10s"),
                lookup_interval_ms=_duration(env, "SLUICEGATE_GATEWAY_LOOKUP_INTERVAL", "5s"),
                reconciliation_budget_ms=_duration(
                    env, "SLUICEGATE_GATEWAY_RECONCILIATION_BUDGET", "2m"
                ),
                followup_window_ms=_duration(env, "SLUICEGATE_GATEWAY_FOLLOWUP_WINDOW", "5m"),
            )
        except InvalidPolicy as e:
            raise GatewaySettingsError(f"gateway timing settings: {e}") from e
        validity = env.get("SLUICEGATE_GATEWAY_APPROVAL_VALIDITY", "off").strip()
        threads_text = env.get("SLUICEGATE_GATEWAY_THREADS", "8").strip()
        threads = parse_whole(threads_text, 256)
        if not threads:
            raise GatewaySettingsError("SLUICEGATE_GATEWAY_THREADS must be 1 to 256")
        retention = _duration(env, "SLUICEGATE_GATEWAY_RETENTION", "7d")
        if not MIN_RETENTION_MS <= retention <= RETENTION_MAX_MS:
            raise GatewaySettingsError("SLUICEGATE_GATEWAY_RETENTION must be 2h to 366d")
        default_sink = url + SINK_PATH if venue == "paper" else None
        notify_url = env.get("SLUICEGATE_NOTIFY_URL", default_sink or "").strip() or None
        if notify_url is not None:
            _require_url("SLUICEGATE_NOTIFY_URL", notify_url)
        lookup_default = "on" if notify_url == default_sink and venue == "paper" else "off"
        lookup = env.get("SLUICEGATE_NOTIFY_LOOKUP", lookup_default).strip().lower()
        if lookup not in ("on", "off"):
            raise GatewaySettingsError("SLUICEGATE_NOTIFY_LOOKUP must be on or off")
        return cls(
            venue=venue,
            venue_url=url,
            api_key=key,
            api_secret=secret,
            policy=policy,
            approval_validity_ms=None
            if validity == "off"
            else _duration(env, "SLUICEGATE_GATEWAY_APPROVAL_VALIDITY", "off"),
            retention_ms=retention,
            threads=threads,
            read_timeout_s=_duration(env, "SLUICEGATE_GATEWAY_TIMEOUT", "10s") / 1000,
            notify_url=notify_url,
            notify_lookup=lookup == "on",
        )


def _duration(env: Mapping[str, str], var: str, default: str) -> int:
    try:
        return parse_duration(env.get(var, default).strip())
    except InvalidValue as e:
        raise GatewaySettingsError(f"{var}: {e}") from e


def _require_url(var: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GatewaySettingsError(f"{var}={url!r} is not an http(s):// URL")
