"""Ingest's own settings, read from ``SLUICEGATE_INGEST_*`` and ``SLUICEGATE_READ_*``.

| variable | default | meaning |
|---|---|---|
| ``SLUICEGATE_READ_HTTP`` | 127.0.0.1:8081 | the read API's own listener (``off``: none) |
| ``SLUICEGATE_READ_TOKEN`` | (none) | if set, the read API wants ``Authorization: Bearer`` it |
| ``SLUICEGATE_INGEST_MAX_BODY_BYTES`` | 65536 | larger bodies are refused with 413 |
| ``SLUICEGATE_INGEST_REPLAY_WINDOW`` | 300s | accepted age (either way) of a signature's ``t`` |
| ``SLUICEGATE_INGEST_ACK_TIMEOUT`` | 2s | server-side budget for lookup + broker ack, then 503 |
| ``SLUICEGATE_INGEST_MAX_WAIT`` | 10s | the largest ``?wait=`` a sender may ask for |
| ``SLUICEGATE_INGEST_BODY_TIMEOUT`` | 10s | time a client has to upload its body, then 408 |
| ``SLUICEGATE_INGEST_IDLE_TIMEOUT`` | 15s | time a connection has to send a request head |
| ``SLUICEGATE_INGEST_MAX_CONNECTIONS`` | 4096 | open connections per listener, then 503 |

Durations are written ``250ms``, ``2s``, ``1.5s``, ``5m`` or as plain seconds, in ASCII
digits only (``float()`` would also take the digits of other scripts).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from consumers.ingest.errors import IngestSettingsError
from streams.settings import duration_setting
from streams.text import parse_whole

DEFAULT_READ_HTTP = "127.0.0.1:8081"
# What a Bearer credential may hold (RFC 6750's b64token), so a token can always be sent.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")


@dataclass(frozen=True)
class IngestSettings:
    """Limits and time budgets of the webhook front door (see the module table)."""

    max_body_bytes: int = 64 * 1024
    replay_window_s: float = 300.0
    ack_timeout_s: float = 2.0
    max_wait_s: float = 10.0
    body_timeout_s: float = 10.0
    idle_timeout_s: float = 15.0
    max_connections: int = 4096
    retry_after_s: int = 2
    # The read API's listener, or None when it is switched off.
    read_http: tuple[str, int] | None = ("127.0.0.1", 8081)
    read_token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> IngestSettings:
        """Read the settings; raise :class:`IngestSettingsError` naming a bad variable."""
        env = os.environ if env is None else env
        raw_max = env.get("SLUICEGATE_INGEST_MAX_BODY_BYTES", "65536").strip()
        max_body_bytes = parse_whole(raw_max, 16 * 1024 * 1024)
        if max_body_bytes is None or max_body_bytes < 1024:
            raise IngestSettingsError(
                f"SLUICEGATE_INGEST_MAX_BODY_BYTES={raw_max!r} must be a whole number of bytes "
                "from 1024 to 16777216"
            )
        return cls(
            max_body_bytes=max_body_bytes,
            replay_window_s=_duration(env, "SLUICEGATE_INGEST_REPLAY_WINDOW", "300s", 1, 86_400),
            ack_timeout_s=_duration(env, "SLUICEGATE_INGEST_ACK_TIMEOUT", "2s", 0.1, 30),
            max_wait_s=_duration(env, "SLUICEGATE_INGEST_MAX_WAIT", "10s", 0, 60),
            body_timeout_s=_duration(env, "SLUICEGATE_INGEST_BODY_TIMEOUT", "10s", 0.1, 300),
            idle_timeout_s=_duration(env, "SLUICEGATE_INGEST_IDLE_TIMEOUT", "15s", 0.5, 3600),
            max_connections=_max_connections(env),
            read_http=_read_http(env),
            read_token=_read_token(env),
        )


def _max_connections(env: Mapping[str, str]) -> int:
    raw = env.get("SLUICEGATE_INGEST_MAX_CONNECTIONS", "4096").strip()
    limit = parse_whole(raw, 1_000_000)
    if not limit:
        raise IngestSettingsError(
            f"SLUICEGATE_INGEST_MAX_CONNECTIONS={raw!r} must be a whole number of connections "
            "from 1 to 1000000"
        )
    return limit


def _read_http(env: Mapping[str, str]) -> tuple[str, int] | None:
    raw = env.get("SLUICEGATE_READ_HTTP", "").strip() or DEFAULT_READ_HTTP
    if raw.lower() == "off":
        return None
    host, sep, port_text = raw.rpartition(":")
    port = parse_whole(port_text, 65535)
    if not sep or not host or not port:
        raise IngestSettingsError(
            f"SLUICEGATE_READ_HTTP={raw!r} is not HOST:PORT (for example {DEFAULT_READ_HTTP}) "
            "or off"
        )
    return host, port


def _read_token(env: Mapping[str, str]) -> str | None:
    token = env.get("SLUICEGATE_READ_TOKEN", "")
    if not token:
        return None
    if len(token) < 16 or not _BEARER_TOKEN.fullmatch(token):
        raise IngestSettingsError(
            "SLUICEGATE_READ_TOKEN must be at least 16 characters of A-Z a-z 0-9 . _ ~ + / - "
            "(a Bearer token), e.g. from `openssl rand -hex 32`; the value is not shown here"
        )
    return token


def _duration(env: Mapping[str, str], var: str, default: str, low: float, high: float) -> float:
    return duration_setting(env, var, default, low, high, error=IngestSettingsError)
