"""How long the projector waits before it tries a batch again after PostgreSQL refused it.

A first failure is most often a dropped connection (a server restart, a terminated backend):
it is retried at once. A failure right after another is most often a condition that lasts
(a full disk, a revoked grant, a server that became read-only): retrying at once repeated it
about 2.5 times a second, a reconnect and a warning each time. So each further failure in a
row waits :data:`FIRST_WAIT_S`, doubling up to :data:`LONGEST_WAIT_S`; a batch that goes in
starts the count again.
"""

from __future__ import annotations

FIRST_WAIT_S = 1.0
LONGEST_WAIT_S = 30.0
"""As the engine's restore retries wait. While it waits the projector counts as waiting for
PostgreSQL: alive (``sluicegate serve`` does not kill it), not ready, disconnected."""


class FailuresInARow:
    """Counts the failures since the last batch that went in; says how long to wait."""

    def __init__(self) -> None:
        self.count = 0

    def failed(self) -> float:
        """Count one more failure; the seconds to wait before the next try (0 for the
        first of a row)."""
        self.count += 1
        if self.count == 1:
            return 0.0
        return min(FIRST_WAIT_S * 2.0 ** (self.count - 2), LONGEST_WAIT_S)

    def succeeded(self) -> None:
        self.count = 0


def one_line(error: BaseException) -> str:
    """``error`` as one log line: PostgreSQL's message, hint and context, and any note
    added to it (who holds a lock), joined by "; "."""
    notes: list[str] = getattr(error, "__notes__", [])
    lines = (line.strip() for text in (str(error), *notes) for line in text.splitlines())
    return "; ".join(line for line in lines if line) or type(error).__name__
