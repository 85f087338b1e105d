"""A prune on a schedule beside the live projector (``sluicegate projector --prune-every``).

:class:`PruneSchedule` runs :func:`projections.prune.prune` on a thread of its own, once per
interval, the first one interval after it starts (a projector restarted in a loop does not
prune in a loop). A prune that fails (PostgreSQL or Kafka away, a lock wait cut short) is
logged in one warning line and tried again at the next interval; the projector is never
stopped by it. Closing the schedule stops the prune between two batches (what the batches
before deleted stays deleted; the batch in flight commits or not as a whole).

Only one projector of a deployment should prune: ``projector`` starts the schedule unless it
projects a share other than the first (``--share 0/N`` prunes; the others do not), so
``serve --projectors N`` prunes once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from projections.prune import PruneReport, prune
from projections.retry import one_line
from streams.settings import Settings

log = logging.getLogger("sluicegate.projector")

Prune = Callable[[Settings, threading.Event, int], PruneReport]


def _prune(settings: Settings, stop: threading.Event, keep_ms: int) -> PruneReport:
    return prune(settings, stop=stop, keep_ms=keep_ms)


class PruneSchedule:
    """Prunes ``settings``' read model every ``every_s`` seconds until :meth:`close`,
    keeping occurrences with a record younger than ``keep_ms``."""

    def __init__(
        self,
        settings: Settings,
        every_s: float,
        *,
        keep_ms: int = 0,
        run: Prune = _prune,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if every_s <= 0:
            raise ValueError("a prune schedule needs an interval above 0")
        self.settings = settings
        self.every_s = every_s
        self.keep_ms = keep_ms
        self._run = run
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prune-schedule", daemon=True)
        self.runs = 0
        """Prunes that ended, successful or not."""
        self.failures_in_a_row = 0
        self.last: PruneReport | None = None
        """The last prune that succeeded."""
        self.last_at: float | None = None
        """When the last prune ended (epoch seconds)."""
        self.last_error: str | None = None
        """The last prune's failure, one line; ``None`` once one succeeded."""

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop: a prune in progress stops after its batch in flight (waited up to
        ``timeout_s``)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.run_once()

    def run_once(self) -> PruneReport | None:
        """One prune now; its report, or ``None`` if it failed (logged)."""
        try:
            report = self._run(self.settings, self._stop, self.keep_ms)
        except Exception as e:  # any failure waits for the next interval
            self.runs += 1
            self.failures_in_a_row += 1
            self.last_at = self._clock()
            self.last_error = one_line(e)
            log.warning(
                "prune failed (%d in a row), next in %g s: %s",
                self.failures_in_a_row,
                self.every_s,
                self.last_error,
            )
            return None
        self.runs += 1
        self.failures_in_a_row = 0
        self.last, self.last_at, self.last_error = report, self._clock(), None
        log.info("%s", report.describe())
        return report

    def details(self) -> dict[str, object]:
        """What ``/healthz`` shows of the schedule."""
        last = self.last
        return {
            "every_seconds": self.every_s,
            "keep_seconds": self.keep_ms / 1000,
            "runs": self.runs,
            "failures_in_a_row": self.failures_in_a_row,
            "last_at": self.last_at,
            "last_error": self.last_error,
            "last_pruned": None if last is None else last.pruned,
            "last_rows": None if last is None else sum(last.rows.values()),
        }
