"""What admission decides on (its commands) and what it may write (its events)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from schemas.commands import (
    AdmitDelivery,
    AuthorizeRerun,
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    CandidateProposed,
    DeliveryDeduplicated,
    DeliveryRejected,
    DispatchRequested,
    DispatchWithdrawn,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
    WorkflowRevised,
)


@dataclass(frozen=True)
class Admit:
    """Decide on one delivery. ``workflow`` is the destination's newest revision, or None."""

    delivery: AdmitDelivery
    workflow: WorkflowRevised | None


@dataclass(frozen=True)
class Rerun:
    """Decide on an authorized rerun. ``workflow`` is the newest revision, or None."""

    request: AuthorizeRerun
    workflow: WorkflowRevised | None


BranchReport: TypeAlias = BranchStarted | BranchCompleted | BranchFailed | BranchSkipped
"""A branch result admission accepted: the fact it writes to ``runs``."""
WorkerReport: TypeAlias = (
    ReportBranchStarted | ReportBranchCompleted | ReportBranchFailed | ReportBranchSkipped
)
"""A branch worker's claim about (run, slot, attempt), read from ``branch-results``."""


@dataclass(frozen=True)
class RecordBranchReport:
    """Decide on a branch worker's claim for (run, slot, attempt)."""

    report: WorkerReport


_FACT_OF: dict[type, type] = {
    ReportBranchStarted: BranchStarted,
    ReportBranchCompleted: BranchCompleted,
    ReportBranchFailed: BranchFailed,
    ReportBranchSkipped: BranchSkipped,
}
_CLAIM_OF: dict[type, type] = {fact: claim for claim, fact in _FACT_OF.items()}
_NAMES: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in (*_FACT_OF, *_CLAIM_OF)
}
_T = TypeVar("_T")


def _as(target: type[_T], value: object) -> _T:
    # A claim and its fact have the same fields in the same order (a unit test holds them to it).
    return target(*(getattr(value, name) for name in _NAMES[type(value)]))


def accepted(report: WorkerReport) -> BranchReport:
    """The fact admission writes when it accepts ``report``: the same fields, as an event."""
    fact: BranchReport = _as(_FACT_OF[type(report)], report)
    return fact


def claim_of(legacy: BranchReport) -> WorkerReport:
    """A worker's record written before 0.2.0 (workers then wrote the fact classes to
    ``branch-results``), read as the claim it was."""
    claim: WorkerReport = _as(_CLAIM_OF[type(legacy)], legacy)
    return claim


@dataclass(frozen=True)
class CheckTimers:
    """Fire whatever is due at ``now``: slot timeouts, then (when all is finished) eviction."""


Command: TypeAlias = Admit | Rerun | RecordBranchReport | CheckTimers


AdmissionEvent: TypeAlias = (
    RunAdmitted
    | BranchLaunched
    | BranchRelaunched
    | BranchStarted
    | BranchCompleted
    | BranchFailed
    | BranchSkipped
    | RunStatusChanged
    | DeliveryDeduplicated
    | OccurrenceConflict
    | DeliveryRejected
    | RerunRejected
    | AdmissionRecordEvicted
    | CandidateProposed
    | DispatchRequested
    | DispatchWithdrawn
)
