"""``evolve(state, event) -> state``: the journal of one run as a fold of its records.

Raises :class:`~streams.core.errors.IllegalTransition` for a move the action lifecycle
forbids and :class:`~streams.core.errors.InconsistentHistory` for a record that contradicts
the state (wrong run, unknown action, an attempt number out of order, a recovery receipt
without its recovery). ``decide`` never produces either: seeing one means the journal was
written by something else or is corrupted; inspect the run's records before restarting.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeAlias

from schemas.events import (
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
from streams.core.errors import InconsistentHistory
from streams.core.journal.lifecycle import ACTION, ActionStatus
from streams.core.journal.model import (
    INVALID_DISPATCH,
    PROTECTION,
    ActionState,
    JournalEvent,
    RunJournal,
    action_id_for,
    canonical_json,
    decimal_of,
    slot_of,
)

A = ActionStatus
RECEIPT_TARGET = {
    "acknowledged": A.ACKNOWLEDGED,
    "filled": A.FILLED,
    "rejected": A.REJECTED,
    "unknown": A.RECONCILING,
    "absent": A.ABSENT,
}
"""The status a receipt moves its action to, by outcome."""
DEFINITIVE = frozenset({"acknowledged", "filled", "rejected", "absent"})

ActionRecord: TypeAlias = (
    ActionIntended
    | AttemptStarted
    | ReceiptRecorded
    | ActionExpired
    | ActionHeld
    | HoldResolved
    | QueryRequested
    | ExposureRecorded
)


def evolve(state: RunJournal | None, event: JournalEvent) -> RunJournal | None:
    """Apply one journal record to the run's state (``None``: the run's first record).

    ``JournalEvicted`` ends the state (``None``: the engine deletes the key); a
    ``DispatchRefused`` changes nothing (a refused run has no state)."""
    if isinstance(event, DispatchRefused):
        return state
    if isinstance(event, JournalEvicted):
        if state is None or event.run_id != state.run_id:
            raise InconsistentHistory(f"{event.run_id}: eviction of a run without its journal")
        return None
    if state is None:
        state = RunJournal(run_id=event.run_id)
    elif event.run_id != state.run_id:
        raise InconsistentHistory(
            f"{type(event).__name__} of run {event.run_id} applied to run {state.run_id}"
        )
    # One replace per record: evolve runs twice per record (in decide and in the engine).
    at = max(state.updated_at_ms, _time(event))
    if isinstance(event, RunCheckpointed):
        return _checkpointed(state, event, at)
    if isinstance(event, RecoveryStarted):
        return dataclasses.replace(
            state,
            recovery=event,
            recovery_evidence=(),
            recoveries=state.recoveries + 1,
            absence_not_before_ms=_later(state.absence_not_before_ms, event.absence_not_before_ms),
            updated_at_ms=at,
        )
    if isinstance(event, RecoveryReceiptRecorded):
        if state.recovery is None or state.recovery.recovery_id != event.recovery_id:
            raise InconsistentHistory(
                f"{state.run_id}: receipt of recovery {event.recovery_id}, which is not open"
            )
        return dataclasses.replace(state, recovery=None, recovery_evidence=(), updated_at_ms=at)
    return _evolve_action(state, event, at)


def _evolve_action(state: RunJournal, event: ActionRecord, at: int) -> RunJournal:
    if isinstance(event, ActionIntended):
        action = _intended(state, event)
    elif isinstance(event, QueryRequested):
        action = _queried(state, event)
    else:
        action = _need(state, event.action_id, event)
        if isinstance(event, AttemptStarted):
            action = _attempted(state, action, event)
        elif isinstance(event, ReceiptRecorded):
            action = _received(action, event)
        elif isinstance(event, ActionExpired):
            action = _move(action, A.EXPIRED)
        elif isinstance(event, ActionHeld):
            held_from = action.held_from if action.status is A.HELD else action.status
            action = _move(
                action,
                A.HELD,
                hold=event,
                held_from=held_from,
                invalid=action.invalid or event.reason == INVALID_DISPATCH,
            )
        elif isinstance(event, HoldResolved):
            action = _resolved(action, event)
        elif isinstance(event, ExposureRecorded):
            sized = decimal_of(event.sized_quantity)
            target = A.NOT_NEEDED if sized is None or sized <= 0 else A.SIZING
            action = _move(action, target, exposure=event)
        else:  # pragma: no cover - every JournalEvent is handled above
            raise InconsistentHistory(f"unexpected journal record {type(event).__name__}")
    since, evidence = state.since_checkpoint, state.recovery_evidence
    ref = record_ref(event)
    if ref is not None:
        since = (*since, ref)
    if state.recovery is not None:
        observation = _observation(event)
        if observation is not None:
            evidence = (*evidence, observation)
    return dataclasses.replace(
        state,
        actions=_put(state.actions, action),
        since_checkpoint=since,
        recovery_evidence=evidence,
        updated_at_ms=at,
    )


def _intended(state: RunJournal, event: ActionIntended) -> ActionState:
    if event.action_id != action_id_for(event.run_id, event.slot):
        raise InconsistentHistory(f"action id {event.action_id} is not run id + slot {event.slot}")
    existing = state.action(event.action_id)
    if existing is None:
        return ActionState(
            event.action_id, event.slot, ACTION.transition(None, A.INTENDED), intent=event
        )
    return _move(existing, A.INTENDED, intent=event)


def _queried(state: RunJournal, event: QueryRequested) -> ActionState:
    action = state.action(event.action_id)
    if action is None:
        if event.query != "exposure" or slot_of(event.action_id) != PROTECTION:
            raise InconsistentHistory(f"{event.action_id}: {event.query} query before its intent")
        action = ActionState(event.action_id, PROTECTION, ACTION.transition(None, A.SIZING))
    if event.query_number != action.queries + 1:
        raise InconsistentHistory(
            f"{event.action_id}: query {event.query_number} after query {action.queries}"
        )
    if action.status is A.HELD:
        target = A.HELD
    else:
        target = A.SIZING if event.query == "exposure" else A.RECONCILING
    starts_window = action.status in (A.INTENDED, A.ABSENT) or action.reconcile_since_ms is None
    return _move(
        action,
        target,
        queries=event.query_number,
        last_query_at_ms=event.requested_at_ms,
        reconcile_since_ms=event.requested_at_ms if starts_window else action.reconcile_since_ms,
    )


def _attempted(state: RunJournal, action: ActionState, event: AttemptStarted) -> ActionState:
    if action.intent is None:
        raise InconsistentHistory(f"{event.action_id}: attempt without an intent")
    if event.attempt != len(action.attempts) + 1:
        raise InconsistentHistory(
            f"{event.action_id}: attempt {event.attempt} after {len(action.attempts)} attempts"
        )
    return _move(
        action,
        A.ATTEMPTED,
        attempts=(*action.attempts, event),
        receipt=None,
        last_query_at_ms=None,
        reconcile_since_ms=event.attempted_at_ms,
    )


def _received(action: ActionState, event: ReceiptRecorded) -> ActionState:
    current = action.attempt.attempt if action.attempt is not None else 0
    observed_at = event.observed_at_ms
    if event.conflict is not None:
        # Contradicting evidence is kept, never applied: the hold that follows decides.
        if event.attempt > current or action.status in (A.SIZING, A.NOT_NEEDED, A.INTENDED):
            raise InconsistentHistory(f"{event.action_id}: conflict receipt in {action.status}")
        return dataclasses.replace(action, last_observed_at_ms=observed_at)
    if event.attempt != current:
        raise InconsistentHistory(
            f"{event.action_id}: receipt for attempt {event.attempt}, current is {current}"
        )
    target = RECEIPT_TARGET.get(event.outcome)
    if target is None:
        raise InconsistentHistory(f"{event.action_id}: unknown receipt outcome {event.outcome!r}")
    if event.outcome not in DEFINITIVE:
        return _move(action, target, last_observed_at_ms=observed_at)
    verified = action.verified_at_ms
    if event.source == "reconciliation" and event.queried_at_ms is not None:
        verified = max(verified or 0, event.queried_at_ms)
    return _move(
        action, target, last_observed_at_ms=observed_at, receipt=event, verified_at_ms=verified
    )


def _resolved(action: ActionState, event: HoldResolved) -> ActionState:
    if event.resolution == "abandon":
        target = A.CLOSED
    elif event.resolution == "confirm_absent":
        target = A.ABSENT
    else:
        target = A.SIZING if action.held_from is A.SIZING else A.RECONCILING
    changes: dict[str, object] = {"hold": None, "held_from": None}
    if event.resolution == "confirm_absent":
        changes["verified_at_ms"] = event.resolved_at_ms
    elif event.resolution == "retry_lookup":
        changes.update(reconcile_since_ms=event.resolved_at_ms, last_query_at_ms=None)
    return _move(action, target, **changes)


def _checkpointed(state: RunJournal, event: RunCheckpointed, at: int) -> RunJournal:
    previous = state.checkpoint.sequence if state.checkpoint is not None else 0
    if event.sequence <= previous:
        raise InconsistentHistory(
            f"{state.run_id}: checkpoint {event.checkpoint_id} after sequence {previous}"
        )
    return dataclasses.replace(state, checkpoint=event, since_checkpoint=(), updated_at_ms=at)


def record_ref(event: JournalEvent) -> str | None:
    """How a recovery names a journal record (``None``: a step, not an action record)."""
    if isinstance(event, ActionIntended | ActionExpired | ActionHeld | ExposureRecorded):
        return f"{type(event).__name__}:{event.action_id}"
    if isinstance(event, AttemptStarted):
        return f"AttemptStarted:{event.action_id}#{event.attempt}"
    if isinstance(event, ReceiptRecorded):
        if event.outcome in DEFINITIVE or event.source == "send_response" or event.conflict:
            return f"ReceiptRecorded:{event.action_id}#{event.attempt}:{event.outcome}"
        return None
    if isinstance(event, HoldResolved):
        return f"HoldResolved:{event.action_id}:{event.resolution}"
    return None


def _observation(event: JournalEvent) -> str | None:
    if isinstance(event, ReceiptRecorded):
        return canonical_json(
            {
                "action_id": event.action_id,
                "attempt": event.attempt,
                "observation": "order",
                "outcome": event.outcome,
                "venue_order_id": event.venue_order_id,
                "status": event.status,
                "executed_quantity": event.executed_quantity,
                "source": event.source,
                "conflict": event.conflict,
                "queried_at_ms": event.queried_at_ms,
                "observed_at_ms": event.observed_at_ms,
            }
        )
    if isinstance(event, ExposureRecorded):
        return canonical_json(
            {
                "action_id": event.action_id,
                "observation": "exposure",
                "asset": event.asset,
                "exposure_quantity": event.exposure_quantity,
                "queried_at_ms": event.queried_at_ms,
                "observed_at_ms": event.observed_at_ms,
            }
        )
    return None


def _need(state: RunJournal, action_id: str, event: ActionRecord) -> ActionState:
    action = state.action(action_id)
    if action is None:
        raise InconsistentHistory(
            f"{state.run_id}: {type(event).__name__} for {action_id}, which has no journal entry"
        )
    return action


def _move(action: ActionState, target: ActionStatus, **changes: Any) -> ActionState:
    return dataclasses.replace(action, status=ACTION.transition(action.status, target), **changes)


def _put(actions: tuple[ActionState, ...], action: ActionState) -> tuple[ActionState, ...]:
    if all(a.action_id != action.action_id for a in actions):
        return (*actions, action)
    return tuple(action if a.action_id == action.action_id else a for a in actions)


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _time(event: ActionRecord | RunCheckpointed | RecoveryStarted | RecoveryReceiptRecorded) -> int:
    if isinstance(event, ActionIntended):
        return event.intended_at_ms
    if isinstance(event, AttemptStarted):
        return event.attempted_at_ms
    if isinstance(event, ReceiptRecorded | ExposureRecorded):
        return event.recorded_at_ms
    if isinstance(event, ActionExpired):
        return event.checked_at_ms
    if isinstance(event, ActionHeld):
        return event.held_since_ms
    if isinstance(event, HoldResolved):
        return event.resolved_at_ms
    if isinstance(event, RunCheckpointed):
        return event.checkpointed_at_ms
    if isinstance(event, QueryRequested):
        return event.requested_at_ms
    if isinstance(event, RecoveryStarted):
        return event.started_at_ms
    return event.recorded_at_ms
