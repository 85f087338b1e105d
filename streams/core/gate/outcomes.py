"""Builders of the gate's events from the state's candidates (no decisions here).

Every outcome copies the candidate's deadline policy and its retained times (source,
enqueue, dequeue, proposal) so that each event explains itself without a join.
"""

from __future__ import annotations

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
)
from streams.core.gate.rules import candidate_deadline
from streams.core.gate.state import Candidate, Track


def candidate_of(proposal: CandidateProposed, now: int) -> Candidate:
    """The candidate a proposal describes, held to the gate's deadline for it."""
    p = proposal
    return Candidate(
        candidate_id=p.candidate_id,
        run_id=p.run_id,
        admission_key=p.admission_key,
        subscription=p.subscription,
        environment=p.environment,
        kind=p.kind,
        side=p.side,
        quantity=p.quantity,
        notional=p.notional,
        limit_price=p.limit_price,
        max_slippage_bps=p.max_slippage_bps,
        params_json=p.params_json,
        protection_json=p.protection_json,
        notification_json=p.notification_json,
        reassessment_of=p.reassessment_of,
        venue=p.venue,
        instrument=p.instrument,
        account=p.account,
        generation=p.generation,
        generation_kind=p.generation_kind,
        expires_at_ms=candidate_deadline(p),
        source_time_ms=p.source_time_ms,
        validity_source_time=p.validity_source_time,
        validity_window_ms=p.validity_window_ms,
        clock_uncertainty_ms=p.clock_uncertainty_ms,
        workflow_revision=p.workflow_revision,
        exit_window_ms=p.exit_window_ms,
        enqueued_at_ms=p.enqueued_at_ms,
        dequeued_at_ms=p.dequeued_at_ms,
        proposed_at_ms=p.proposed_at_ms,
        accepted_at_ms=now,
    )


def accepted(scope_key: str, c: Candidate, previous: Track | None) -> CandidateAccepted:
    return CandidateAccepted(
        candidate_id=c.candidate_id,
        run_id=c.run_id,
        admission_key=c.admission_key,
        scope_key=scope_key,
        subscription=c.subscription,
        environment=c.environment,
        kind=c.kind,
        side=c.side,
        quantity=c.quantity,
        notional=c.notional,
        limit_price=c.limit_price,
        max_slippage_bps=c.max_slippage_bps,
        params_json=c.params_json,
        protection_json=c.protection_json,
        notification_json=c.notification_json,
        reassessment_of=c.reassessment_of,
        venue=c.venue,
        instrument=c.instrument,
        account=c.account,
        generation=c.generation,
        generation_kind=c.generation_kind,
        expires_at_ms=c.expires_at_ms,
        source_time_ms=c.source_time_ms,
        validity_source_time=c.validity_source_time,
        validity_window_ms=c.validity_window_ms,
        clock_uncertainty_ms=c.clock_uncertainty_ms,
        workflow_revision=c.workflow_revision,
        exit_window_ms=c.exit_window_ms,
        enqueued_at_ms=c.enqueued_at_ms,
        dequeued_at_ms=c.dequeued_at_ms,
        proposed_at_ms=c.proposed_at_ms,
        previous_candidate_id=None if previous is None else previous.candidate_id,
        previous_generation=None if previous is None else previous.generation,
        accepted_at_ms=c.accepted_at_ms,
    )


def superseded(
    scope_key: str,
    c: Candidate,
    reason: str,
    *,
    current_id: str,
    current_generation: str,
    now: int,
) -> CandidateSuperseded:
    return CandidateSuperseded(
        candidate_id=c.candidate_id,
        run_id=c.run_id,
        admission_key=c.admission_key,
        scope_key=scope_key,
        kind=c.kind,
        generation=c.generation,
        generation_kind=c.generation_kind,
        reason=reason,
        current_candidate_id=current_id,
        current_generation=current_generation,
        expires_at_ms=c.expires_at_ms,
        source_time_ms=c.source_time_ms,
        validity_source_time=c.validity_source_time,
        validity_window_ms=c.validity_window_ms,
        clock_uncertainty_ms=c.clock_uncertainty_ms,
        workflow_revision=c.workflow_revision,
        exit_window_ms=c.exit_window_ms,
        enqueued_at_ms=c.enqueued_at_ms,
        dequeued_at_ms=c.dequeued_at_ms,
        proposed_at_ms=c.proposed_at_ms,
        decided_at_ms=now,
    )


def expired(
    scope_key: str,
    c: Candidate,
    reason: str,
    *,
    expires_at_ms: int | None,
    clock_uncertainty_ms: int,
    requested_at_ms: int | None,
    now: int,
) -> CandidateExpired:
    return CandidateExpired(
        candidate_id=c.candidate_id,
        run_id=c.run_id,
        admission_key=c.admission_key,
        scope_key=scope_key,
        kind=c.kind,
        generation=c.generation,
        generation_kind=c.generation_kind,
        reason=reason,
        current_candidate_id=c.candidate_id,
        current_generation=c.generation,
        expires_at_ms=expires_at_ms,
        source_time_ms=c.source_time_ms,
        validity_source_time=c.validity_source_time,
        validity_window_ms=c.validity_window_ms,
        clock_uncertainty_ms=clock_uncertainty_ms,
        workflow_revision=c.workflow_revision,
        exit_window_ms=c.exit_window_ms,
        enqueued_at_ms=c.enqueued_at_ms,
        dequeued_at_ms=c.dequeued_at_ms,
        proposed_at_ms=c.proposed_at_ms,
        requested_at_ms=requested_at_ms,
        decided_at_ms=now,
    )


def rejected(
    p: CandidateProposed, reason: str, detail: str, current: Track | None, now: int
) -> CandidateRejected:
    return CandidateRejected(
        candidate_id=p.candidate_id,
        run_id=p.run_id,
        admission_key=p.admission_key,
        scope_key=p.scope_key,
        kind=p.kind,
        generation=p.generation,
        generation_kind=p.generation_kind,
        reason=reason,
        detail=detail,
        current_generation=None if current is None else current.generation,
        expires_at_ms=candidate_deadline(p),
        source_time_ms=p.source_time_ms,
        validity_source_time=p.validity_source_time,
        validity_window_ms=p.validity_window_ms,
        clock_uncertainty_ms=p.clock_uncertainty_ms,
        workflow_revision=p.workflow_revision,
        exit_window_ms=p.exit_window_ms,
        enqueued_at_ms=p.enqueued_at_ms,
        dequeued_at_ms=p.dequeued_at_ms,
        proposed_at_ms=p.proposed_at_ms,
        decided_at_ms=now,
    )


def withdrawn(
    scope_key: str, c: Candidate, reason: str, detail: str, now: int
) -> CandidateRejected:
    """The end of a pending candidate its run withdrew (an approval failed or was skipped)."""
    return CandidateRejected(
        candidate_id=c.candidate_id,
        run_id=c.run_id,
        admission_key=c.admission_key,
        scope_key=scope_key,
        kind=c.kind,
        generation=c.generation,
        generation_kind=c.generation_kind,
        reason=reason,
        detail=detail,
        current_generation=c.generation,
        expires_at_ms=c.expires_at_ms,
        source_time_ms=c.source_time_ms,
        validity_source_time=c.validity_source_time,
        validity_window_ms=c.validity_window_ms,
        clock_uncertainty_ms=c.clock_uncertainty_ms,
        workflow_revision=c.workflow_revision,
        exit_window_ms=c.exit_window_ms,
        enqueued_at_ms=c.enqueued_at_ms,
        dequeued_at_ms=c.dequeued_at_ms,
        proposed_at_ms=c.proposed_at_ms,
        decided_at_ms=now,
    )


def dispatched(
    scope_key: str,
    c: Candidate,
    *,
    approvals: tuple[str, ...],
    requested_at_ms: int,
    expires_at_ms: int | None,
    clock_uncertainty_ms: int,
    now: int,
) -> ActionDispatched:
    return ActionDispatched(
        action_id=c.candidate_id,
        run_id=c.run_id,
        admission_key=c.admission_key,
        scope_key=scope_key,
        subscription=c.subscription,
        environment=c.environment,
        kind=c.kind,
        side=c.side,
        quantity=c.quantity,
        notional=c.notional,
        limit_price=c.limit_price,
        max_slippage_bps=c.max_slippage_bps,
        params_json=c.params_json,
        protection_json=c.protection_json,
        notification_json=c.notification_json,
        reassessment_of=c.reassessment_of,
        venue=c.venue,
        instrument=c.instrument,
        account=c.account,
        generation=c.generation,
        generation_kind=c.generation_kind,
        approvals=approvals,
        expires_at_ms=expires_at_ms,
        source_time_ms=c.source_time_ms,
        validity_source_time=c.validity_source_time,
        validity_window_ms=c.validity_window_ms,
        clock_uncertainty_ms=clock_uncertainty_ms,
        workflow_revision=c.workflow_revision,
        exit_window_ms=c.exit_window_ms,
        enqueued_at_ms=c.enqueued_at_ms,
        dequeued_at_ms=c.dequeued_at_ms,
        proposed_at_ms=c.proposed_at_ms,
        requested_at_ms=requested_at_ms,
        dispatched_at_ms=now,
    )


def candidate_from_accepted(e: CandidateAccepted) -> Candidate:
    """The pending candidate an acceptance records (the inverse of :func:`accepted`)."""
    return Candidate(
        candidate_id=e.candidate_id,
        run_id=e.run_id,
        admission_key=e.admission_key,
        subscription=e.subscription,
        environment=e.environment,
        kind=e.kind,
        side=e.side,
        quantity=e.quantity,
        notional=e.notional,
        limit_price=e.limit_price,
        max_slippage_bps=e.max_slippage_bps,
        params_json=e.params_json,
        protection_json=e.protection_json,
        notification_json=e.notification_json,
        reassessment_of=e.reassessment_of,
        venue=e.venue,
        instrument=e.instrument,
        account=e.account,
        generation=e.generation,
        generation_kind=e.generation_kind,
        expires_at_ms=e.expires_at_ms,
        source_time_ms=e.source_time_ms,
        validity_source_time=e.validity_source_time,
        validity_window_ms=e.validity_window_ms,
        clock_uncertainty_ms=e.clock_uncertainty_ms,
        workflow_revision=e.workflow_revision,
        exit_window_ms=e.exit_window_ms,
        enqueued_at_ms=e.enqueued_at_ms,
        dequeued_at_ms=e.dequeued_at_ms,
        proposed_at_ms=e.proposed_at_ms,
        accepted_at_ms=e.accepted_at_ms,
    )
