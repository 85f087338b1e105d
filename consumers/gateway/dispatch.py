"""The gate's ``ActionDispatched`` as the journal core's ``AcceptDispatch``.

The core does not depend on the gate's schema; this is the one place the two meet:

* the deadline is the gate's (``expires_at_ms``; an action the gate dispatched without one,
  an exit with no window, gets :data:`NO_DEADLINE_MS`, year 2286);
* the authorization is the approval the dispatch carries: the gate's ``requested_at_ms``
  (when every approving slot had completed) plus the gateway's approval validity, if one is
  configured, so an approval that lapsed while the gateway was down is never sent;
* ``generation`` is the scope's generation as a whole number (its value as a number, or the
  epoch milliseconds of a time), kept for the record;
* the venue timing policy is the gateway's, frozen into the intent.

A missing instrument or account makes the core hold the dispatch (``invalid_dispatch``).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from schemas.events import ActionDispatched
from streams.core.durations import parse_time
from streams.core.errors import InvalidValue
from streams.core.journal import AcceptDispatch, JournalPolicy

NO_DEADLINE_MS = 9_999_999_999_999


def accept_dispatch(
    dispatched: ActionDispatched,
    policy: JournalPolicy,
    approval_validity_ms: int | None,
    journal_origin: str,
) -> AcceptDispatch:
    """The core command for ``dispatched`` (see the module docstring)."""
    d = dispatched
    return AcceptDispatch(
        action_id=d.action_id,
        run_id=d.run_id,
        kind=d.kind,
        side=d.side,
        quantity=d.quantity,
        notional=d.notional,
        limit_price=d.limit_price,
        params_json=d.params_json,
        protection_json=d.protection_json,
        notification_json=d.notification_json,
        instrument=d.instrument or "",
        venue=d.venue or "",
        account=d.account or "",
        environment=d.environment,
        generation=generation_number(d.generation, d.generation_kind),
        expires_at_ms=NO_DEADLINE_MS if d.expires_at_ms is None else d.expires_at_ms,
        source_time_ms=d.source_time_ms,
        validity_source_time=d.validity_source_time,
        validity_window_ms=d.validity_window_ms,
        clock_uncertainty_ms=d.clock_uncertainty_ms,
        workflow_revision=d.workflow_revision,
        dispatched_at_ms=d.dispatched_at_ms,
        authorized_until_ms=None
        if approval_validity_ms is None
        else d.requested_at_ms + approval_validity_ms,
        policy=policy,
        journal_origin=journal_origin,
    )


def generation_number(generation: str, kind: str) -> int:
    """A generation as a whole number (0 if it cannot be read; the gate rejects those)."""
    try:
        if kind == "time":
            return parse_time(generation)
        return int(Decimal(generation).to_integral_value())
    except (InvalidValue, InvalidOperation, ValueError, OverflowError):
        return 0
