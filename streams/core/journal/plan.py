"""The run's plan: which action comes next, its checkpoint, and the end of a recovery.

Order: the entry or exit first; then, for an entry with a protection spec whose receipt shows
exposure, the protection (sized from the venue's exposure report); then the notification, if
the proposal asked for one. An action lets the plan move on once it is settled or held, so a
held protection is still reported by the notification, and a failed notification leads back
to its own record only: nothing before it is ever repeated.

:func:`advance` takes one step at a time, each a decision (and so a transaction) of its own:
a checkpoint when the plan changed, then the open recovery's receipt when every action it
routed to lookup is resolved, then the next task's start (its intent, and in a later step its
attempt). A checkpoint is progress, never permission: the next task is attempted only through
:func:`~streams.core.journal.attempts.attempt_or_expire`, from the action's own journal entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas.events import RecoveryReceiptRecorded, RunCheckpointed
from streams.core.journal.attempts import (
    attempt_or_expire,
    notification_intent,
    notification_spec,
    protection_intent,
    protection_spec,
    query,
)
from streams.core.journal.batch import Batch
from streams.core.journal.lifecycle import UNRESOLVED_ATTEMPT, ActionStatus, is_done
from streams.core.journal.model import (
    ENTRY,
    NOTIFICATION,
    PROTECTION,
    ActionState,
    RunJournal,
    action_id_for,
    canonical_json,
    decimal_of,
    slot_of,
)

A = ActionStatus


@dataclass(frozen=True)
class Plan:
    """Saved observations of the run's settled (or held) actions, and what may come next."""

    completed: dict[str, dict[str, Any]]
    next_tasks: tuple[str, ...]

    @property
    def completed_json(self) -> str:
        return canonical_json(self.completed)


def plan_of(state: RunJournal) -> Plan:
    """The plan implied by the journal (see the module docstring for the order)."""
    primary = state.primary
    if primary is None or primary.intent is None:
        return Plan({}, ())
    completed = {a.action_id: summary(a) for a in state.actions if is_done(a.status)}
    for action_id in _followups(state, primary):
        action = state.action(action_id)
        if action is None or not is_done(action.status):
            return Plan(completed, (action_id,))
    return Plan(completed, ())


def _followups(state: RunJournal, primary: ActionState) -> list[str]:
    intent = primary.intent
    assert intent is not None
    steps = [primary.action_id]
    if not is_done(primary.status) or primary.invalid:
        return steps
    if primary.slot == ENTRY and protection_spec(intent) is not None and primary.executed() > 0:
        steps.append(action_id_for(state.run_id, PROTECTION))
    if notification_spec(intent) is not None:
        steps.append(action_id_for(state.run_id, NOTIFICATION))
    return steps


def summary(action: ActionState) -> dict[str, Any]:
    """What a checkpoint saves of a settled or held action."""
    saved: dict[str, Any] = {"status": action.status.value, "attempts": len(action.attempts)}
    receipt = action.receipt
    if receipt is not None:
        saved.update(
            outcome=receipt.outcome,
            venue_order_id=receipt.venue_order_id,
            executed_quantity=receipt.executed_quantity,
            observed_at_ms=receipt.observed_at_ms,
            source=receipt.source,
        )
    if action.hold is not None:
        saved.update(held_reason=action.hold.reason, held_since_ms=action.hold.held_since_ms)
    if action.exposure is not None:
        saved.update(sized_quantity=action.exposure.sized_quantity)
    return saved


def plan_changed(state: RunJournal, plan: Plan) -> bool:
    """Whether the last checkpoint no longer describes ``plan``."""
    last = state.checkpoint
    if state.primary is None:
        return False
    return last is None or (last.completed_json, last.next_tasks) != (
        plan.completed_json,
        plan.next_tasks,
    )


def recovery_due(state: RunJournal) -> bool:
    """Whether the open recovery is complete: none of the actions it routed to lookup is
    still an unresolved attempt (each has a receipt, a proven absence or a hold)."""
    recovery = state.recovery
    if recovery is None:
        return False
    for action_id in recovery.routed_to_lookup:
        action = state.action(action_id)
        if action is not None and action.status in UNRESOLVED_ATTEMPT:
            return False
    return True


def advance(batch: Batch) -> None:
    """Take the plan's next step, exactly one: a checkpoint when the plan changed; else the
    receipt of a finished recovery; else the start of the next task (its intent, its sizing
    query, or its attempt or expiry). Emits nothing when no step is pending."""
    state = batch.journal
    plan = plan_of(state)
    if plan_changed(state, plan):
        sequence = (state.checkpoint.sequence if state.checkpoint is not None else 0) + 1
        primary = state.primary
        assert primary is not None and primary.intent is not None
        batch.emit(
            RunCheckpointed(
                run_id=state.run_id,
                checkpoint_id=f"C{sequence}",
                sequence=sequence,
                workflow_revision=primary.intent.workflow_revision,
                completed_json=plan.completed_json,
                next_tasks=plan.next_tasks,
                checkpointed_at_ms=batch.now,
            )
        )
        return
    if recovery_due(state):
        _close_recovery(batch, plan)
        return
    for task in plan.next_tasks:
        _start(batch, task)


def _close_recovery(batch: Batch, plan: Plan) -> None:
    state = batch.journal
    recovery = state.recovery
    assert recovery is not None
    advanced_to = None
    if state.checkpoint is not None and state.checkpoint.checkpoint_id != recovery.checkpoint_id:
        advanced_to = state.checkpoint.checkpoint_id
    batch.emit(
        RecoveryReceiptRecorded(
            run_id=state.run_id,
            recovery_id=recovery.recovery_id,
            checkpoint_id=recovery.checkpoint_id,
            records_consulted=recovery.records_consulted,
            evidence_json="[" + ",".join(state.recovery_evidence) + "]",
            next_permitted=plan.next_tasks,
            checkpoint_advanced_to=advanced_to,
            held=tuple(a.action_id for a in state.actions if a.status is A.HELD),
            recorded_at_ms=batch.now,
        )
    )


def _start(batch: Batch, action_id: str) -> None:
    state = batch.journal
    primary = state.primary
    assert primary is not None and primary.intent is not None
    action = state.action(action_id)
    if action is None:
        if slot_of(action_id) == PROTECTION:
            batch.emit(query(primary.intent, None, "exposure", "protection_sizing", batch.now))
        else:
            batch.emit(notification_intent(state, primary.intent, batch.now))
        return
    if action.status is A.SIZING and action.intent is None and action.exposure is not None:
        sized = decimal_of(action.exposure.sized_quantity)
        if sized is not None and sized > 0:
            batch.emit(protection_intent(primary.intent, action, batch.now))
        return
    if action.status in (A.INTENDED, A.ABSENT):
        batch.emit(attempt_or_expire(state, action, batch.now, batch.owner))
