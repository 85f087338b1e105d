"""Ingest's own settings, read from ``SLUICEGATE_INGEST_*`` environment variables.

| variable | default | meaning |
|---|---|---|
| ``SLUICEGATE_INGEST_MAX_BODY_BYTES`` | 65536 | larger bodies are refused with 413 |
| ``SLUICEGATE_INGEST_REPLAY_WINDOW`` | 300s | accepted age (either way) of a signature's ``t`` |
| ``SLUICEGATE_INGEST_ACK_TIMEOUT`` | 2s | server-side budget for lookup + broker ack, then 503 |
| ``SLUICEGATE_INGEST_MAX_WAIT`` | 10s | the largest ``?wait=`` a sender may ask for |
| ``SLUICEGATE_INGEST_BODY_TIMEOUT`` | 10s | time a client has to upload its body, then 408 |

Durations are written ``250ms``, ``2s``, ``1.5s``, ``5m`` or as plain seconds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from consumers.ingest.errors import IngestSettingsError

_DURATION = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,6})?)\s*(ms|s|m)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration_s(text: str) -> float | None:
    """Seconds for ``250ms``/``2s``/``1.5s``/``5m``/``2``; ``None`` if ``text`` is not one."""
    match = _DURATION.match(text)
    if match is None:
        return None
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


@dataclass(frozen=True)
class IngestSettings:
    """Limits and time budgets of the webhook front door (see the module table)."""

    max_body_bytes: int = 64 * 1024
    replay_window_s: float = 300.0
    ack_timeout_s: float = 2.0
    max_wait_s: float = 10.0
    body_timeout_s: float = 10.0
    retry_after_s: int = 2

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> IngestSettings:
        """Read the settings; raise :class:`IngestSettingsError` naming a bad variable."""
        env = os.environ if env is None else env
        raw_max = env.get("SLUICEGATE_INGEST_MAX_BODY_BYTES", "65536").strip()
        if not raw_max.isdigit() or not 1024 <= int(raw_max) <= 16 * 1024 * 1024:
            raise IngestSettingsError(
                f"SLUICEGATE_INGEST_MAX_BODY_BYTES={raw_max!r} must be a whole number of bytes "
                "from 1024 to 16777216"
            )
        return cls(
            max_body_bytes=int(raw_max),
            replay_window_s=_duration(env, "SLUICEGATE_INGEST_REPLAY_WINDOW", "300s", 1, 86_400),
            ack_timeout_s=_duration(env, "SLUICEGATE_INGEST_ACK_TIMEOUT", "2s", 0.1, 30),
            max_wait_s=_duration(env, "SLUICEGATE_INGEST_MAX_WAIT", "10s", 0, 60),
            body_timeout_s=_duration(env, "SLUICEGATE_INGEST_BODY_TIMEOUT", "10s", 0.1, 300),
        )


def _duration(env: Mapping[str, str], var: str, default: str, low: float, high: float) -> float:
    raw = env.get(var, default)
    seconds = parse_duration_s(raw)
    if seconds is None or not low <= seconds <= high:
        raise IngestSettingsError(
            f"{var}={raw!r} must be a duration from {low:g}s to {high:g}s (e.g. 250ms, 2s, 5m)"
        )
    return seconds
