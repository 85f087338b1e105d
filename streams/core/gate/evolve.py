"""``evolve`` of the gate: apply one event to the state of its decision scope.

Every event moves its candidate through :mod:`streams.core.gate.lifecycle`; an event that
``decide`` could not have produced from the state (a second outcome for one candidate, an
acceptance that is not newer than the current generation, an event of another scope, a
dispatch of a candidate that is not pending) raises
:class:`~streams.core.errors.IllegalTransition` or
:class:`~streams.core.errors.InconsistentHistory`. Seeing one means the changelog or the
gate's topics were written by something else or are corrupted: stop the gate for that
partition and inspect the events of the named scope; do not skip.

Housekeeping is part of the fold and uses only the events' own decision times: every
outcome forgets settled ids and held requests whose ``forget_at_ms`` it has passed, then
trims them to their limits (see :mod:`streams.core.gate.state`).
"""

from __future__ import annotations

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
)
from streams.core.errors import InconsistentHistory
from streams.core.gate.commands import GateEvent, Outcome
from streams.core.gate.lifecycle import CANDIDATE, CandidateStatus
from streams.core.gate.outcomes import candidate_from_accepted
from streams.core.gate.rules import generation_value
from streams.core.gate.state import (
    HELD_LIMIT,
    RECENT_LIMIT,
    SETTLED_LIMIT,
    SETTLED_MEMORY_MS,
    Decision,
    HeldRequest,
    ScopeState,
    Settled,
    Track,
    empty_state,
)
from streams.core.records import changed

_OUTCOME: dict[type, tuple[CandidateStatus, str]] = {
    CandidateAccepted: (CandidateStatus.PENDING, "accepted"),
    ActionDispatched: (CandidateStatus.DISPATCHED, "dispatched"),
    CandidateSuperseded: (CandidateStatus.SUPERSEDED, "superseded"),
    CandidateExpired: (CandidateStatus.EXPIRED, "expired"),
    CandidateRejected: (CandidateStatus.REJECTED, "rejected"),
}


def evolve(state: ScopeState | None, event: GateEvent) -> ScopeState:
    """The scope's state after ``event`` (``None``: the scope had no state yet)."""
    if state is None:
        state = empty_state(event.scope_key)
    elif event.scope_key != state.scope_key:
        raise InconsistentHistory(
            f"{type(event).__name__} of scope {event.scope_key!r} applied to the state of "
            f"{state.scope_key!r}"
        )
    if isinstance(event, DispatchRequested):
        return _hold(state, event)
    candidate_id = event.action_id if isinstance(event, ActionDispatched) else event.candidate_id
    target, outcome = _OUTCOME[type(event)]
    CANDIDATE.transition(_status(state, candidate_id), target)
    if isinstance(event, CandidateAccepted):
        state = _accept(state, event)
    else:
        state = _settle(state, candidate_id, target, event)
    now = _decided(event)
    reason = None if isinstance(event, CandidateAccepted | ActionDispatched) else event.reason
    decision = Decision(candidate_id, event.kind, outcome, reason, event.generation, now)
    return _housekeep(state, decision)


def _status(state: ScopeState, candidate_id: str) -> CandidateStatus:
    settled = state.settled_status(candidate_id)
    if settled is not None:
        return settled
    for track in state.tracks:
        if track.candidate_id == candidate_id:
            if track.pending is not None:
                return CandidateStatus.PENDING
            raise InconsistentHistory(
                f"{state.scope_key}: {candidate_id} already has its outcome (no longer "
                "remembered which); an event decides it again"
            )
    return CandidateStatus.PROPOSED


def _accept(state: ScopeState, event: CandidateAccepted) -> ScopeState:
    track = state.track(event.kind)
    new = generation_value(event.generation, event.generation_kind)
    if new is None:
        raise InconsistentHistory(
            f"{state.scope_key}: accepted {event.candidate_id} with unreadable generation "
            f"{event.generation!r} ({event.generation_kind})"
        )
    if track is not None:
        if track.pending is not None:
            raise InconsistentHistory(
                f"{state.scope_key}: accepted {event.candidate_id} while "
                f"{track.pending.candidate_id} is pending; it must be superseded first"
            )
        current = generation_value(track.generation, track.generation_kind)
        if track.generation_kind != event.generation_kind or current is None or new <= current:
            raise InconsistentHistory(
                f"{state.scope_key}: accepted {event.candidate_id} at {event.kind} generation "
                f"{event.generation!r} ({event.generation_kind}), not newer than the current "
                f"{track.generation!r} ({track.generation_kind})"
            )
    pending = candidate_from_accepted(event)
    new_track = Track(
        event.kind, event.generation, event.generation_kind, event.candidate_id, pending
    )
    others = [t for t in state.tracks if t.kind != event.kind]
    tracks = tuple(sorted([*others, new_track], key=lambda t: t.kind))
    return changed(state, tracks=tracks)


def _settle(
    state: ScopeState, candidate_id: str, status: CandidateStatus, event: Outcome
) -> ScopeState:
    tracks = tuple(
        changed(t, pending=None)
        if t.pending is not None and t.pending.candidate_id == candidate_id
        else t
        for t in state.tracks
    )
    decided = _decided(event)
    deadline = event.expires_at_ms if event.expires_at_ms is not None else decided
    settled = Settled(candidate_id, status, max(decided, deadline) + SETTLED_MEMORY_MS)
    return changed(
        state,
        tracks=tracks,
        settled=(*state.settled, settled),
        held=tuple(h for h in state.held if h.candidate_id != candidate_id),
    )


def _decided(event: Outcome) -> int:
    if isinstance(event, CandidateAccepted):
        return event.accepted_at_ms
    if isinstance(event, ActionDispatched):
        return event.dispatched_at_ms
    return event.decided_at_ms


def _hold(state: ScopeState, request: DispatchRequested) -> ScopeState:
    if state.knows(request.candidate_id) or state.held_request(request.candidate_id) is not None:
        raise InconsistentHistory(
            f"{state.scope_key}: dispatch request for {request.candidate_id} held although "
            "the gate already knows it"
        )
    basis = request.expires_at_ms if request.expires_at_ms is not None else 0
    held = HeldRequest(
        candidate_id=request.candidate_id,
        approvals=request.approvals,
        expires_at_ms=request.expires_at_ms,
        clock_uncertainty_ms=request.clock_uncertainty_ms,
        requested_at_ms=request.requested_at_ms,
        forget_at_ms=max(request.requested_at_ms, basis) + SETTLED_MEMORY_MS,
    )
    return changed(state, held=(*state.held, held)[-HELD_LIMIT:])


def _housekeep(state: ScopeState, decision: Decision) -> ScopeState:
    now = decision.decided_at_ms
    settled = tuple(s for s in state.settled if s.forget_at_ms > now)[-SETTLED_LIMIT:]
    held = tuple(h for h in state.held if h.forget_at_ms > now)
    recent = (*state.recent, decision)[-RECENT_LIMIT:]
    return changed(state, settled=settled, held=held, recent=recent)
