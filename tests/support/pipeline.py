"""Admission and the gate together, in memory: what admission hands on, the gate decides.

:class:`Pipeline` drives the real admission core (:class:`tests.support.core.Processor`) and
the real gate core (:class:`tests.support.gate.Gate`) with a controllable clock: every
``CandidateProposed`` / ``DispatchRequested`` / ``DispatchWithdrawn`` admission writes is
decided by the gate at the time the test says it reaches it (by default, at once).
"""

from __future__ import annotations

from typing import Any

import orjson

from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    CandidateProposed,
    DispatchRequested,
    DispatchWithdrawn,
    RunAdmitted,
    WorkflowRevised,
)
from streams.core.admission import AdmissionEvent, Admit, RecordBranchReport
from streams.core.gate import GateEvent
from tests.support.core import Processor, delivery
from tests.support.gate import Gate

GATE_INPUTS = (CandidateProposed, DispatchRequested, DispatchWithdrawn)
WORKER = "worker-1"


def entry(**overrides: Any) -> dict[str, object]:
    """A proposing slot's result: an entry proposal (the README's example)."""
    proposal: dict[str, object] = {
        "kind": "entry",
        "side": "buy",
        "quantity": "0.010",
        "limit_price": "97000.5",
        "params": {"rule": "breakout-v1"},
    }
    proposal.update(overrides)
    return {"proposal": proposal}


class Pipeline:
    """Admission, then the gate; ``held`` keeps gate inputs a test delivers later."""

    def __init__(self, wf: WorkflowRevised, *, restart_every_step: bool = False) -> None:
        self.wf = wf
        self.admission = Processor(restart_every_step=restart_every_step)
        self.gate = Gate(restart_every_step=restart_every_step)
        self.handed: list[AdmissionEvent] = []
        self.held: list[AdmissionEvent] = []

    def admit(self, payload: dict[str, object], delivery_id: str, now: int) -> RunAdmitted:
        events = self.admission.handle(
            Admit(delivery(self.wf, payload, delivery_id, now), self.wf), now
        )
        admitted = [e for e in events if isinstance(e, RunAdmitted)]
        assert admitted, events
        return admitted[0]

    def started(self, run: RunAdmitted, slot: str, now: int, attempt: int = 1) -> list[Any]:
        claim = ReportBranchStarted(run.run_id, run.admission_key, slot, attempt, WORKER, now)
        return self._report(claim, now)

    def completed(
        self,
        run: RunAdmitted,
        slot: str,
        now: int,
        result: dict[str, object] | None = None,
        *,
        attempt: int = 1,
        hold: bool = False,
    ) -> list[Any]:
        text = orjson.dumps(result or {}, option=orjson.OPT_SORT_KEYS).decode()
        claim = ReportBranchCompleted(
            run.run_id, run.admission_key, slot, attempt, WORKER, text, now
        )
        return self._report(claim, now, hold=hold)

    def failed(self, run: RunAdmitted, slot: str, now: int, error: str = "boom") -> list[Any]:
        claim = ReportBranchFailed(run.run_id, run.admission_key, slot, 1, WORKER, error, now)
        return self._report(claim, now)

    def skipped(self, run: RunAdmitted, slot: str, now: int, reason: str) -> list[Any]:
        claim = ReportBranchSkipped(run.run_id, run.admission_key, slot, 1, WORKER, reason, now)
        return self._report(claim, now)

    def _report(self, claim: Any, now: int, *, hold: bool = False) -> list[Any]:
        events = self.admission.handle(RecordBranchReport(claim), now)
        inputs = [e for e in events if isinstance(e, GATE_INPUTS)]
        self.handed.extend(inputs)
        if hold:
            self.held.extend(inputs)
            return events
        out: list[Any] = list(events)
        for event in inputs:
            out.extend(self.decide(event, now))
        return out

    def decide(self, event: AdmissionEvent, now: int) -> list[GateEvent]:
        """The gate's decision on one of admission's hand-offs at ``now``."""
        if isinstance(event, CandidateProposed):
            return self.gate.propose(event, now)
        if isinstance(event, DispatchRequested):
            return self.gate.request(event, now)
        assert isinstance(event, DispatchWithdrawn), event
        return self.gate.withdraw(event, now)

    def release(self, now: int) -> list[GateEvent]:
        """Deliver the held hand-offs to the gate at ``now``, in order."""
        held, self.held = self.held, []
        out: list[GateEvent] = []
        for event in held:
            out.extend(self.decide(event, now))
        return out
