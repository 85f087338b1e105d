"""What admission decides on (its commands) and what it may write (its events)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    DeliveryDeduplicated,
    DeliveryRejected,
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


@dataclass(frozen=True)
class RecordBranchReport:
    """Decide on a branch worker's report for (run, slot, attempt)."""

    report: BranchReport


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
)
