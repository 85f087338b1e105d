"""What a component's probes answer (``sluicegate/health.py`` serves them over HTTP): light,
so a command builds its probes without loading the HTTP server."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from streams.engine.status import InstanceStatus, Snapshot, describe, healthy, ready

Answer = tuple[bool, dict[str, object]]
"""Whether a probe passes, and the body it answers with."""


class Probes(Protocol):
    def healthz(self) -> Answer: ...

    def readyz(self) -> Answer: ...


@dataclass(frozen=True)
class EngineProbes:
    """An engine instance's probes, from its :class:`InstanceStatus`."""

    status: InstanceStatus

    def healthz(self) -> Answer:
        snapshot, now, limit = self._read()
        return healthy(snapshot, now, limit), describe(snapshot, now, limit)

    def readyz(self) -> Answer:
        snapshot, now, limit = self._read()
        return ready(snapshot), describe(snapshot, now, limit)

    def _read(self) -> tuple[Snapshot, float, float]:
        return self.status.snapshot(), self.status.clock(), self.status.stalled_after_s


@dataclass(frozen=True)
class LoopProbes:
    """The probes of a component that is one loop (the projector, a branch worker): healthy
    while ``alive()``, ready while ``ready()``; ``details()`` adds to the body."""

    alive: Callable[[], bool]
    ready: Callable[[], bool]
    details: Callable[[], dict[str, object]]

    def _body(self) -> dict[str, object]:
        return {"healthy": self.alive(), "ready": self.ready(), **self.details()}

    def healthz(self) -> Answer:
        body = self._body()
        return bool(body["healthy"]), body

    def readyz(self) -> Answer:
        body = self._body()
        return bool(body["ready"]), body
