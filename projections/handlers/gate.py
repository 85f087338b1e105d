"""Rows of the gate's records: each candidate's times and outcome, and each scope's generation.

``candidates`` keeps one row per candidate whose rank is its stage (proposed 0, accepted 1,
decided 2), so the terminal row wins whatever order the topics are read in (``candidates``,
``gate-decisions``, ``actions``); every row carries the candidate's retained times, so the
winning row is complete. ``candidate_outcomes`` holds the terminal outcome once (the counts
``superseded`` and ``expired_before_send``; a dispatch also writes its ``dispatches`` row,
which counts ``actions_dispatched``). ``scope_generations`` is the
current generation of each kind: the scope's acceptances come from one partition of
``gate-decisions``, in order, so the latest offset is the current one.
"""

from __future__ import annotations

from typing import Any

from projections.handlers.journal import dispatch_row
from projections.model import RowOp
from projections.rows import Source, handles
from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
    DispatchWithdrawn,
)

_PROPOSED, _ACCEPTED, _DECIDED = 0, 1, 2
_OUTCOME = {
    CandidateSuperseded: "superseded",
    CandidateExpired: "expired",
    CandidateRejected: "rejected",
}


def _candidate(
    r: Any,
    *,
    candidate_id: str,
    outcome: str,
    stage: int,
    final_at_ms: int | None,
    current_generation: str | None,
    reason: str | None,
) -> RowOp:
    return (
        "candidates",
        {
            "candidate_id": candidate_id,
            "run_id": r.run_id,
            "admission_key": r.admission_key,
            "scope_key": r.scope_key,
            "kind": r.kind,
            "generation": r.generation,
            "generation_kind": r.generation_kind,
            "expires_at_ms": r.expires_at_ms,
            "source_time_ms": r.source_time_ms,
            "enqueued_at_ms": r.enqueued_at_ms,
            "dequeued_at_ms": r.dequeued_at_ms,
            "proposed_at_ms": r.proposed_at_ms,
            "final_at_ms": final_at_ms,
            "current_generation": current_generation,
            "outcome": outcome,
            "reason": reason,
            "rank": (stage,),
        },
    )


def _outcome(r: Any, candidate_id: str, outcome: str, reason: str | None, at_ms: int) -> RowOp:
    return (
        "candidate_outcomes",
        {
            "candidate_id": candidate_id,
            "run_id": r.run_id,
            "scope_key": r.scope_key,
            "kind": r.kind,
            "outcome": outcome,
            "reason": reason,
            "generation": r.generation,
            "current_generation": getattr(r, "current_generation", r.generation),
            "decided_at_ms": at_ms,
        },
    )


@handles(CandidateProposed)
def _proposed(source: Source, r: CandidateProposed) -> list[RowOp]:
    return [
        _candidate(
            r,
            candidate_id=r.candidate_id,
            outcome="proposed",
            stage=_PROPOSED,
            final_at_ms=None,
            current_generation=None,
            reason=None,
        )
    ]


@handles(CandidateAccepted)
def _accepted(source: Source, r: CandidateAccepted) -> list[RowOp]:
    return [
        _candidate(
            r,
            candidate_id=r.candidate_id,
            outcome="accepted",
            stage=_ACCEPTED,
            final_at_ms=None,
            current_generation=r.generation,
            reason=None,
        ),
        (
            "scope_generations",
            {
                "scope_key": r.scope_key,
                "kind": r.kind,
                "generation": r.generation,
                "generation_kind": r.generation_kind,
                "candidate_id": r.candidate_id,
                "accepted_at_ms": r.accepted_at_ms,
                "rank": (source.partition, source.offset),
            },
        ),
    ]


@handles(CandidateSuperseded, CandidateExpired, CandidateRejected)
def _decided(
    source: Source, r: CandidateSuperseded | CandidateExpired | CandidateRejected
) -> list[RowOp]:
    outcome = _OUTCOME[type(r)]
    return [
        _candidate(
            r,
            candidate_id=r.candidate_id,
            outcome=outcome,
            stage=_DECIDED,
            final_at_ms=r.decided_at_ms,
            current_generation=r.current_generation,
            reason=r.reason,
        ),
        _outcome(r, r.candidate_id, outcome, r.reason, r.decided_at_ms),
    ]


@handles(ActionDispatched)
def _dispatched(source: Source, r: ActionDispatched) -> list[RowOp]:
    return [
        _candidate(
            r,
            candidate_id=r.action_id,
            outcome="dispatched",
            stage=_DECIDED,
            final_at_ms=r.dispatched_at_ms,
            current_generation=r.generation,
            reason=None,
        ),
        _outcome(r, r.action_id, "dispatched", None, r.dispatched_at_ms),
        dispatch_row(r),
    ]


@handles(DispatchRequested, DispatchWithdrawn)
def _hand_off(source: Source, r: object) -> list[RowOp]:
    # Requests and withdrawals reach the event log (a run's timeline shows them); what they
    # led to is the gate's decision.
    return []
