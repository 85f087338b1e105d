"""The gate's rules one by one (streams.core.gate): order, ties, exits, requests, timers."""

from __future__ import annotations

import dataclasses

import pytest

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateRejected,
    CandidateSuperseded,
    DispatchRequested,
)
from streams.core.gate import ProposeCandidate, RequestDispatch, decide, next_due_ms
from streams.core.gate.state import HELD_LIMIT, RECENT_LIMIT, SETTLED_LIMIT, SETTLED_MEMORY_MS
from tests.support.gate import (
    T0,
    TERMINAL_TYPES,
    Gate,
    names,
    of_type,
    proposal,
    request,
)

AT = T0 + 1_000


# --- generation order


@pytest.mark.parametrize(
    ("older", "newer", "kind"),
    [
        ("9", "10", "number"),
        ("9.5", "10", "number"),
        ("-1", "0", "number"),
        ("99", "1E+2", "number"),
        (str(T0), "2026-11-30T12:01:00Z", "time"),
        ("2026-11-30T11:59:59.999Z", str(T0), "time"),
    ],
)
def test_generations_are_compared_as_values_never_as_text(
    older: str, newer: str, kind: str
) -> None:
    a = proposal(1, generation=older, generation_kind=kind)
    b = proposal(2, generation=newer, generation_kind=kind)
    forward = Gate()
    forward.propose(a, AT)
    assert names(forward.propose(b, AT)) == ["CandidateSuperseded", "CandidateAccepted"]
    backward = Gate()
    backward.propose(b, AT)
    [late] = backward.propose(a, AT)
    assert isinstance(late, CandidateSuperseded) and late.reason == "older_than_current"


def test_equal_generations_first_accepted_stays_current() -> None:
    gate = Gate()
    a, b = proposal(1, generation="5"), proposal(2, generation="5.0")
    gate.propose(a, AT)
    [tie] = gate.propose(b, AT + 1)
    assert isinstance(tie, CandidateSuperseded)
    assert (tie.reason, tie.current_candidate_id) == ("same_generation", a.candidate_id)
    # Still so once the first was dispatched, and a newer one supersedes only the pending.
    gate.request(request(a, AT + 2), AT + 2)
    c = proposal(3, generation="5")
    [tie2] = gate.propose(c, AT + 3)
    assert isinstance(tie2, CandidateSuperseded) and tie2.reason == "same_generation"
    assert gate.request(request(b, AT + 4), AT + 4) == []
    assert [e.action_id for e in of_type(gate.events, ActionDispatched)] == [a.candidate_id]


def test_generation_kind_mismatch_and_unreadable_generations_are_rejected() -> None:
    gate = Gate()
    gate.propose(proposal(1, generation=str(T0), generation_kind="time"), AT)
    [mismatch] = gate.propose(proposal(2, generation="7"), AT)
    assert isinstance(mismatch, CandidateRejected)
    assert (mismatch.reason, mismatch.current_generation) == ("generation_kind_mismatch", str(T0))
    for n, generation, kind in [
        (3, "abc", "number"),
        (4, "NaN", "number"),
        (5, "Infinity", "number"),
        (6, " 7", "number"),
        (7, "yesterday", "time"),
        (8, "7", "sequence"),
    ]:
        [bad] = gate.propose(proposal(n, generation=generation, generation_kind=kind), AT)
        assert isinstance(bad, CandidateRejected) and bad.reason == "invalid_generation", n


@pytest.mark.parametrize(
    ("changes", "reason", "phrase"),
    [
        ({"candidate_id": "run-x.entry"}, "invalid_candidate_id", "is not"),
        ({"kind": "Entry!"}, "invalid_candidate_id", "not an action kind"),
        ({"clock_uncertainty_ms": -1}, "invalid_deadline", "clock_uncertainty_ms"),
        ({"exit_window_ms": -5}, "invalid_deadline", "exit_window_ms"),
        ({"side": "long"}, "invalid_parameters", "side"),
        ({"notional": "100"}, "invalid_parameters", "exactly one"),
        ({"quantity": None}, "invalid_parameters", "exactly one"),
        ({"quantity": "0"}, "invalid_parameters", "quantity"),
        ({"quantity": "1e3"}, "invalid_parameters", "quantity"),
        ({"limit_price": "-1"}, "invalid_parameters", "limit_price"),
        ({"max_slippage_bps": "x"}, "invalid_parameters", "max_slippage_bps"),
        ({"params_json": "[]"}, "invalid_parameters", "params_json"),
        ({"protection_json": "{"}, "invalid_parameters", "protection_json"),
    ],
)
def test_unusable_proposals_are_rejected_with_a_reason(
    changes: dict[str, object], reason: str, phrase: str
) -> None:
    gate = Gate()
    p = dataclasses.replace(proposal(1), **changes)  # type: ignore[arg-type]
    [rejected] = gate.propose(p, AT)
    assert isinstance(rejected, CandidateRejected)
    assert rejected.reason == reason and phrase in rejected.detail
    assert gate.propose(p, AT + 1) == []  # a copy gets no second outcome
    assert gate.request(request(p, AT + 2), AT + 2) == []


def test_zero_slippage_is_allowed_and_reassessment_grants_nothing() -> None:
    gate = Gate()
    gate.propose(proposal(5), AT)
    reassessing = proposal(4, max_slippage_bps="0", reassessment_of=proposal(5).candidate_id)
    [late] = gate.propose(reassessing, AT + 1)
    assert isinstance(late, CandidateSuperseded) and late.reason == "older_than_current"


# --- exits and other kinds


def test_an_exit_is_dispatched_although_a_newer_entry_exists() -> None:
    gate = Gate()
    exit_ = proposal(3, kind="exit")
    gate.propose(proposal(5), AT)
    assert names(gate.propose(exit_, AT)) == ["CandidateAccepted"]
    assert names(gate.propose(proposal(6), AT)) == ["CandidateSuperseded", "CandidateAccepted"]
    # Long after the entry window: an exit without a window has no deadline at the gate.
    later = T0 + 3_600_000
    [sent] = gate.request(request(exit_, later), later)
    assert isinstance(sent, ActionDispatched)
    assert (sent.kind, sent.expires_at_ms, sent.generation) == ("exit", None, "3")
    superseded = of_type(gate.events, CandidateSuperseded)
    assert [e.candidate_id for e in superseded] == [proposal(5).candidate_id]


def test_exits_are_ordered_among_exits_by_the_same_rule() -> None:
    gate = Gate()
    gate.propose(proposal(7, kind="exit"), AT)
    [late] = gate.propose(proposal(6, kind="exit"), AT)
    assert isinstance(late, CandidateSuperseded) and late.reason == "older_than_current"
    superseded, _ = gate.propose(proposal(8, kind="exit"), AT)
    assert isinstance(superseded, CandidateSuperseded)
    assert superseded.candidate_id == proposal(7, kind="exit").candidate_id
    state = gate.state()
    assert state is not None and state.track("entry") is None


def test_an_exit_with_a_window_expires_at_its_own_deadline() -> None:
    gate = Gate()
    exit_ = proposal(3, kind="exit", exit_window_ms=60_000, clock_uncertainty_ms=100)
    [accepted] = gate.propose(exit_, AT)
    assert isinstance(accepted, CandidateAccepted) and accepted.expires_at_ms == T0 + 60_000
    assert next_due_ms(gate.state()) == T0 + 60_000 - 100
    # Past the entry window, inside its own: still eligible.
    assert names(gate.request(request(exit_, T0 + 10_000), T0 + 10_000)) == ["ActionDispatched"]
    gate = Gate()
    gate.propose(exit_, AT)
    [expired] = gate.timers(T0 + 59_900)
    assert isinstance(expired, CandidateExpired) and expired.kind == "exit"


def test_exit_without_a_window_never_times_out() -> None:
    gate = Gate()
    gate.propose(proposal(1, kind="exit"), AT)
    assert next_due_ms(gate.state()) is None
    assert gate.timers(T0 + 10**9) == []


# --- dispatch requests


def test_a_request_that_overtook_its_proposal_is_held_then_applied() -> None:
    gate = Gate(restart_every_step=True)
    p = proposal(1)
    [held] = gate.request(request(p, AT), AT)
    assert isinstance(held, DispatchRequested)
    state = gate.state()
    assert state is not None and state.held_request(p.candidate_id) is not None
    assert gate.request(request(p, AT + 1), AT + 1) == []  # a copy of a held request
    accepted, sent = gate.propose(p, AT + 2)
    assert isinstance(accepted, CandidateAccepted) and isinstance(sent, ActionDispatched)
    assert (sent.requested_at_ms, sent.dispatched_at_ms) == (AT, AT + 2)
    state = gate.state()
    assert state is not None and state.held == ()


def test_a_held_request_keeps_its_deadline_copy() -> None:
    gate = Gate()
    p = proposal(1)
    gate.request(request(p, AT, expires_at_ms=T0 + 2_000), AT)
    _, expired = gate.propose(p, T0 + 3_000)
    assert isinstance(expired, CandidateExpired)
    assert (expired.reason, expired.expires_at_ms, expired.requested_at_ms) == (
        "expired_before_send",
        T0 + 2_000,
        AT,
    )


def test_a_held_request_is_dropped_when_its_candidate_loses() -> None:
    gate = Gate()
    gate.propose(proposal(5), AT)
    old = proposal(4)
    gate.request(request(old, AT), AT)
    [late] = gate.propose(old, AT + 1)
    assert isinstance(late, CandidateSuperseded)
    state = gate.state()
    assert state is not None and state.held == ()


def test_held_requests_are_bounded_and_forgotten() -> None:
    gate = Gate()
    gate.propose(proposal(10_000), AT)
    for n in range(HELD_LIMIT + 10):
        gate.request(request(proposal(n), AT), AT)
    state = gate.state()
    assert state is not None and len(state.held) == HELD_LIMIT
    assert state.held_request(proposal(0).candidate_id) is None
    far = T0 + 5_000 + SETTLED_MEMORY_MS
    gate.propose(proposal(10_001), far)
    state = gate.state()
    assert state is not None and state.held == ()


@pytest.mark.parametrize(
    ("copy_uncertainty", "dispatched"), [(0, True), (-5_000, True), (1_000, False)]
)
def test_the_larger_clock_allowance_applies(copy_uncertainty: int, dispatched: bool) -> None:
    gate = Gate()
    p = proposal(1, clock_uncertainty_ms=100)
    gate.propose(p, AT)
    at = T0 + 4_500  # 500 ms left: enough for the candidate's 100 ms, not for 1 s
    [event] = gate.request(request(p, at, clock_uncertainty_ms=copy_uncertainty), at)
    assert isinstance(event, ActionDispatched) is dispatched
    assert event.clock_uncertainty_ms == max(100, copy_uncertainty)


def test_records_of_another_scope_are_ignored() -> None:
    gate = Gate()
    gate.propose(proposal(1), AT)
    state = gate.state()
    other = proposal(2, scope_key="live|account=acc-1|instrument=BTCUSDT|side=buy")
    assert decide(state, ProposeCandidate(other), AT) == []
    assert decide(state, RequestDispatch(request(other, AT)), AT) == []


def test_decide_refuses_what_is_not_a_gate_command() -> None:
    with pytest.raises(TypeError, match="not a gate command"):
        decide(None, object(), AT)  # type: ignore[arg-type]


# --- timers and bounded state


def test_timer_expires_a_pending_candidate_once_at_its_deadline() -> None:
    gate = Gate()
    gate.propose(proposal(1, clock_uncertainty_ms=250), AT)
    gate.propose(proposal(1, kind="exit", exit_window_ms=2_000), AT)
    assert next_due_ms(gate.state()) == T0 + 2_000
    [exit_expired] = gate.timers(T0 + 2_000)
    assert exit_expired.kind == "exit"
    assert next_due_ms(gate.state()) == T0 + 4_750
    assert gate.timers(T0 + 4_749) == []
    [entry_expired] = gate.timers(T0 + 4_750)
    assert isinstance(entry_expired, CandidateExpired) and entry_expired.reason == "deadline_passed"
    assert next_due_ms(gate.state()) is None
    assert gate.timers(T0 + 9_999) == []
    assert len(of_type(gate.events, TERMINAL_TYPES)) == 2


def test_state_stays_bounded_and_the_current_generation_is_never_forgotten() -> None:
    gate = Gate()
    count = SETTLED_LIMIT + 100
    for n in range(1, count + 1):
        now = T0 + n * 1_000
        p = proposal(n, source_time_ms=now - 500)
        gate.propose(p, now)
        gate.request(request(p, now + 1), now + 1)
    state = gate.state()
    assert state is not None
    assert len(state.settled) == SETTLED_LIMIT and len(state.recent) == RECENT_LIMIT
    assert len(state.tracks) == 1 and state.pending() == ()
    assert len(of_type(gate.events, ActionDispatched)) == count
    # A copy of a long-forgotten one can never be dispatched: it loses as a late arrival.
    much_later = T0 + 10 * SETTLED_MEMORY_MS
    [forgotten] = gate.propose(proposal(1, source_time_ms=T0 + 500), much_later)
    assert isinstance(forgotten, CandidateSuperseded) and forgotten.reason == "older_than_current"
    state = gate.state()
    assert state is not None and len(state.settled) == 1  # the rest were forgotten by time
    # The current candidate is recognised however late, though its outcome was forgotten.
    last = proposal(count, source_time_ms=T0 + count * 1_000 - 500)
    assert state.settled_status(last.candidate_id) is None
    assert gate.propose(last, much_later) == []
    assert gate.request(request(last, much_later), much_later) == []
