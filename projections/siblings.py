"""Noticing a share that nobody projects, from a live projector of another share.

Live projectors that share the partitions (``sluicegate projector --share K/N``) are started
by ``sluicegate serve --projectors N``, and also by hand, by ``docker-compose.yml`` or by
systemd. A share whose projector is not running leaves its partitions unprojected, and the
schema does not say so: the tables just miss those rows. So every following projector with
a share looks at the other shares' partitions now and then (:data:`CHECK_EVERY_S`):

- a partition whose stored offset is behind Kafka's read_committed end, and has not moved
  for :data:`STALLED_AFTER_S`, is *stalled*;
- the projector warns once per stalled share and window, naming the ``--share`` to start
  and how far behind its partitions are, and its ``/healthz`` body lists the stalled
  shares (``stalled_shares``).

What it does not do: start the missing projector, or tell a stopped projector from one that
is merely slower than :data:`STALLED_AFTER_S` allows (a share that moves at all is not
stalled). A projector without ``--share`` projects every partition and watches nothing.
:class:`SiblingWatch` is the pure part (no Kafka, no PostgreSQL, no clock of its own).
"""

from __future__ import annotations

from collections.abc import Mapping

from projections.share import Share

Offsets = Mapping[tuple[str, int], int]
"""Next offset per (short topic, partition)."""

STALLED_AFTER_S = 300.0
"""How long a partition behind its end may keep one stored offset before its share counts as
stalled: five times the projector's own stall limit, so a projector being restarted is not
reported."""
CHECK_EVERY_S = 60.0
"""How often a following projector reads the other shares' offsets and ends."""


class SiblingWatch:
    """What a projector of ``share`` has seen of the other shares' partitions."""

    def __init__(self, share: Share) -> None:
        self.share = share
        self.checked_at = float("-inf")
        """When :meth:`observe` last ran (the caller's monotonic clock)."""
        self.stalled: list[int] = []
        """The indexes of the shares found stalled by the last :meth:`observe`."""
        self._since: dict[tuple[str, int], tuple[int, float]] = {}
        self._said_at: dict[int, float] = {}

    def labels(self) -> list[str]:
        """The stalled shares as ``K/N``, as ``--share`` takes them."""
        return [f"{index}/{self.share.count}" for index in self.stalled]

    def due(self, now: float) -> bool:
        return now - self.checked_at >= CHECK_EVERY_S

    def observe(self, now: float, stored: Offsets, ends: Offsets) -> list[str]:
        """Take the stored offsets and Kafka's ends of every partition (of every share) at
        ``now``; the warnings to log (one per stalled share, at most once per
        :data:`STALLED_AFTER_S` each)."""
        self.checked_at = now
        behind: dict[int, list[tuple[tuple[str, int], int]]] = {}
        for tp, end in ends.items():
            if tp in self.share:
                continue
            at = stored.get(tp, 0)  # nothing stored: an empty partition is not behind
            if at >= end:
                self._since.pop(tp, None)
                continue
            seen = self._since.get(tp)
            if seen is None or seen[0] != at:
                self._since[tp] = seen = (at, now)
            if now - seen[1] >= STALLED_AFTER_S:
                behind.setdefault(tp[1] % self.share.count, []).append((tp, end - at))
        self.stalled = sorted(behind)
        warnings = []
        for index in self.stalled:
            if now - self._said_at.get(index, float("-inf")) < STALLED_AFTER_S:
                continue
            self._said_at[index] = now
            parts = sorted(behind[index])
            named = ", ".join(f"{t}[{p}]" for (t, p), _ in parts[:6])
            more = f" and {len(parts) - 6} more" if len(parts) > 6 else ""
            warnings.append(
                f"share {index}/{self.share.count} looks unprojected: {named}{more} stayed "
                f"{sum(n for _, n in parts):,} messages behind Kafka for "
                f"{STALLED_AFTER_S:.0f} s or more; is `sluicegate projector --share "
                f"{index}/{self.share.count}` running?"
            )
        return warnings
