"""A small progress bar for stderr (rebuild, replay).

Redraws in place at most ten times a second when the stream is a terminal; otherwise it
stays silent until :meth:`Progress.close`, which prints one summary line, so logs and CI
output are not flooded with carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_WIDTH = 30


class Progress:
    """Counts ``done`` out of ``total`` units; ``total`` may grow while running."""

    def __init__(
        self, label: str, total: int, stream: TextIO | None = None, enabled: bool = True
    ) -> None:
        self.label = label
        self.total = max(total, 0)
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interactive = enabled and self.stream.isatty()
        self._started = time.monotonic()
        self._drawn = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.interactive and time.monotonic() - self._drawn >= 0.1:
            self._draw()

    def _line(self) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self.done / elapsed
        if self.total > 0:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * _WIDTH)
            bar = "#" * filled + "." * (_WIDTH - filled)
            return f"{self.label} [{bar}] {self.done}/{self.total} {fraction:4.0%} {rate:,.0f}/s"
        return f"{self.label} {self.done} {rate:,.0f}/s"

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        self.stream.write("\r" + self._line() + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """Finish the bar (or print the summary line when not on a terminal)."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self._started
        if self.interactive:
            self._draw()
            self.stream.write("\n")
        else:
            self.stream.write(f"{self.label}: {self.done} in {elapsed:.1f} s\n")
        self.stream.flush()
