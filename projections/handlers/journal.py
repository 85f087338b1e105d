"""Rows of the action journal's records (the gateway's): for now the event log only."""

from __future__ import annotations

from projections.model import RowOp
from projections.rows import Source, handles
from schemas.commands import (
    ExposureObserved,
    LookupAnswered,
    RecoverRun,
    ResolveHold,
    VenueAnswered,
)
from schemas.events import (
    ActionExpired,
    ActionHeld,
    ActionIntended,
    AttemptStarted,
    ExposureRecorded,
    HoldResolved,
    QueryRequested,
    ReceiptRecorded,
    RecoveryReceiptRecorded,
    RecoveryStarted,
    RunCheckpointed,
)


@handles(
    ActionIntended,
    AttemptStarted,
    ReceiptRecorded,
    ActionExpired,
    ActionHeld,
    HoldResolved,
    RunCheckpointed,
    QueryRequested,
    ExposureRecorded,
    RecoveryStarted,
    RecoveryReceiptRecorded,
    RecoverRun,
    ResolveHold,
    VenueAnswered,
    LookupAnswered,
    ExposureObserved,
)
def _journal(source: Source, r: object) -> list[RowOp]:
    # The action journal's records reach the event log (and so run timelines) only; its
    # tables and the expired_before_send / unresolved_attempt / holds counts come with the
    # gateway's projection.
    return []
