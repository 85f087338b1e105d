"""What the journal core decides on.

The operator commands and the effect answers are the contract records of
:mod:`schemas.commands` (``RecoverRun``, ``ResolveHold``, ``VenueAnswered``,
``LookupAnswered``, ``ExposureObserved``). Two more exist only inside the gateway:

* :class:`AcceptDispatch` mirrors the gate's dispatch of an entry or exit, so that the core
  does not depend on the gate's schema (the gateway app adapts one to the other);
* :class:`CheckTimers` fires what :func:`~streams.core.journal.next_due_ms` said was due.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from schemas.commands import (
    ExposureObserved,
    LookupAnswered,
    RecoverRun,
    ResolveHold,
    VenueAnswered,
)
from streams.core.journal.model import LIVE_JOURNAL, JournalPolicy


@dataclass(frozen=True)
class AcceptDispatch:
    """The gate dispatched an entry or exit: record its intent and attempt it.

    Fields mirror ``ActionDispatched`` (see ACTIONS.md): ``kind`` is ``entry`` or ``exit`` and
    ``action_id`` must be ``f"{run_id}.{kind}"``; exactly one of ``quantity`` / ``notional``
    (positive decimal strings); ``protection_json`` / ``notification_json`` are the proposal's
    follow-up specs (canonical JSON objects) or ``None``. ``authorized_until_ms`` is the
    authorization's own validity (``None``: only the deadline). ``policy`` is the gateway's
    venue timing policy, frozen into the intent. A dispatch the core cannot use is recorded
    and held (``invalid_dispatch``), never sent.

    ``journal_origin``: ``live``, or (like ``RecoverRun``'s) anything else when the gateway's
    journal was restored from an older point and the dispatch is older than that restore: the
    run may have been attempted in the lost part of the journal, so its action is looked up
    before it may be attempted. (A run unknown to the restored journal is indistinguishable
    from a new one; only the shell knows the journal is a restored one.)

    A dispatch of a run without a journal read an hour or more after its send horizon is
    refused, never journalled (:mod:`~streams.core.journal.retention`).
    """

    action_id: str
    run_id: str
    kind: str
    side: str
    quantity: str | None
    notional: str | None
    limit_price: str | None
    params_json: str
    protection_json: str | None
    notification_json: str | None
    instrument: str
    venue: str
    account: str
    environment: str
    generation: int
    expires_at_ms: int
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    dispatched_at_ms: int
    authorized_until_ms: int | None = None
    policy: JournalPolicy = field(default_factory=JournalPolicy)
    journal_origin: str = LIVE_JOURNAL


@dataclass(frozen=True)
class CheckTimers:
    """Fire whatever is due at ``now``: missing send answers, lookups, holds, plan steps,
    and (with ``retention_ms``) the eviction of a run finished longer ago than that."""

    retention_ms: int | None = None


Command: TypeAlias = (
    AcceptDispatch
    | CheckTimers
    | RecoverRun
    | ResolveHold
    | VenueAnswered
    | LookupAnswered
    | ExposureObserved
)
"""Every command :func:`~streams.core.journal.decide` accepts."""
