"""``decide`` and ``next_due_ms`` of the gate (the rules are in :mod:`streams.core.gate`).

``decide(state, command, now)`` never raises for bad input and never reads a clock: a
proposal that cannot be ordered or sent becomes ``CandidateRejected``; a record that names
another scope than the state's, or that repeats something already decided, produces no
events. Apply the returned events in order with :func:`~streams.core.gate.evolve.evolve`.
"""

from __future__ import annotations

from schemas.events import CandidateProposed, DispatchRequested, DispatchWithdrawn
from streams.core.errors import InconsistentHistory
from streams.core.gate import outcomes
from streams.core.gate.commands import (
    CheckTimers,
    Command,
    GateEvent,
    ProposeCandidate,
    RequestDispatch,
    WithdrawDispatch,
)
from streams.core.gate.rules import (
    EXPIRED_BEFORE_SEND,
    EXPIRED_DEADLINE_PASSED,
    REJECT_GENERATION_KIND,
    SUPERSEDED_NEWER,
    SUPERSEDED_OLDER,
    SUPERSEDED_SAME,
    earlier,
    eligible,
    generation_value,
    proposal_problems,
)
from streams.core.gate.state import Candidate, ScopeState


def decide(state: ScopeState | None, command: Command, now: int) -> list[GateEvent]:
    """The events ``command`` causes in the scope ``state`` at ``now`` (epoch ms UTC)."""
    if isinstance(command, ProposeCandidate):
        return _propose(state, command.proposal, now)
    if isinstance(command, RequestDispatch):
        return _request(state, command.request, now)
    if isinstance(command, WithdrawDispatch):
        return _withdraw(state, command.withdrawal, now)
    if isinstance(command, CheckTimers):
        return _timers(state, now)
    raise TypeError(f"not a gate command: {type(command).__name__}")


def next_due_ms(state: ScopeState | None) -> int | None:
    """When :class:`CheckTimers` next expires something: the earliest instant at which a
    pending candidate stops being eligible (``expires_at - clock_uncertainty``), or None."""
    if state is None:
        return None
    due = [d for c in state.pending() if (d := c.due_ms()) is not None]
    return min(due) if due else None


def _propose(state: ScopeState | None, p: CandidateProposed, now: int) -> list[GateEvent]:
    if state is not None and (p.scope_key != state.scope_key or state.knows(p.candidate_id)):
        return []
    track = None if state is None else state.track(p.kind)
    problems = proposal_problems(p)
    if problems is not None:
        reason, listed = problems
        return [outcomes.rejected(p, reason, "; ".join(listed), track, now)]
    scope_key = p.scope_key
    candidate = outcomes.candidate_of(p, now)
    if track is not None:
        if track.generation_kind != p.generation_kind:
            detail = (
                f"{p.kind} generations of this scope are ordered as {track.generation_kind}, "
                f"this one is a {p.generation_kind}: generations of different kinds are not "
                "ordered; a workflow that changes its sequence field needs a new scope"
            )
            return [outcomes.rejected(p, REJECT_GENERATION_KIND, detail, track, now)]
        current = generation_value(track.generation, track.generation_kind)
        new = generation_value(p.generation, p.generation_kind)
        if current is None or new is None:  # both were validated before they got here
            raise InconsistentHistory(f"{scope_key}: unreadable generation in {track.kind}")
        if new <= current:
            reason = SUPERSEDED_SAME if new == current else SUPERSEDED_OLDER
            return [
                outcomes.superseded(
                    scope_key,
                    candidate,
                    reason,
                    current_id=track.candidate_id,
                    current_generation=track.generation,
                    now=now,
                )
            ]
    events: list[GateEvent] = []
    if track is not None and track.pending is not None:
        events.append(
            outcomes.superseded(
                scope_key,
                track.pending,
                SUPERSEDED_NEWER,
                current_id=candidate.candidate_id,
                current_generation=candidate.generation,
                now=now,
            )
        )
    events.append(outcomes.accepted(scope_key, candidate, track))
    held = None if state is None else state.held_request(candidate.candidate_id)
    if held is not None:
        events.append(
            _dispatch_or_expire(
                scope_key,
                candidate,
                approvals=held.approvals,
                copy_expires_at_ms=held.expires_at_ms,
                copy_uncertainty_ms=held.clock_uncertainty_ms,
                requested_at_ms=held.requested_at_ms,
                now=now,
            )
        )
    elif not eligible(now, candidate.expires_at_ms, candidate.clock_uncertainty_ms):
        events.append(_deadline_passed(scope_key, candidate, now))
    return events


def _request(state: ScopeState | None, r: DispatchRequested, now: int) -> list[GateEvent]:
    if state is None:
        return [r]  # held until its proposal arrives
    if r.scope_key != state.scope_key or state.settled_status(r.candidate_id) is not None:
        return []
    for track in state.tracks:
        if track.candidate_id == r.candidate_id:
            if track.pending is None:  # dispatched or expired already: ends once
                return []
            return [
                _dispatch_or_expire(
                    state.scope_key,
                    track.pending,
                    approvals=r.approvals,
                    copy_expires_at_ms=r.expires_at_ms,
                    copy_uncertainty_ms=r.clock_uncertainty_ms,
                    requested_at_ms=r.requested_at_ms,
                    now=now,
                )
            ]
    if state.held_request(r.candidate_id) is not None:
        return []
    return [r]


def _withdraw(state: ScopeState | None, w: DispatchWithdrawn, now: int) -> list[GateEvent]:
    # Admission writes a withdrawal after the proposal on the same partition, so the
    # candidate is known here; one that already has its outcome keeps it (ends once).
    if state is None or w.scope_key != state.scope_key:
        return []
    for track in state.tracks:
        c = track.pending
        if c is not None and c.candidate_id == w.candidate_id:
            # Out of time is what it is, whatever the approval did: counted as expired.
            if not eligible(now, c.expires_at_ms, c.clock_uncertainty_ms):
                return [_deadline_passed(state.scope_key, c, now)]
            return [outcomes.withdrawn(state.scope_key, c, w.reason, w.detail, now)]
    return []


def _timers(state: ScopeState | None, now: int) -> list[GateEvent]:
    if state is None:
        return []
    return [
        _deadline_passed(state.scope_key, c, now)
        for c in state.pending()
        if not eligible(now, c.expires_at_ms, c.clock_uncertainty_ms)
    ]


def _deadline_passed(scope_key: str, c: Candidate, now: int) -> GateEvent:
    return outcomes.expired(
        scope_key,
        c,
        EXPIRED_DEADLINE_PASSED,
        expires_at_ms=c.expires_at_ms,
        clock_uncertainty_ms=c.clock_uncertainty_ms,
        requested_at_ms=None,
        now=now,
    )


def _dispatch_or_expire(
    scope_key: str,
    c: Candidate,
    *,
    approvals: tuple[str, ...],
    copy_expires_at_ms: int | None,
    copy_uncertainty_ms: int,
    requested_at_ms: int,
    now: int,
) -> GateEvent:
    # A copy may only take time away: the earlier deadline, the larger allowance.
    expires_at_ms = earlier(c.expires_at_ms, copy_expires_at_ms)
    uncertainty_ms = max(c.clock_uncertainty_ms, copy_uncertainty_ms, 0)
    if eligible(now, expires_at_ms, uncertainty_ms):
        return outcomes.dispatched(
            scope_key,
            c,
            approvals=approvals,
            requested_at_ms=requested_at_ms,
            expires_at_ms=expires_at_ms,
            clock_uncertainty_ms=uncertainty_ms,
            now=now,
        )
    return outcomes.expired(
        scope_key,
        c,
        EXPIRED_BEFORE_SEND,
        expires_at_ms=expires_at_ms,
        clock_uncertainty_ms=uncertainty_ms,
        requested_at_ms=requested_at_ms,
        now=now,
    )
