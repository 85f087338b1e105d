"""Every record type of the data contract, as one union: the events, then the commands.

The codec encodes and decodes exactly these; :mod:`schemas.registry` checks that each has its
``.avsc``.
"""

from __future__ import annotations

import typing

from schemas.commands import (
    AdmitDelivery,
    AuthorizeRerun,
    ExposureObserved,
    LookupAnswered,
    RecoverRun,
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
    ResolveHold,
    VenueAnswered,
)
from schemas.events import (
    ActionDispatched,
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AdmissionRecordEvicted,
    AttemptStarted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DeliveryDeduplicated,
    DeliveryRejected,
    DispatchRefused,
    DispatchRequested,
    DispatchWithdrawn,
    ExposureRecorded,
    HoldResolved,
    JournalEvicted,
    OccurrenceConflict,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RerunRejected,
    RunAdmitted,
    RunCheckpointed,
    RunStatusChanged,
    WorkflowRevised,
)

Record = (
    WorkflowRevised
    | RunAdmitted
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
    | CandidateAccepted
    | CandidateSuperseded
    | CandidateExpired
    | CandidateRejected
    | ActionDispatched
    | ActionIntended
    | AttemptStarted
    | ReceiptRecorded
    | ActionExpired
    | ActionHeld
    | HoldResolved
    | RunCheckpointed
    | QueryRequested
    | ExposureRecorded
    | RecoveryStarted
    | RecoveryReceiptRecorded
    | JournalEvicted
    | DispatchRefused
    | AdmitDelivery
    | AuthorizeRerun
    | RecoverRun
    | ResolveHold
    | VenueAnswered
    | LookupAnswered
    | ExposureObserved
    | ReportBranchStarted
    | ReportBranchCompleted
    | ReportBranchFailed
    | ReportBranchSkipped
)
"""Every record type of the contract: the events, then the commands."""

RECORD_CLASSES: tuple[type[Record], ...] = typing.get_args(Record)
"""The record classes, in the order of :data:`Record`."""
