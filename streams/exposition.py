"""Prometheus text exposition (format 0.0.4), written one family at a time.

Every sample carries the labels the :class:`Exposition` was made with (which component,
which instance) before its own; label values are escaped, so any name is safe in them.
"""

from __future__ import annotations

from collections.abc import Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape(value: str) -> str:
    """``value`` as a label value between double quotes."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Exposition:
    """The lines of one page; :meth:`text` is the page."""

    def __init__(self, **labels: str) -> None:
        self._base = [f'{k}="{escape(v)}"' for k, v in labels.items()]
        self._lines: list[str] = []

    def family(self, name: str, kind: str, text: str) -> None:
        """Start the family ``name`` (``counter`` or ``gauge``); its samples follow."""
        self._lines.append(f"# HELP {name} {text}")
        self._lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, **labels: str) -> None:
        """One sample of the family just started (a bool counts as 1 or 0)."""
        pairs = ",".join([*self._base, *(f'{k}="{escape(v)}"' for k, v in labels.items())])
        shown = value if isinstance(value, float) else int(value)
        self._lines.append(f"{name}{{{pairs}}} {shown}")

    def counter(self, name: str, text: str, value: float) -> None:
        self.family(name, "counter", text)
        self.sample(name, value)

    def gauge(self, name: str, text: str, value: float) -> None:
        self.family(name, "gauge", text)
        self.sample(name, value)

    def histogram(
        self, name: str, text: str, bounds: Sequence[float], counts: Sequence[int], total: float
    ) -> None:
        """A histogram: ``counts[i]`` observations at most ``bounds[i]`` (not cumulative;
        one more count than bounds, for those above the last), their sum ``total``."""
        self.family(name, "histogram", text)
        running = 0
        for bound, count in zip((*map(repr, bounds), "+Inf"), counts, strict=True):
            running += count
            self.sample(f"{name}_bucket", running, le=bound)
        self.sample(f"{name}_sum", round(total, 6))
        self.sample(f"{name}_count", running)

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
