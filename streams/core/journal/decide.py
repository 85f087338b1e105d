"""``decide(state, command, now, owner) -> events`` and ``next_due_ms(state)``.

**One step per decision.** A command records what it establishes (an intent, a receipt, a
hold, a recovery's start) and nothing more; everything that follows from it is a step of
:func:`~streams.core.journal.plan.advance`, taken by the next ``CheckTimers``, which
:func:`next_due_ms` makes due at once. So the intent, the dispatch-start, the receipt, the
checkpoint's advance and the next action's intent are each a decision of their own, and the
engine commits each in its own transaction: a crash can fall between any two of them, and
recovery is built (and tested) for every such point.

Timers (``CheckTimers``) first turn a send without an answer into a lookup, look again while
an outcome is unknown, and hold an action whose reconciliation budget is spent; only a timer
that found none of these due takes the plan's next step.
"""

from __future__ import annotations

from schemas.commands import (
    ExposureObserved,
    LookupAnswered,
    RecoverRun,
    ResolveHold,
    VenueAnswered,
)
from schemas.events import HoldResolved
from streams.core.journal.answers import (
    AUTO_RESOLVED,
    BUDGET_EXHAUSTED,
    EXPOSURE_UNAVAILABLE,
    hold,
    on_exposure_observed,
    on_lookup_answered,
    on_venue_answered,
)
from streams.core.journal.attempts import dispatch_intent, dispatch_problems, query
from streams.core.journal.batch import Batch
from streams.core.journal.commands import AcceptDispatch, CheckTimers, Command
from streams.core.journal.lifecycle import ActionStatus
from streams.core.journal.model import (
    INVALID_DISPATCH,
    LIVE_JOURNAL,
    PRIMARY_SLOTS,
    ActionState,
    JournalEvent,
    JournalPolicy,
    Owner,
    RunJournal,
    action_id_for,
)
from streams.core.journal.plan import advance, plan_changed, plan_of, recovery_due
from streams.core.journal.recovery import recover
from streams.core.journal.retention import evict_at_ms, eviction, refusal

A = ActionStatus
RESOLUTIONS = ("retry_lookup", "confirm_absent", "abandon")


def decide(
    state: RunJournal | None, command: Command, now: int, owner: Owner
) -> list[JournalEvent]:
    """The journal records ``command`` causes for the run at ``now`` (epoch ms UTC).

    ``owner`` is the gateway instance deciding and the consumer-group generation it owns the
    run's partition in; it is written on attempts, recoveries and holds. Never raises for bad
    commands: an answer that does not match the journal is ignored, an unusable dispatch is
    held. Apply the returned events in order with :func:`~streams.core.journal.evolve`; the
    effects they ask for are :func:`~streams.core.journal.effects_of` of them.
    """
    batch = Batch(state, now, owner)
    if isinstance(command, AcceptDispatch):
        _accept(batch, command)
    elif state is None:
        return []
    elif isinstance(command, CheckTimers):
        _timers(batch)
        if not batch.events and state.primary is not None:
            advance(batch)
        if not batch.events and command.retention_ms is not None:
            evicted = eviction(state, now, command.retention_ms)
            if evicted is not None:
                batch.emit(evicted)
    elif command.run_id != state.run_id:
        return []
    elif isinstance(command, RecoverRun):
        recover(batch, command)
    elif isinstance(command, ResolveHold):
        _resolve(batch, command)
    elif isinstance(command, VenueAnswered):
        on_venue_answered(batch, command)
    elif isinstance(command, LookupAnswered):
        on_lookup_answered(batch, command)
    elif isinstance(command, ExposureObserved):
        on_exposure_observed(batch, command)
    return batch.events


def next_due_ms(state: RunJournal | None, retention_ms: int | None = None) -> int | None:
    """When ``CheckTimers`` next has something to do for ``state`` (epoch ms), or ``None``.

    Due at once (the state's last record time) when a plan step is pending (a checkpoint to
    write, a recovery to close, a task to start); otherwise the earliest send-answer deadline
    or next lookup. Held and settled actions have no timer. With ``retention_ms`` a finished
    run is due when it may be evicted (:mod:`~streams.core.journal.retention`). Re-read it
    after every evolve.
    """
    if state is None or state.primary is None:
        return None
    plan = plan_of(state)
    due: list[int] = []
    if plan_changed(state, plan) or recovery_due(state):
        due.append(state.updated_at_ms)
    if any(_startable(state.action(task)) for task in plan.next_tasks):
        due.append(state.updated_at_ms)
    for action in state.actions:
        at = _timer_at(state, action)
        if at is not None:
            due.append(at)
    if not due and retention_ms is not None:
        evict_at = evict_at_ms(state, plan, retention_ms)
        if evict_at is not None:
            due.append(evict_at)
    return min(due) if due else None


def _startable(action: ActionState | None) -> bool:
    """Whether the plan's next step for ``action`` can be taken at once."""
    if action is None or action.status in (A.INTENDED, A.ABSENT):
        return True
    return action.status is A.SIZING and action.exposure is not None and action.intent is None


def _timer_at(state: RunJournal, action: ActionState) -> int | None:
    policy = _policy(state, action)
    if action.status is A.ATTEMPTED and action.attempt is not None:
        return action.attempt.attempted_at_ms + policy.send_timeout_ms
    if action.status is A.RECONCILING or (action.status is A.SIZING and action.exposure is None):
        last = action.last_query_at_ms or action.reconcile_since_ms or state.updated_at_ms
        return last + policy.lookup_interval_ms
    return None


def _policy(state: RunJournal, action: ActionState) -> JournalPolicy:
    intent = action.intent or (state.primary.intent if state.primary is not None else None)
    assert intent is not None
    return JournalPolicy.of(intent)


def _timers(batch: Batch) -> None:
    now = batch.now
    for snapshot in batch.journal.actions:
        state = batch.journal
        action = state.action(snapshot.action_id)
        at = _timer_at(state, action) if action is not None else None
        if action is None or at is None or now < at:
            continue
        policy = _policy(state, action)
        primary = state.primary
        assert primary is not None and primary.intent is not None
        since = action.reconcile_since_ms or now
        if action.status is A.ATTEMPTED:
            assert action.intent is not None
            batch.emit(query(action.intent, action, "order", "no_answer", now))
        elif action.status is A.SIZING:
            if now >= since + policy.reconciliation_budget_ms:
                detail = "the venue did not report the exposure within the budget"
                batch.emit(hold(action, EXPOSURE_UNAVAILABLE, detail, batch))
            else:
                batch.emit(query(primary.intent, action, "exposure", "look_again", now))
        else:
            threshold = action.absence_threshold(state.absence_not_before_ms)
            hold_at = max(
                since + policy.reconciliation_budget_ms, threshold + policy.lookup_interval_ms
            )
            assert action.intent is not None
            if now >= hold_at:
                detail = "the outcome is still unknown after the reconciliation budget"
                batch.emit(hold(action, BUDGET_EXHAUSTED, detail, batch))
            else:
                batch.emit(query(action.intent, action, "order", "look_again", now))


def _resolve(batch: Batch, command: ResolveHold) -> None:
    action = batch.journal.action(command.action_id)
    if action is None or action.status is not A.HELD or action.hold is None:
        return
    reason, resolution = action.hold.reason, command.resolution
    unestablished = action.receipt is None or action.receipt.outcome == "absent"
    allowed = {
        "abandon": True,
        "retry_lookup": reason in AUTO_RESOLVED,
        "confirm_absent": reason == BUDGET_EXHAUSTED and unestablished,
    }
    if not allowed.get(resolution, False):
        return
    batch.emit(
        HoldResolved(
            action_id=action.action_id,
            run_id=batch.journal.run_id,
            slot=action.slot,
            resolution=resolution,
            resolved_by=command.operator,
            reason=command.reason,
            held_reason=reason,
            held_since_ms=action.hold.held_since_ms,
            resolved_at_ms=batch.now,
        )
    )
    if resolution == "retry_lookup":
        resolved = batch.journal.action(action.action_id)
        primary = batch.journal.primary
        assert resolved is not None and primary is not None and primary.intent is not None
        kind = "exposure" if resolved.status is A.SIZING else "order"
        intent = resolved.intent or primary.intent
        batch.emit(query(intent, resolved, kind, "operator_retry", batch.now))


def _accept(batch: Batch, command: AcceptDispatch) -> None:
    state = batch.state
    if state is not None and (state.run_id != command.run_id or state.primary is not None):
        return  # one entry or exit per run; a repeated dispatch is answered by the journal
    # On the live journal a run without state was never journalled or was evicted: one read
    # that long after its horizon is refused. A restored journal may have lost an attempt of
    # it, so there it is journalled and looked up, however old.
    live = command.journal_origin == LIVE_JOURNAL
    refused = refusal(command, batch.now) if state is None and live else None
    if refused is not None:
        batch.emit(refused)
        return
    if command.kind not in PRIMARY_SLOTS:
        return
    if command.action_id != action_id_for(command.run_id, command.kind):
        return
    batch.emit(dispatch_intent(command, batch.now))
    problems = dispatch_problems(command)
    if problems:
        action = batch.journal.action(command.action_id)
        assert action is not None
        batch.emit(hold(action, INVALID_DISPATCH, "; ".join(problems), batch))
    elif command.journal_origin != LIVE_JOURNAL:
        restore = RecoverRun(
            request_id=f"{command.action_id}.restored",
            run_id=command.run_id,
            requested_by=batch.owner.instance,
            reason="dispatch older than a restore of the journal from an older point",
            requested_at_ms=batch.now,
            journal_origin=command.journal_origin,
        )
        recover(batch, restore)
