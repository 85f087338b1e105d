"""Answers from the venue become receipts: what is established, never more.

* A send answered ``unknown`` (or a rejection because the venue already has an open order
  with this client order id) is routed to lookup, never to another submission.
* "Not found" proves absence only for a lookup sent at or after the attempt's
  ``absence_after_ms`` (and a restored journal's fence); before that it is recorded as still
  unknown and the action is looked up again later.
* Evidence that contradicts what the journal established (another venue order id, an order
  found after its attempt was proven absent, rejected or expired) is recorded with
  ``conflict`` and the action is held for an operator.
* Later evidence resolves a hold that only ran out of budget (``HoldResolved`` ``evidence``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from schemas.commands import ExposureObserved, LookupAnswered, VenueAnswered
from schemas.events import ActionHeld, ExposureRecorded, HoldResolved, ReceiptRecorded
from streams.core.journal.attempts import query, sized_quantity
from streams.core.journal.batch import Batch
from streams.core.journal.lifecycle import UNRESOLVED_ATTEMPT, ActionStatus
from streams.core.journal.model import PROTECTION, ActionState, decimal_of, decimal_text

A = ActionStatus
DUPLICATE_ORDER = "duplicate_client_order_id"
"""``VenueAnswered.error_code`` for "an open order with this client order id exists"."""
BUDGET_EXHAUSTED = "reconciliation_budget_exhausted"
EXPOSURE_UNAVAILABLE = "exposure_unavailable"
CONFLICTING_EVIDENCE = "conflicting_evidence"
AUTO_RESOLVED = frozenset({BUDGET_EXHAUSTED, EXPOSURE_UNAVAILABLE})
"""Holds that later evidence may end; the others need an operator."""
FOUND = frozenset({"acknowledged", "filled", "rejected"})
VENUE_EVIDENCE = "venue-evidence"


@dataclass(frozen=True)
class Evidence:
    """One observation of an attempt, from a send answer or a lookup."""

    attempt: int
    outcome: str
    source: str
    observed_at_ms: int
    queried_at_ms: int | None = None
    venue_order_id: str | None = None
    status: str | None = None
    executed_quantity: str | None = None
    fills_json: str | None = None
    error_code: str | None = None
    detail: str | None = None


def on_venue_answered(batch: Batch, answer: VenueAnswered) -> None:
    """Apply the answer to a send (see the module docstring)."""
    action = _action_of(batch, answer.action_id, answer.client_order_id)
    if action is None or action.attempt is None or answer.attempt > action.attempt.attempt:
        return
    outcome, detail = answer.outcome, answer.detail
    if outcome == "rejected" and answer.error_code == DUPLICATE_ORDER:
        outcome = "unknown"
        detail = "the venue has an open order with this client order id: looking it up"
    evidence = Evidence(
        attempt=answer.attempt,
        outcome=outcome,
        source="send_response",
        observed_at_ms=answer.observed_at_ms,
        venue_order_id=answer.venue_order_id,
        status=answer.status,
        executed_quantity=answer.executed_quantity,
        fills_json=answer.fills_json,
        error_code=answer.error_code,
        detail=detail,
    )
    if answer.attempt < action.attempt.attempt:
        if outcome in ("acknowledged", "filled"):
            problem = f"attempt {answer.attempt} was proven absent, but its answer is {outcome}"
            _conflict(batch, action, evidence, problem)
        return
    if outcome == "not_sent":
        _absent(batch, action, replace(evidence, outcome="absent", source="gateway"))
    elif outcome == "unknown" and action.status is A.ATTEMPTED:
        batch.emit(receipt(action, evidence, batch.now))
        assert action.intent is not None
        now_reconciling = batch.journal.action(action.action_id)
        batch.emit(query(action.intent, now_reconciling, "order", "unknown_answer", batch.now))
    elif outcome in FOUND:
        apply_found(batch, action, evidence)


def on_lookup_answered(batch: Batch, answer: LookupAnswered) -> None:
    """Apply the answer to a lookup by client order id."""
    action = _action_of(batch, answer.action_id, answer.client_order_id)
    if action is None or answer.query_number > action.queries or answer.outcome == "unknown":
        return
    evidence = Evidence(
        attempt=action.attempt.attempt if action.attempt is not None else 0,
        outcome=answer.outcome,
        source="reconciliation",
        observed_at_ms=answer.observed_at_ms,
        queried_at_ms=answer.queried_at_ms,
        venue_order_id=answer.venue_order_id,
        status=answer.status,
        executed_quantity=answer.executed_quantity,
        fills_json=answer.fills_json,
        detail=answer.detail,
    )
    if answer.outcome in FOUND:
        if action.attempt is None:
            evidence = replace(evidence, detail="an order this journal has no attempt of")
        apply_found(batch, action, evidence)
        return
    if answer.outcome != "not_found":
        return
    threshold = action.absence_threshold(batch.journal.absence_not_before_ms)
    if answer.queried_at_ms >= threshold:
        _absent(batch, action, replace(evidence, outcome="absent"))
    elif action.status is A.RECONCILING:
        early = replace(
            evidence,
            outcome="unknown",
            status="not_found",
            detail=f"not found before {threshold}: absence is not proven yet; looking again",
        )
        batch.emit(receipt(action, early, batch.now))


def on_exposure_observed(batch: Batch, answer: ExposureObserved) -> None:
    """Record the exposure a protection is sized from (once), as a new observation."""
    state = batch.journal
    action = state.action(answer.action_id)
    exposure = decimal_of(answer.exposure_quantity)
    primary = state.primary
    if action is None or action.slot != PROTECTION or primary is None or primary.intent is None:
        return
    if answer.outcome != "observed" or exposure is None or action.exposure is not None:
        return
    if answer.query_number > action.queries:
        return
    if action.status is A.HELD and action.hold is not None:
        if action.hold.reason not in AUTO_RESOLVED:
            return
        _resolve_by_evidence(batch, action, f"exposure observed at {answer.observed_at_ms}")
    elif action.status is not A.SIZING:
        return
    executed = primary.net_executed(answer.asset)
    step = decimal_of(answer.lot_step)
    if step is not None and step <= 0:
        step = None  # a venue's nonsense step is no step: size as if it stated none
    batch.emit(
        ExposureRecorded(
            action_id=action.action_id,
            run_id=state.run_id,
            entry_action_id=primary.action_id,
            asset=answer.asset,
            exposure_quantity=answer.exposure_quantity or "0",
            entry_executed_quantity=decimal_text(executed),
            sized_quantity=sized_quantity(exposure, executed, step),
            queried_at_ms=answer.queried_at_ms,
            observed_at_ms=answer.observed_at_ms,
            recorded_at_ms=batch.now,
            lot_step=None if step is None else decimal_text(step),
        )
    )


def apply_found(batch: Batch, action: ActionState, evidence: Evidence) -> None:
    """Evidence that the venue has the order (acknowledged, filled or rejected)."""
    if action.status is A.HELD:
        if action.hold is None or action.hold.reason not in AUTO_RESOLVED:
            reason = action.hold.reason if action.hold is not None else "held"
            batch.emit(receipt(action, evidence, batch.now, conflict=f"recorded while {reason}"))
            return
        action = _resolve_by_evidence(batch, action, f"order {evidence.outcome} at the venue")
    if action.status in UNRESOLVED_ATTEMPT:
        batch.emit(receipt(action, evidence, batch.now))
        return
    problem = _contradiction(action, evidence)
    if problem is not None:
        _conflict(batch, action, evidence, problem)
    elif action.status is A.ACKNOWLEDGED and _progresses(action, evidence):
        batch.emit(receipt(action, evidence, batch.now))


def _contradiction(action: ActionState, evidence: Evidence) -> str | None:
    known = action.receipt
    linked = known.venue_order_id if known is not None else None
    if linked and evidence.venue_order_id and linked != evidence.venue_order_id:
        return (
            f"venue order {evidence.venue_order_id} has this client order id, but the "
            f"journal linked {linked}"
        )
    live = evidence.outcome in ("acknowledged", "filled")
    if live and action.status in (A.REJECTED, A.ABSENT, A.EXPIRED, A.CLOSED):
        return f"an order {evidence.outcome} at the venue for an action {action.status.value}"
    return None


def _progresses(action: ActionState, evidence: Evidence) -> bool:
    if evidence.outcome in ("filled", "rejected"):
        return True
    before = action.executed()
    after = decimal_of(evidence.executed_quantity)
    return after is not None and after > before


def _absent(batch: Batch, action: ActionState, evidence: Evidence) -> None:
    if action.status is A.HELD and action.hold is not None and action.hold.reason in AUTO_RESOLVED:
        action = _resolve_by_evidence(batch, action, "absence proven")
    if action.status in UNRESOLVED_ATTEMPT:
        batch.emit(receipt(action, evidence, batch.now))


def _resolve_by_evidence(batch: Batch, action: ActionState, why: str) -> ActionState:
    hold = action.hold
    assert hold is not None
    batch.emit(
        HoldResolved(
            action_id=action.action_id,
            run_id=batch.journal.run_id,
            slot=action.slot,
            resolution="evidence",
            resolved_by=VENUE_EVIDENCE,
            reason=why,
            held_reason=hold.reason,
            held_since_ms=hold.held_since_ms,
            resolved_at_ms=batch.now,
        )
    )
    resolved = batch.journal.action(action.action_id)
    assert resolved is not None
    return resolved


def _conflict(batch: Batch, action: ActionState, evidence: Evidence, problem: str) -> None:
    batch.emit(receipt(action, evidence, batch.now, conflict=problem))
    if action.status is not A.HELD:
        batch.emit(hold(action, CONFLICTING_EVIDENCE, problem, batch))


def hold(action: ActionState, reason: str, detail: str, batch: Batch) -> ActionHeld:
    """Hold ``action``: owned by the deciding gateway instance, since now."""
    return ActionHeld(
        action_id=action.action_id,
        run_id=batch.journal.run_id,
        slot=action.slot,
        attempt=action.attempt.attempt if action.attempt is not None else 0,
        owner=batch.owner.instance,
        reason=reason,
        detail=detail,
        held_since_ms=batch.now,
    )


def receipt(
    action: ActionState, evidence: Evidence, now: int, conflict: str | None = None
) -> ReceiptRecorded:
    """The receipt of ``evidence`` for ``action``'s current attempt (or the one it names)."""
    intent = action.intent
    assert intent is not None
    return ReceiptRecorded(
        action_id=action.action_id,
        run_id=intent.run_id,
        slot=action.slot,
        attempt=evidence.attempt,
        client_order_id=intent.client_order_id,
        outcome=evidence.outcome,
        venue_order_id=evidence.venue_order_id,
        status=evidence.status,
        executed_quantity=evidence.executed_quantity,
        fills_json=evidence.fills_json,
        source=evidence.source,
        queried_at_ms=evidence.queried_at_ms,
        observed_at_ms=evidence.observed_at_ms,
        conflict=conflict,
        error_code=evidence.error_code,
        detail=evidence.detail,
        recorded_at_ms=now,
    )


def _action_of(batch: Batch, action_id: str, client_order_id: str) -> ActionState | None:
    action = batch.journal.action(action_id)
    if action is None or action.intent is None:
        return None
    return action if action.intent.client_order_id == client_order_id else None
