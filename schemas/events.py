"""Events: facts Sluicegate has recorded, named in the past tense.

Every class here is mirrored 1:1 by ``schemas/avro/<ClassName>.avsc`` (record name = class
name, namespace ``sluicegate``, one Avro field per dataclass field, in the same order).
Times are epoch milliseconds UTC (``*_ms``); optional fields default to ``None``.

An event, once released, is never changed incompatibly: new fields get defaults, and
``tests/unit/test_schema_compat.py`` decodes a fixture written with every released version.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkflowRevised:
    """A workflow destination (subscription x environment) got a new revision.

    Lives on the compacted ``workflows`` topic keyed by ``subscription/environment``; the
    newest revision per key is the one new occurrences are admitted under. A run keeps the
    revision it was admitted with (frozen context).

    v2 adds ``branch_attempts``, ``clock_uncertainty_ms``, ``identity_case_sensitive_fields``
    and ``retention_history``: every retention period still able to matter, oldest first, as
    ``"<from epoch ms>:<retention ms>"`` (the last one is ``retention_ms``), so that a
    delivery with no admission record is judged against the smallest retention in effect
    since its source time. v1 records decode with 3 attempts, 250 ms, no case-sensitive
    fields and an empty history (meaning: ``retention_ms`` since ``applied_at_ms``).
    """

    subscription: str
    environment: str
    revision: int
    slots: tuple[str, ...]
    branch_timeout_ms: int
    retention_ms: int
    identity_event_id_field: str | None
    identity_derived_fields: tuple[str, ...]
    immutable_fields: tuple[str, ...]
    validity_source_time: str
    validity_window_ms: int
    scope_fields: tuple[str, ...]
    scope_sequence_field: str | None
    auth_token_env: str | None
    auth_hmac_secret_env: str | None
    definition_digest: str
    applied_at_ms: int
    # v2
    branch_attempts: int = 3
    clock_uncertainty_ms: int = 250
    identity_case_sensitive_fields: tuple[str, ...] = ()
    retention_history: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunAdmitted:
    """An occurrence was admitted for a destination: the one durable run it gets.

    ``run_id`` is deterministic (admission key + rerun number). ``workflow_revision`` is the
    frozen context. ``expires_at_ms`` is the absolute deadline from the source time and the
    validity policy; nothing downstream may extend it. ``branch_attempts`` and
    ``clock_uncertainty_ms`` (v3) are frozen with the run: the most launches per slot and the
    clock uncertainty of its deadline policy. Older records decode with 3 and 250 ms.
    """

    run_id: str
    admission_key: str
    delivery_id: str
    subscription: str
    environment: str
    workflow_revision: int
    source: str
    event_id: str | None
    content_digest: str
    source_time_ms: int
    expires_at_ms: int
    validity_source_time: str
    validity_window_ms: int
    slots: tuple[str, ...]
    scope_key: str | None
    sequence: str | None
    payload_json: str
    rerun_number: int
    rerun_of: str | None
    rerun_reason: str | None
    admitted_at_ms: int
    # v2: the retention horizon the run was admitted under, so that eviction can be derived
    # from the events alone. Absent (None) in v1 records: those are never evicted.
    retention_ms: int | None = None
    # v3
    branch_attempts: int = 3
    clock_uncertainty_ms: int = 250


@dataclass(frozen=True)
class BranchLaunched:
    """Branch work for one (run, slot) was queued; written with ``RunAdmitted`` atomically."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    timeout_at_ms: int
    payload_json: str
    launched_at_ms: int


@dataclass(frozen=True)
class BranchRelaunched:
    """A slot that did not finish within the branch timeout was queued again, same run."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    workflow_revision: int
    expires_at_ms: int
    timeout_at_ms: int
    payload_json: str
    reason: str
    relaunched_at_ms: int


@dataclass(frozen=True)
class BranchStarted:
    """A branch worker took the task for (run, slot, attempt). Reported by the worker."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    started_at_ms: int


@dataclass(frozen=True)
class BranchCompleted:
    """A branch finished with a result. Reported by the worker; idempotent per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    result_json: str
    completed_at_ms: int


@dataclass(frozen=True)
class BranchFailed:
    """A branch gave up with an error. Reported by the worker; idempotent per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    error: str
    failed_at_ms: int


@dataclass(frozen=True)
class BranchSkipped:
    """A branch decided not to act (e.g. expired at dequeue). Idempotent per (run, slot)."""

    run_id: str
    admission_key: str
    slot: str
    attempt: int
    worker: str
    reason: str
    skipped_at_ms: int


@dataclass(frozen=True)
class RunStatusChanged:
    """The run's status moved (pending -> running -> completed | skipped | failed)."""

    run_id: str
    admission_key: str
    previous_status: str
    status: str
    changed_at_ms: int


@dataclass(frozen=True)
class DeliveryDeduplicated:
    """A delivery of an already-admitted occurrence; answered with the existing run.

    ``reason`` is the run's state when the copy arrived: ``in_flight`` (pending or running),
    ``completed``, ``skipped`` or ``failed``.
    """

    delivery_id: str
    admission_key: str
    run_id: str
    reason: str
    received_at_ms: int
    decided_at_ms: int


@dataclass(frozen=True)
class OccurrenceConflict:
    """Same occurrence identity, different immutable content. The original run is untouched."""

    delivery_id: str
    admission_key: str
    run_id: str
    original_digest: str
    conflicting_digest: str
    differing_fields: tuple[str, ...]
    received_at_ms: int
    decided_at_ms: int


@dataclass(frozen=True)
class DeliveryRejected:
    """A delivery that gets no run, with a machine-readable reason.

    Reasons (:mod:`streams.core.reasons`): ``beyond_horizon``, ``unknown_subscription``,
    ``missing_identity_fields``, ``invalid_field``, ``identity_mismatch``,
    ``source_time_in_future``, ``payload_too_large``, ``cannot_be_recorded``.
    """

    delivery_id: str
    admission_key: str
    subscription: str
    environment: str
    reason: str
    detail: str
    received_at_ms: int
    decided_at_ms: int


@dataclass(frozen=True)
class RerunRejected:
    """An authorized rerun request that could not be honoured.

    Reasons: ``unknown_run``, ``duplicate_request``, ``missing_reason``, ``invalid_request``
    (id or reason too long), ``rerun_limit`` (the occurrence has the most reruns kept).
    """

    request_id: str
    admission_key: str
    run_id: str
    reason: str
    decided_at_ms: int


@dataclass(frozen=True)
class AdmissionRecordEvicted:
    """An occurrence's admission record left the processor's state after its horizon.

    Written only once ``source time + retention + margin`` has passed, so any later copy is
    already beyond the horizon and is rejected rather than admitted again.
    """

    admission_key: str
    run_ids: tuple[str, ...]
    evicted_at_ms: int


# --------------------------------------------------------------------------- the gate
#
# Gate inputs (written by admission to ``candidates``, keyed by scope key) and gate outputs
# (``gate-decisions`` keyed by scope key; ``ActionDispatched`` on ``actions`` keyed by run
# id). Every one carries the deadline copy (``expires_at_ms`` and its policy) and the times
# an auditor needs to explain the outcome. Rules: ``streams.core.gate``.


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


@dataclass(frozen=True)
class CandidateRejected:
    """Terminal: the proposal cannot be ordered or sent as it stands; nothing is dispatched.

    Reasons: ``invalid_candidate_id``, ``invalid_generation``, ``generation_kind_mismatch``,
    ``invalid_deadline``, ``invalid_parameters``; ``detail`` says what is wrong.
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


# --------------------------------------------------------------------------- action journal
#
# Written by the gateway (streams.core.journal) to the ``journal`` topic, keyed by run id.
# Action ids are ``f"{run_id}.{slot}"`` (slot: entry, exit, protection, notification); the
# client order id is the same for every attempt of one action. Quantities and prices are
# decimal strings; structured values are canonical JSON in ``*_json`` fields.


@dataclass(frozen=True)
class ActionIntended:
    """The journal recorded an action's exact authorized parameters, before any attempt.

    For an entry or exit this is the gate's dispatch; a protection is intended only once the
    entry's receipt shows exposure, sized from the exposure the venue reported
    (``sized_from_json``); a notification once the actions before it are settled or held.
    The deadline copy and the venue timing policy are frozen here: recovery re-checks against
    these values, never against newer settings.
    """

    action_id: str
    run_id: str
    slot: str
    client_order_id: str
    side: str | None
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
    authorized_until_ms: int | None
    depends_on: str | None
    sized_from_json: str | None
    recv_window_ms: int
    quiet_period_ms: int
    send_timeout_ms: int
    lookup_interval_ms: int
    reconciliation_budget_ms: int
    followup_window_ms: int
    dispatched_at_ms: int | None
    intended_at_ms: int


@dataclass(frozen=True)
class AttemptStarted:
    """Dispatch-start: committed before the request may leave; nothing is sent without it.

    ``request_json`` is exactly what the gateway sends; ``attempted_at_ms`` is the request's
    ``timestamp`` and ``recv_window_ms`` its ``recvWindow``, so the venue refuses it after
    ``attempted_at_ms + recv_window_ms``. From this record on, the attempt counts as possibly
    effective until a receipt resolves it; "not found" proves absence only when the lookup was
    made at or after ``absence_after_ms``.
    """

    action_id: str
    run_id: str
    slot: str
    attempt: int
    client_order_id: str
    venue: str
    account: str
    instrument: str
    request_json: str
    attempted_at_ms: int
    recv_window_ms: int
    send_by_ms: int
    absence_after_ms: int
    owner_instance: str
    owner_generation: int
    reason: str


@dataclass(frozen=True)
class ReceiptRecorded:
    """What is now established about an attempt, from the send's answer or a lookup.

    ``outcome``: ``acknowledged`` (accepted, open), ``filled`` (executions, done), ``rejected``
    (refused, nothing live), ``unknown`` (not established yet; reconciliation continues) or
    ``absent`` (proven never to have taken effect). ``source`` is ``send_response``,
    ``reconciliation`` or ``gateway`` (the gateway did not send a stale attempt). A receipt
    never overwrites an earlier one; ``conflict`` names evidence that contradicts it.
    """

    action_id: str
    run_id: str
    slot: str
    attempt: int
    client_order_id: str
    outcome: str
    venue_order_id: str | None
    status: str | None
    executed_quantity: str | None
    fills_json: str | None
    source: str
    queried_at_ms: int | None
    observed_at_ms: int
    conflict: str | None
    error_code: str | None
    detail: str | None
    recorded_at_ms: int


@dataclass(frozen=True)
class ActionExpired:
    """An action that never took effect will not be sent: its deadline or authorization lapsed.

    ``reason``: ``expired_before_send`` (``checked_at + clock_uncertainty >= expires_at``) or
    ``authorization_lapsed``. ``attempts`` is 0 for a never-attempted action, else the number
    of attempts that were all proven absent.
    """

    action_id: str
    run_id: str
    slot: str
    reason: str
    attempts: int
    expires_at_ms: int
    authorized_until_ms: int | None
    clock_uncertainty_ms: int
    checked_at_ms: int


@dataclass(frozen=True)
class ActionHeld:
    """An action needs an operator: nothing is sent for it until the hold is resolved.

    ``owner`` is the gateway instance that owned the run when it held the action; ``reason``
    is machine-readable (``reconciliation_budget_exhausted``, ``exposure_unavailable``,
    ``conflicting_evidence``, ``invalid_dispatch``).
    """

    action_id: str
    run_id: str
    slot: str
    attempt: int
    owner: str
    reason: str
    detail: str
    held_since_ms: int


@dataclass(frozen=True)
class HoldResolved:
    """A hold ended (audit record): by an operator's ``ResolveHold`` or by later evidence.

    ``resolution``: ``retry_lookup``, ``confirm_absent``, ``abandon`` or ``evidence``.
    """

    action_id: str
    run_id: str
    slot: str
    resolution: str
    resolved_by: str
    reason: str
    held_reason: str
    held_since_ms: int
    resolved_at_ms: int


@dataclass(frozen=True)
class RunCheckpointed:
    """The run's durable progress: saved observations of settled work and the next tasks.

    A checkpoint says what may come next; it never authorizes a send by itself: an action with
    a newer ``AttemptStarted`` is reconciled, whatever its checkpoint says.
    """

    run_id: str
    checkpoint_id: str
    sequence: int
    workflow_revision: int
    completed_json: str
    next_tasks: tuple[str, ...]
    checkpointed_at_ms: int


@dataclass(frozen=True)
class QueryRequested:
    """A reconciliation step: the gateway asks the venue, after this record commits.

    ``query``: ``order`` (look the client order id up) or ``exposure`` (the account's
    position in the instrument, to size a protection). ``query_number`` counts the action's
    queries from 1.
    """

    action_id: str
    run_id: str
    slot: str
    query: str
    query_number: int
    client_order_id: str
    venue: str
    account: str
    instrument: str
    reason: str
    requested_at_ms: int


@dataclass(frozen=True)
class ExposureRecorded:
    """The venue's report of the run's exposure, recorded as a new timestamped observation.

    ``sized_quantity`` = min(reported exposure, the entry's executed quantity): what the
    protection will cover (``"0"``: no protection is needed).
    """

    action_id: str
    run_id: str
    entry_action_id: str
    asset: str | None
    exposure_quantity: str
    entry_executed_quantity: str
    sized_quantity: str
    queried_at_ms: int
    observed_at_ms: int
    recorded_at_ms: int


@dataclass(frozen=True)
class RecoveryStarted:
    """One recovery owner took a run: what it restored, consulted and routed to lookup.

    ``journal_origin`` is ``live`` (the committed journal) or anything else (restored from an
    older point): then "not found" proves nothing before ``absence_not_before_ms`` and every
    action is looked up before any attempt.
    """

    run_id: str
    recovery_id: str
    requested_by: str
    reason: str
    journal_origin: str
    owner_instance: str
    owner_generation: int
    checkpoint_id: str | None
    records_consulted: tuple[str, ...]
    routed_to_lookup: tuple[str, ...]
    absence_not_before_ms: int | None
    supersedes: str | None
    started_at_ms: int


@dataclass(frozen=True)
class RecoveryReceiptRecorded:
    """Recovery is complete: the checkpoint restored, the journal records consulted, the
    current external evidence (new observations, each with its own time) and what may happen
    next. Earlier observations are never rewritten."""

    run_id: str
    recovery_id: str
    checkpoint_id: str | None
    records_consulted: tuple[str, ...]
    evidence_json: str
    next_permitted: tuple[str, ...]
    checkpoint_advanced_to: str | None
    held: tuple[str, ...]
    recorded_at_ms: int
