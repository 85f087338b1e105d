"""Events: facts Sluicegate has recorded, named in the past tense, one module per area.

Every class here is mirrored 1:1 by ``schemas/avro/<ClassName>.avsc`` (record name = class
name, namespace ``sluicegate``, one Avro field per dataclass field, in the same order).
Times are epoch milliseconds UTC (``*_ms``); optional fields default to ``None``.

An event, once released, is never changed incompatibly: new fields get defaults, and
``tests/unit/test_schema_compat.py`` decodes a fixture written with every released version.

:mod:`.admission` (workflow revisions, runs, delivery outcomes), :mod:`.branches` (slots and
their accepted results), :mod:`.gate` (candidates and dispatches) and :mod:`.journal` (the
action journal). Every class is importable from here: ``from schemas.events import RunAdmitted``.
"""

from schemas.events.admission import (
    AdmissionRecordEvicted,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
    WorkflowRevised,
)
from schemas.events.branches import (
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
)
from schemas.events.gate import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
    DispatchWithdrawn,
)
from schemas.events.journal import (
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    DispatchRefused,
    ExposureRecorded,
    HoldResolved,
    JournalEvicted,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)

__all__ = [
    "ActionDispatched",
    "ActionExpired",
    "ActionHeld",
    "ActionIntended",
    "AdmissionRecordEvicted",
    "AttemptStarted",
    "BranchCompleted",
    "BranchFailed",
    "BranchLaunched",
    "BranchRelaunched",
    "BranchSkipped",
    "BranchStarted",
    "CandidateAccepted",
    "CandidateExpired",
    "CandidateProposed",
    "CandidateRejected",
    "CandidateSuperseded",
    "DeliveryDeduplicated",
    "DeliveryRejected",
    "DispatchRefused",
    "DispatchRequested",
    "DispatchWithdrawn",
    "ExposureRecorded",
    "HoldResolved",
    "JournalEvicted",
    "OccurrenceConflict",
    "QueryRequested",
    "ReceiptRecorded",
    "RecoveryReceiptRecorded",
    "RecoveryStarted",
    "RerunRejected",
    "RunAdmitted",
    "RunCheckpointed",
    "RunStatusChanged",
    "WorkflowRevised",
]
