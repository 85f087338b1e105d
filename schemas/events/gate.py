"""The gate's events: candidates per decision scope and the dispatches they lead to.

Gate inputs (written by admission to ``candidates``, keyed by scope key) and gate outputs
(``gate-decisions`` keyed by scope key; ``ActionDispatched`` on ``actions`` keyed by run id).
Every one carries the deadline copy (``expires_at_ms`` and its policy) and the times an auditor
needs to explain the outcome. Rules: ``streams.core.gate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.direct_init import direct_init


@direct_init
@dataclass(frozen=True)
class CandidateProposed:
    """The proposing slot of a run proposed an action candidate for its decision scope.

    ``candidate_id`` is the action id ``<run_id>.<kind>``. ``generation`` is the scope's
    sequence value in canonical form, compared as ``generation_kind`` (``time`` or
    ``number``), never as text and never by arrival. ``expires_at_ms`` is the run's
    authoritative deadline; a non-entry kind is bounded at the gate only by
    ``exit_window_ms`` (from ``source_time_ms``), none when that is null. Venue, instrument
    and account come from the run's payload, never from the proposal.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    subscription: str
    environment: str
    kind: str
    side: str
    quantity: str | None
    notional: str | None
    limit_price: str | None
    max_slippage_bps: str | None
    params_json: str
    protection_json: str | None
    notification_json: str | None
    reassessment_of: str | None
    venue: str | None
    instrument: str | None
    account: str | None
    generation: str
    generation_kind: str
    expires_at_ms: int
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int


@direct_init
@dataclass(frozen=True)
class DispatchRequested:
    """Every approving slot of the run completed: dispatch the candidate if it still may.

    Carries its own copy of the candidate's deadline (``expires_at_ms``, null when the
    action has none); the gate uses the earlier of this copy and the authoritative one.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    kind: str
    approvals: tuple[str, ...]
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    requested_at_ms: int


@direct_init
@dataclass(frozen=True)
class DispatchWithdrawn:
    """An approving slot of the run failed or was skipped: its candidate can never be sent.

    ``reason`` is ``approval_failed`` or ``approval_skipped``; ``slot`` names the approving
    slot and ``detail`` its error or skip reason. The gate ends a pending candidate with
    ``CandidateRejected`` of the same reason at once, rather than at its deadline.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    kind: str
    slot: str
    reason: str
    detail: str
    withdrawn_at_ms: int


@direct_init
@dataclass(frozen=True)
class CandidateAccepted:
    """The candidate became the current generation of its kind in its decision scope.

    ``expires_at_ms`` is the deadline the gate holds it to (null: a non-entry action without
    a window). ``previous_candidate_id``/``previous_generation`` name the current candidate
    it replaced, if any. Acceptance is not permission to send: that is ``ActionDispatched``.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    subscription: str
    environment: str
    kind: str
    side: str
    quantity: str | None
    notional: str | None
    limit_price: str | None
    max_slippage_bps: str | None
    params_json: str
    protection_json: str | None
    notification_json: str | None
    reassessment_of: str | None
    venue: str | None
    instrument: str | None
    account: str | None
    generation: str
    generation_kind: str
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int
    previous_candidate_id: str | None
    previous_generation: str | None
    accepted_at_ms: int


@direct_init
@dataclass(frozen=True)
class CandidateSuperseded:
    """Terminal: a newer (or first, for ties) generation of the same kind is current.

    Reasons: ``newer_generation`` (it was pending and ``current_candidate_id`` was just
    accepted), ``older_than_current`` (it arrived after a newer one) and
    ``same_generation`` (another occurrence with an equal sequence was accepted first).
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    kind: str
    generation: str
    generation_kind: str
    reason: str
    current_candidate_id: str
    current_generation: str
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class CandidateExpired:
    """Terminal: the candidate's deadline passed before it could be dispatched.

    Reasons: ``expired_before_send`` (a dispatch request failed the check
    ``now + clock_uncertainty < expires_at``; ``requested_at_ms`` is that request's time)
    and ``deadline_passed`` (the deadline passed with no request, or before the proposal
    reached the gate). ``expires_at_ms`` is the deadline that was applied.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    kind: str
    generation: str
    generation_kind: str
    reason: str
    current_candidate_id: str
    current_generation: str
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int
    requested_at_ms: int | None
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class CandidateRejected:
    """Terminal: the proposal cannot be ordered or sent as it stands; nothing is dispatched.

    Reasons: ``invalid_candidate_id``, ``invalid_generation``, ``generation_kind_mismatch``,
    ``invalid_deadline``, ``invalid_parameters``; ``detail`` says what is wrong. A pending
    candidate whose approval failed or was skipped (``DispatchWithdrawn``) ends here too,
    with reason ``approval_failed`` or ``approval_skipped``.
    """

    candidate_id: str
    run_id: str
    admission_key: str
    scope_key: str
    kind: str
    generation: str
    generation_kind: str
    reason: str
    detail: str
    current_generation: str | None
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int
    decided_at_ms: int


@direct_init
@dataclass(frozen=True)
class ActionDispatched:
    """Terminal at the gate: the action may be sent; the gateway takes it from here.

    Committed only if, at ``dispatched_at_ms``, the candidate was the current pending one
    of its kind and ``dispatched_at_ms + clock_uncertainty_ms < expires_at_ms`` (the
    earlier of the authoritative deadline and the request's copy; null: no deadline).
    This commit is the final supersession cutoff; the gateway re-checks the deadline
    immediately before sending. ``action_id`` is the candidate id.
    """

    action_id: str
    run_id: str
    admission_key: str
    scope_key: str
    subscription: str
    environment: str
    kind: str
    side: str
    quantity: str | None
    notional: str | None
    limit_price: str | None
    max_slippage_bps: str | None
    params_json: str
    protection_json: str | None
    notification_json: str | None
    reassessment_of: str | None
    venue: str | None
    instrument: str | None
    account: str | None
    generation: str
    generation_kind: str
    approvals: tuple[str, ...]
    expires_at_ms: int | None
    source_time_ms: int
    validity_source_time: str
    validity_window_ms: int
    clock_uncertainty_ms: int
    workflow_revision: int
    exit_window_ms: int | None
    enqueued_at_ms: int
    dequeued_at_ms: int | None
    proposed_at_ms: int
    requested_at_ms: int
    dispatched_at_ms: int
