"""What the webhook answered, counted for ``GET /metrics/ingest`` on the read API's listener.

:class:`RequestMetrics` counts each answer the webhook's access middleware logs (status and
error code; 499 for a client that went away) and its latency in a histogram. It lives in
the process's one event loop, so it needs no lock. It is served on the read API's listener
(private: loopback by default, behind ``SLUICEGATE_READ_TOKEN`` when set), never on the
webhook's, and apart from the read model's ``/metrics``, so it answers while PostgreSQL
does not. Requests aiohttp cannot parse never reach the middleware and are not counted.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from streams.exposition import Exposition

BOUNDS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""The latency histogram's upper bounds in seconds (``?wait=`` answers can take 30 s)."""


class RequestMetrics:
    """Answers by status and code, and their latency, since the process started."""

    def __init__(self) -> None:
        self.answers: Counter[tuple[int, str]] = Counter()
        self._buckets = [0] * (len(BOUNDS_S) + 1)
        self._seconds = 0.0

    def observe(self, status: int, code: str | None, seconds: float) -> None:
        """One answer (``code``: the error body's, ``None`` for a success)."""
        self.answers[(status, code or "")] += 1
        self._buckets[bisect_left(BOUNDS_S, seconds)] += 1
        self._seconds += seconds

    def render(self) -> str:
        page = Exposition(app="ingest")
        name = "sluicegate_ingest_requests_total"
        page.family(name, "counter", "Webhook answers by status and error code (499: gone).")
        for (status, code), count in sorted(self.answers.items()):
            page.sample(name, count, status=str(status), code=code)
        page.histogram(
            "sluicegate_ingest_request_seconds",
            "Seconds from a webhook request's arrival to its answer.",
            BOUNDS_S,
            self._buckets,
            self._seconds,
        )
        return page.text()
