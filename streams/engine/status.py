"""What an engine instance is doing now, for an operator's probes (``/healthz``, ``/readyz``).

An instance goes through an explicit life (:class:`Phase`):

- ``starting``: transactions initialised, the group being joined, nothing assigned yet;
- ``restoring``: an assignment's stores are being restored from their changelogs;
- ``running``: every assigned partition restored and consumed (holding no partition, when
  the group has more instances than partitions, is running too: a standby);
- ``starting_over``: something no batch could settle (a transaction whose outcome is unknown,
  a restore that timed out) closed everything; the instance waits its back-off and for the
  broker, then joins the group again (``processor.py``);
- ``stopped``: :meth:`~streams.engine.processor.Processor.run` returned or raised.

Ready means ``running``. Healthy means the instance is worth keeping: not ``stopped``, and,
while ``running``, its loop came round within ``stalled_after_s`` (a loop that does not is
stuck in a way no timeout of the engine catches, and only a restart helps). Restoring and
starting over are healthy however long they take: each is bounded by the broker answering,
and a restarted process would wait for the same thing.

Written by the instance's thread, read by any other: each change replaces one immutable
:class:`Snapshot`, so a reader never sees half of one.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from streams.errors import StreamsError

if TYPE_CHECKING:
    from streams.engine.lag import PartitionLag


class Phase(enum.Enum):
    STARTING = "starting"
    RESTORING = "restoring"
    RUNNING = "running"
    STARTING_OVER = "starting_over"
    STOPPED = "stopped"


ALLOWED: dict[Phase, frozenset[Phase]] = {
    Phase.STARTING: frozenset({Phase.RESTORING, Phase.STARTING_OVER, Phase.STOPPED}),
    Phase.RESTORING: frozenset({Phase.RUNNING, Phase.STARTING_OVER, Phase.STOPPED}),
    Phase.RUNNING: frozenset({Phase.RESTORING, Phase.STARTING_OVER, Phase.STOPPED}),
    Phase.STARTING_OVER: frozenset({Phase.RESTORING, Phase.STARTING_OVER, Phase.STOPPED}),
    Phase.STOPPED: frozenset(),
}
"""Every change of phase an instance may make; ``STARTING_OVER`` again covers a start-over
whose back-off a further failure interrupts before the group is joined."""


class IllegalPhaseChange(StreamsError):
    """An instance tried a change of phase :data:`ALLOWED` does not list: a bug in the
    engine, never a condition of Kafka."""


@dataclass(frozen=True)
class Snapshot:
    phase: Phase
    since: float
    """Monotonic time the phase began."""
    loop_at: float
    """Monotonic time the instance's loop last came round (its start, before the first)."""
    reason: str | None = None
    """Why the instance is starting over or stopped; None otherwise."""
    starts_over: int = 0
    """Start-overs since the process started."""
    failed_in_a_row: int = 0
    """Start-overs since the instance last reached ``running``."""
    assigned: tuple[int, ...] = ()
    lag: tuple[PartitionLag, ...] = ()
    """The input partitions' lag at the loop's last sample (``lag.py``); none outside
    ``running``."""


class InstanceStatus:
    """The phase of one engine instance and when its loop last came round."""

    def __init__(
        self, *, stalled_after_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stalled_after_s = stalled_after_s
        self.clock = clock
        now = clock()
        self._now: Snapshot = Snapshot(Phase.STARTING, since=now, loop_at=now)

    def snapshot(self) -> Snapshot:
        return self._now

    def enter(self, phase: Phase, reason: str | None = None) -> None:
        """Change to ``phase``; :class:`IllegalPhaseChange` if :data:`ALLOWED` has no such
        change. Entering the phase the instance is in (other than ``starting_over``) is no
        change at all."""
        now = self._now
        if phase is now.phase and phase is not Phase.STARTING_OVER:
            return
        if phase not in ALLOWED[now.phase]:
            raise IllegalPhaseChange(f"an instance {now.phase.value} cannot become {phase.value}")
        over = phase is Phase.STARTING_OVER
        self._now = replace(
            now,
            phase=phase,
            since=self.clock(),
            reason=reason if phase in (Phase.STARTING_OVER, Phase.STOPPED) else None,
            starts_over=now.starts_over + over,
            failed_in_a_row=0 if phase is Phase.RUNNING else now.failed_in_a_row + over,
            lag=now.lag if phase is Phase.RUNNING else (),
        )

    def came_round(self) -> None:
        """The instance's loop came round."""
        self._now = replace(self._now, loop_at=self.clock())

    def lagging(self, lag: tuple[PartitionLag, ...]) -> None:
        """The input partitions' lag, as the loop just sampled it (kept only while
        ``running``: any other phase has none)."""
        if self._now.phase is Phase.RUNNING:
            self._now = replace(self._now, lag=lag)

    def holding(self, assigned: tuple[int, ...]) -> None:
        """The partitions whose stores the instance holds now."""
        self._now = replace(self._now, assigned=assigned)


def ready(snapshot: Snapshot) -> bool:
    """Whether the instance processes what arrives: ``running``."""
    return snapshot.phase is Phase.RUNNING


def healthy(snapshot: Snapshot, now: float, stalled_after_s: float) -> bool:
    """Whether the instance is worth keeping (see the module's docstring)."""
    if snapshot.phase is Phase.STOPPED:
        return False
    if snapshot.phase is Phase.RUNNING:
        return now - snapshot.loop_at <= stalled_after_s
    return True


def describe(snapshot: Snapshot, now: float, stalled_after_s: float) -> dict[str, object]:
    """The status as a probe's JSON body answers it."""
    return {
        "phase": snapshot.phase.value,
        "ready": ready(snapshot),
        "healthy": healthy(snapshot, now, stalled_after_s),
        "phase_seconds": round(now - snapshot.since, 3),
        "loop_seconds_ago": round(now - snapshot.loop_at, 3),
        "stalled_after_seconds": stalled_after_s,
        "reason": snapshot.reason,
        "starts_over": snapshot.starts_over,
        "failed_in_a_row": snapshot.failed_in_a_row,
        "assigned": list(snapshot.assigned),
    }
