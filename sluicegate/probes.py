"""What a component's probes answer (``sluicegate/health.py`` serves them over HTTP): light,
so a command builds its probes without loading the HTTP server."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sluicegate import instance_metrics
from streams.engine.status import InstanceStatus, Snapshot, describe, healthy, ready

if TYPE_CHECKING:  # types only: building the CLI's parser must not load the engine
    from streams.engine.batch import ProcessorStats
    from streams.engine.effects import EffectStats

Answer = tuple[bool, dict[str, object]]
"""Whether a probe passes, and the body it answers with."""


class Probes(Protocol):
    def healthz(self) -> Answer: ...

    def readyz(self) -> Answer: ...

    def metrics(self) -> str | None:
        """Prometheus text for ``GET /metrics``; ``None``: the component serves none (404)."""
        ...


@dataclass(frozen=True)
class EngineProbes:
    """An engine instance's probes, from its :class:`InstanceStatus`; with ``stats``,
    ``app`` and ``instance_id`` its ``/metrics`` too (``sluicegate/instance_metrics.py``)."""

    status: InstanceStatus
    stats: ProcessorStats | None = None
    app: str = ""
    instance_id: str = ""
    effects: EffectStats | None = None

    def healthz(self) -> Answer:
        snapshot, now, limit = self._read()
        return healthy(snapshot, now, limit), describe(snapshot, now, limit)

    def readyz(self) -> Answer:
        snapshot, now, limit = self._read()
        return ready(snapshot), describe(snapshot, now, limit)

    def metrics(self) -> str | None:
        if self.stats is None:
            return None
        snapshot, now, limit = self._read()
        return instance_metrics.render(
            self.app,
            self.instance_id,
            self.stats,
            snapshot,
            now=now,
            stalled_after_s=limit,
            effects=self.effects,
        )

    def _read(self) -> tuple[Snapshot, float, float]:
        return self.status.snapshot(), self.status.clock(), self.status.stalled_after_s


@dataclass(frozen=True)
class LoopProbes:
    """The probes of a component that is one loop (the projector, a branch worker): healthy
    while ``alive()``, ready while ``ready()``; ``details()`` adds to the body, ``page()``
    is its ``/metrics``."""

    alive: Callable[[], bool]
    ready: Callable[[], bool]
    details: Callable[[], dict[str, object]]
    page: Callable[[], str] | None = None
    """Its ``/metrics`` page (``None``: 404)."""

    def _body(self) -> dict[str, object]:
        return {"healthy": self.alive(), "ready": self.ready(), **self.details()}

    def healthz(self) -> Answer:
        body = self._body()
        return bool(body["healthy"]), body

    def readyz(self) -> Answer:
        body = self._body()
        return bool(body["ready"]), body

    def metrics(self) -> str | None:
        return None if self.page is None else self.page()
