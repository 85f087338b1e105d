"""``evolve`` refuses events that contradict the scope's state (typed errors, never absorbed)."""

from __future__ import annotations

import dataclasses

import pytest

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateRejected,
    CandidateSuperseded,
)
from streams.core.errors import CoreError, IllegalTransition, InconsistentHistory
from streams.core.gate import ScopeState, evolve
from tests.support.gate import T0, Gate, proposal, request

AT = T0 + 1_000


def _run() -> tuple[Gate, dict[str, object]]:
    """A gate where candidate 1 was accepted and dispatched, 2 superseded, 3 expired."""
    gate = Gate()
    seen: dict[str, object] = {}
    p1, p2, p3 = proposal(1, generation="5"), proposal(2, generation="4"), proposal(3, kind="x")
    [seen["accepted"]] = gate.propose(p1, AT)
    [seen["dispatched"]] = gate.request(request(p1, AT), AT)
    [seen["superseded"]] = gate.propose(p2, AT)
    _, seen["expired"] = gate.propose(dataclasses.replace(p3, exit_window_ms=0), AT)
    return gate, seen


def state_of(gate: Gate) -> ScopeState:
    state = gate.state()
    assert state is not None
    return state


@pytest.mark.parametrize("name", ["accepted", "dispatched", "superseded", "expired"])
def test_a_second_outcome_for_a_decided_candidate_is_refused(name: str) -> None:
    gate, seen = _run()
    event = seen[name]
    with pytest.raises(IllegalTransition) as info:
        evolve(state_of(gate), event)  # type: ignore[arg-type]
    assert isinstance(info.value, CoreError) and info.value.machine == "candidate"


def test_dispatch_or_expiry_of_a_candidate_never_accepted_is_refused() -> None:
    gate, seen = _run()
    dispatched = seen["dispatched"]
    expired = seen["expired"]
    assert isinstance(dispatched, ActionDispatched) and isinstance(expired, CandidateExpired)
    stranger = f"{proposal(9).run_id}.entry"
    with pytest.raises(IllegalTransition):
        evolve(state_of(gate), dataclasses.replace(dispatched, action_id=stranger))
    with pytest.raises(IllegalTransition):
        evolve(state_of(gate), dataclasses.replace(expired, candidate_id=stranger))


def test_acceptance_that_is_not_newer_or_skips_the_pending_one_is_refused() -> None:
    gate, seen = _run()
    accepted = seen["accepted"]
    assert isinstance(accepted, CandidateAccepted)
    state = state_of(gate)
    for generation in ("5", "4", "-1"):
        older = dataclasses.replace(
            accepted, candidate_id=proposal(7).candidate_id, generation=generation
        )
        with pytest.raises(InconsistentHistory, match="not newer"):
            evolve(state, older)
    other_kind = dataclasses.replace(
        accepted, candidate_id=proposal(7).candidate_id, generation="9", generation_kind="time"
    )
    with pytest.raises(InconsistentHistory, match="not newer"):
        evolve(state, other_kind)
    unreadable = dataclasses.replace(accepted, candidate_id="c-8", generation="x")
    with pytest.raises(InconsistentHistory, match="unreadable"):
        evolve(state, unreadable)
    # While a candidate is pending, a newer one must supersede it before it is accepted.
    pending = Gate()
    pending.propose(proposal(1), AT)
    [newer] = Gate().propose(proposal(2), AT)
    with pytest.raises(InconsistentHistory, match="pending"):
        evolve(state_of(pending), newer)


def test_events_of_another_scope_are_refused() -> None:
    gate, seen = _run()
    for event in seen.values():
        moved = dataclasses.replace(event, scope_key="live|other")  # type: ignore[type-var]
        with pytest.raises(InconsistentHistory, match="applied to the state"):
            evolve(state_of(gate), moved)  # type: ignore[arg-type]


def test_a_rejection_of_a_known_candidate_is_refused() -> None:
    gate, seen = _run()
    superseded = seen["superseded"]
    assert isinstance(superseded, CandidateSuperseded)
    [rejected] = Gate().propose(proposal(1, side="long"), AT)
    assert isinstance(rejected, CandidateRejected)
    with pytest.raises(IllegalTransition):
        evolve(state_of(gate), rejected)


def test_holding_a_request_for_a_known_candidate_is_refused() -> None:
    gate, _ = _run()
    [held] = Gate().request(request(proposal(1), AT), AT)
    with pytest.raises(InconsistentHistory, match="already knows"):
        evolve(state_of(gate), held)
    fresh = Gate()
    fresh.request(request(proposal(2), AT), AT)
    [again] = Gate().request(request(proposal(2), AT), AT)
    with pytest.raises(InconsistentHistory):
        evolve(state_of(fresh), again)


def test_an_outcome_whose_memory_was_forgotten_is_still_refused() -> None:
    gate, seen = _run()
    dispatched = seen["dispatched"]
    state = dataclasses.replace(state_of(gate), settled=())
    with pytest.raises(InconsistentHistory, match="already has its outcome"):
        evolve(state, dispatched)  # type: ignore[arg-type]
