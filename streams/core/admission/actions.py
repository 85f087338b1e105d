"""What admission hands the gate: a run's proposed action and, once approved, its dispatch.

Rules (pure; called for every batch of accepted slot results, see
:func:`streams.core.admission.branches.with_status_changes`):

1. **Proposal.** When the run's proposing slot (``[workflow.actions] propose``, frozen on the
   run) completes with ``"proposal"`` in its result, admission writes ``CandidateProposed``
   to ``candidates``, keyed by the run's scope key. The candidate id is the action id
   ``<run_id>.<kind>``. Instrument, venue and account come from the run's payload, never from
   the proposal. The generation is the run's sequence value (else its source time) with the
   run's frozen ``generation_kind``. Times: enqueue = ``admitted_at``, dequeue = the
   proposing slot's accepted ``BranchStarted`` (when a worker took it), proposal = the
   slot's completion. The deadline copy is the run's: ``expires_at_ms`` and its policy.
2. **Unreadable proposals are recorded, not dropped.** A proposal that is not an object, or
   lacks a kind, side or amount, is written as given (missing text as ``""``, a value of the
   wrong type as its JSON text) so that the gate answers it ``CandidateRejected`` with every
   problem listed.
3. **Dispatch.** Once the candidate is proposed and every approving slot finished:
   all completed -> ``DispatchRequested`` (with its own copy of the deadline: the run's
   ``expires_at_ms`` for an entry, ``source_time + exit_window`` or none for another kind);
   one failed or skipped -> ``DispatchWithdrawn`` (``approval_failed`` /
   ``approval_skipped``), which the gate ends as ``CandidateRejected`` with that reason
   instead of letting the candidate wait for its deadline. Each is written once: slot
   results are accepted once per (run, slot) and the step fires only on the transition to
   "proposed and every approval finished".
4. **Nothing is renewed.** A rerun is a new run with its own action ids and the original's
   deadline; a result that arrives after the deadline is still proposed (for the record) and
   the gate expires it at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from schemas.events import (
    BranchCompleted,
    BranchFailed,
    BranchSkipped,
    CandidateProposed,
    DispatchRequested,
    DispatchWithdrawn,
)
from streams.core.admission.builders import GENERATION_TIME, load_object
from streams.core.admission.commands import AdmissionEvent
from streams.core.admission.state import OccurrenceState, RunState
from streams.core.lifecycle import BRANCH, BranchStatus

PROPOSAL_KEY = "proposal"
ENTRY = "entry"
APPROVAL_FAILED = "approval_failed"
APPROVAL_SKIPPED = "approval_skipped"


def action_events(
    before: OccurrenceState,
    after: OccurrenceState,
    slot_events: Sequence[AdmissionEvent],
    now: int,
) -> list[AdmissionEvent]:
    """The gate's inputs that ``slot_events`` (already folded into ``after``) cause."""
    events: list[AdmissionEvent] = []
    previous = {run.run_id: run for run in before.runs}
    for run in after.runs:
        if run.action_propose_slot is None or run.scope_key is None:
            continue
        proposed: CandidateProposed | None = None
        if run.proposed_kind is None:
            completed = _completion(slot_events, run.run_id, run.action_propose_slot)
            if completed is not None:
                proposed = propose(run, run.scope_key, completed)
        if proposed is not None:
            events.append(proposed)
        kind = proposed.kind if proposed is not None else run.proposed_kind
        old = previous.get(run.run_id)
        was_ready = old is not None and _ready(old, old.proposed_kind)
        if kind is not None and not was_ready and _ready(run, kind):
            events.append(_decision(after.admission_key, run, kind, slot_events, now))
    return events


def propose(run: RunState, scope_key: str, completed: BranchCompleted) -> CandidateProposed | None:
    """``CandidateProposed`` for a proposing slot's result, ``None`` if it proposes nothing."""
    result = load_object(completed.result_json)
    if result is None or PROPOSAL_KEY not in result:
        return None
    raw = result[PROPOSAL_KEY]
    proposal = raw if isinstance(raw, dict) else {}
    kind = _text(proposal.get("kind")) if isinstance(raw, dict) else ""
    payload = load_object(run.payload_json) or {}
    return CandidateProposed(
        candidate_id=f"{run.run_id}.{kind}",
        run_id=run.run_id,
        admission_key=completed.admission_key,
        scope_key=scope_key,
        subscription=run.subscription,
        environment=run.environment,
        kind=kind,
        side=_text(proposal.get("side")),
        quantity=_amount(proposal.get("quantity")),
        notional=_amount(proposal.get("notional")),
        limit_price=_amount(proposal.get("limit_price")),
        max_slippage_bps=_amount(proposal.get("max_slippage_bps")),
        params_json=_object_json(proposal.get("params"), required=True) or "{}",
        protection_json=_object_json(proposal.get("protection"), required=False),
        notification_json=_object_json(proposal.get("notification"), required=False),
        reassessment_of=_optional_text(proposal.get("reassessment_of")),
        venue=_optional_text(payload.get("venue")),
        instrument=_optional_text(payload.get("instrument")),
        account=_optional_text(payload.get("account")),
        generation=run.sequence if run.sequence is not None else str(run.source_time_ms),
        generation_kind=run.generation_kind or GENERATION_TIME,
        expires_at_ms=run.expires_at_ms,
        source_time_ms=run.source_time_ms,
        validity_source_time=run.validity_source_time,
        validity_window_ms=run.validity_window_ms,
        clock_uncertainty_ms=run.clock_uncertainty_ms,
        workflow_revision=run.workflow_revision,
        exit_window_ms=run.action_exit_window_ms,
        enqueued_at_ms=run.admitted_at_ms,
        dequeued_at_ms=run.proposal_dequeued_at_ms,
        proposed_at_ms=completed.completed_at_ms,
    )


def deadline_copy(run: RunState, kind: str) -> int | None:
    """The deadline a hand-off of the run's ``kind`` action carries (``None``: none)."""
    if kind == ENTRY:
        return run.expires_at_ms
    if run.action_exit_window_ms is None:
        return None
    return run.source_time_ms + run.action_exit_window_ms


def _ready(run: RunState, kind: str | None) -> bool:
    if kind is None:
        return False
    statuses = {s.slot: s.status for s in run.slots}
    return all(
        (status := statuses.get(name)) is not None and BRANCH.is_terminal(status)
        for name in run.action_approve_slots
    )


def _decision(
    admission_key: str,
    run: RunState,
    kind: str,
    slot_events: Sequence[AdmissionEvent],
    now: int,
) -> DispatchRequested | DispatchWithdrawn:
    candidate_id = f"{run.run_id}.{kind}"
    scope_key = run.scope_key or ""
    statuses = {s.slot: s.status for s in run.slots}
    for name in run.action_approve_slots:
        status = statuses[name]
        if status is not BranchStatus.COMPLETED:
            failed = status is BranchStatus.FAILED
            return DispatchWithdrawn(
                candidate_id=candidate_id,
                run_id=run.run_id,
                admission_key=admission_key,
                scope_key=scope_key,
                kind=kind,
                slot=name,
                reason=APPROVAL_FAILED if failed else APPROVAL_SKIPPED,
                detail=_why(slot_events, run.run_id, name) or f"{name} {status.value}",
                withdrawn_at_ms=now,
            )
    return DispatchRequested(
        candidate_id=candidate_id,
        run_id=run.run_id,
        admission_key=admission_key,
        scope_key=scope_key,
        kind=kind,
        approvals=run.action_approve_slots,
        expires_at_ms=deadline_copy(run, kind),
        source_time_ms=run.source_time_ms,
        validity_source_time=run.validity_source_time,
        validity_window_ms=run.validity_window_ms,
        clock_uncertainty_ms=run.clock_uncertainty_ms,
        workflow_revision=run.workflow_revision,
        requested_at_ms=now,
    )


def _completion(events: Sequence[AdmissionEvent], run_id: str, slot: str) -> BranchCompleted | None:
    for event in events:
        if isinstance(event, BranchCompleted) and event.run_id == run_id and event.slot == slot:
            return event
    return None


def _why(events: Sequence[AdmissionEvent], run_id: str, slot: str) -> str | None:
    for event in events:
        if getattr(event, "run_id", None) != run_id or getattr(event, "slot", None) != slot:
            continue
        if isinstance(event, BranchFailed):
            return f"{slot} failed: {event.error}"
        if isinstance(event, BranchSkipped):
            return f"{slot} skipped: {event.reason}"
    return None


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _amount(value: object) -> str | None:
    # Decimal strings only; an integer is its digits. A float is never guessed at (0.1 + 0.2
    # is not 0.3): it is kept with a note that makes the gate reject it by name, as is
    # anything else that is not a string.
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value!r} (a JSON number: send amounts as decimal strings)"
    return _text(value)


def _object_json(value: object, *, required: bool) -> str | None:
    if value is None:
        return "{}" if required else None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
