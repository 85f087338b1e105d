"""How long the gateway keeps a finished run's journal, and why a repeat of it is harmless.

A dispatch's **send horizon** is the latest time it could ever be attempted: the attempt
re-checks ``now + clock_uncertainty < expires_at`` and the same against ``authorized_until``,
so after ``min(expires_at, authorized_until) - clock_uncertainty`` nothing of that dispatch
is sent, however often it is read again. The protection and the notification exist only once
the entry was attempted, so they have no horizon of their own.

**Refusal.** A dispatch for a run the live journal has no state of, read
:data:`REFUSAL_AFTER_MS` (1 h) or more after its send horizon, is refused
(``DispatchRefused(beyond_horizon)``) before anything is journalled. The rule is the core's
own, not a setting: nothing an operator changes later can make it looser for a run evicted
earlier. A dispatch read with a journal restored from an older point (``journal_origin``
not ``live``) is never refused: the backup may have lost an attempt of that run, so it is
journalled and looked up at the venue before anything may be sent, however old it is.

**Eviction.** A finished run (every action settled, no open recovery, the checkpoint current
and naming no next task) is evicted (``JournalEvicted``, its state deleted, its changelog key
tombstoned) once the retention has passed since both its *deadline* horizon
(``expires_at - clock_uncertainty``) and its last record. The retention is at least
:data:`MIN_RETENTION_MS` (2 h), so every repeat of an evicted run's dispatch, read after the
eviction, is at least an hour past its send horizon, and refused: an evicted run is never
journalled again, never intended, never sent. The eviction waits for the deadline, not the
approval: ``authorized_until`` comes from the gateway's approval validity setting when the
dispatch is read, and may be later for a repeat than it was for the run.

What that rests on: the clock of an instance reading a repeat is behind the clock of the
instance that evicted the run by less than ``retention - REFUSAL_AFTER_MS`` (at least 1 h).
A run whose dispatch has no deadline (an exit without a window) is kept for ever.
"""

from __future__ import annotations

from schemas.events import DispatchRefused, JournalEvicted
from streams.core.journal.commands import AcceptDispatch
from streams.core.journal.lifecycle import SETTLED
from streams.core.journal.model import RunJournal
from streams.core.journal.plan import Plan, plan_changed, plan_of

BEYOND_HORIZON = "beyond_horizon"
"""``DispatchRefused.reason``: read :data:`REFUSAL_AFTER_MS` or more after its send horizon."""
REFUSAL_AFTER_MS = 3_600_000
"""How long after its send horizon a dispatch of an unknown run is still journalled (and,
being past its deadline or approval, expires unsent)."""
MIN_RETENTION_MS = 2 * REFUSAL_AFTER_MS
"""The shortest retention: an hour of clock difference between gateway hosts is tolerated."""


def send_horizon_ms(
    expires_at_ms: int, authorized_until_ms: int | None, uncertainty_ms: int
) -> int:
    """The latest time a dispatch with these limits could be attempted (epoch ms)."""
    limit = (
        expires_at_ms if authorized_until_ms is None else min(expires_at_ms, authorized_until_ms)
    )
    return limit - uncertainty_ms


def evict_at_ms(state: RunJournal, plan: Plan, retention_ms: int) -> int | None:
    """When ``state`` (whose plan is ``plan``) may be evicted, or ``None`` while the run is
    not finished. A retention below :data:`MIN_RETENTION_MS` counts as that."""
    if not _finished(state, plan):
        return None
    return max(_deadline_horizon(state), state.updated_at_ms) + _kept(retention_ms)


def eviction(state: RunJournal, now: int, retention_ms: int) -> JournalEvicted | None:
    """The run's ``JournalEvicted`` if it is due at ``now``, else ``None``."""
    due = evict_at_ms(state, plan_of(state), retention_ms)
    if due is None or now < due:
        return None
    return JournalEvicted(
        run_id=state.run_id,
        actions=tuple(f"{a.action_id}={a.status.value}" for a in state.actions),
        deadline_horizon_ms=_deadline_horizon(state),
        last_record_at_ms=state.updated_at_ms,
        retention_ms=_kept(retention_ms),
        evicted_at_ms=now,
    )


def refusal(command: AcceptDispatch, now: int) -> DispatchRefused | None:
    """The ``DispatchRefused`` of a dispatch of an unknown run read beyond its horizon (the
    caller applies it to the live journal only)."""
    horizon = send_horizon_ms(
        command.expires_at_ms, command.authorized_until_ms, command.clock_uncertainty_ms
    )
    if now < horizon + REFUSAL_AFTER_MS:
        return None
    return DispatchRefused(
        action_id=command.action_id,
        run_id=command.run_id,
        kind=command.kind,
        reason=BEYOND_HORIZON,
        expires_at_ms=command.expires_at_ms,
        authorized_until_ms=command.authorized_until_ms,
        clock_uncertainty_ms=command.clock_uncertainty_ms,
        send_horizon_ms=horizon,
        dispatched_at_ms=command.dispatched_at_ms,
        refused_at_ms=now,
    )


def _finished(state: RunJournal, plan: Plan) -> bool:
    """Every action settled, no open recovery, the checkpoint current and naming no task."""
    primary = state.primary
    if primary is None or primary.intent is None or state.recovery is not None:
        return False
    if any(action.status not in SETTLED for action in state.actions):
        return False
    return not plan.next_tasks and not plan_changed(state, plan)


def _deadline_horizon(state: RunJournal) -> int:
    """The run's deadline less its clock uncertainty (the run has an intent)."""
    primary = state.primary
    assert primary is not None and primary.intent is not None
    return primary.intent.expires_at_ms - primary.intent.clock_uncertainty_ms


def _kept(retention_ms: int) -> int:
    return max(retention_ms, MIN_RETENTION_MS)
