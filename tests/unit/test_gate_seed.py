"""The seed article "Queued crypto signals: preserve the expiry", as gate acceptance cases.

Its worked timeline (source 12:00:00.000 UTC, five-second latest-submission window, no clock
uncertainty) and every row of its injected-condition table that the gate decides. The worker
decides "claimed exactly at expiry" at dequeue; the gate applies the same boundary to the
dispatch request, so that row is checked here in that form.
"""

from __future__ import annotations

import dataclasses

import pytest

from schemas.events import (
    ActionDispatched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateSuperseded,
)
from streams.core.durations import format_time
from streams.core.gate import GateEvent, next_due_ms
from tests.support.gate import (
    SCOPE,
    T0,
    TERMINAL_TYPES,
    Gate,
    names,
    of_type,
    proposal,
    request,
)

RECEIVED = T0 + 200  # received and enqueued
TAKEN = T0 + 3_400  # worker takes the job: 1.600 s remain
CHECKED = T0 + 4_600  # analysis and account checks finish: the proposal reaches the gate
READY = T0 + 5_100  # gateway ready to send: the dispatch request
REDELIVERED = T0 + 7_000  # the original job is redelivered
DEADLINE = T0 + 5_000
WRONG_DEADLINE = T0 + 12_000  # a republish that restarted the window at 12:00:07


def seed_proposal() -> CandidateProposed:
    return proposal(
        1,
        generation=str(T0 - 60_000),
        generation_kind="time",
        enqueued_at_ms=RECEIVED,
        dequeued_at_ms=TAKEN,
        proposed_at_ms=CHECKED,
    )


def assert_no_wrong_deadline(events: list[GateEvent]) -> None:
    stamp = format_time(WRONG_DEADLINE)
    assert stamp.startswith("2026-11-30T12:00:12")
    for event in events:
        for field in dataclasses.fields(event):
            value = getattr(event, field.name)
            values = value if isinstance(value, tuple) else (value,)
            for item in values:
                assert item != WRONG_DEADLINE, (type(event).__name__, field.name)
                if isinstance(item, str):
                    assert str(WRONG_DEADLINE) not in item and "12:00:12" not in item


@pytest.mark.parametrize("restart", [False, True], ids=["in-memory", "restart-every-step"])
def test_seed_timeline_submits_nothing_and_redelivery_records_nothing(restart: bool) -> None:
    gate = Gate(restart_every_step=restart)
    p = seed_proposal()
    assert p.expires_at_ms == DEADLINE

    assert names(gate.propose(p, CHECKED)) == ["CandidateAccepted"]
    assert next_due_ms(gate.state()) == DEADLINE  # 0.400 s left at the gate

    [expired] = gate.request(request(p, READY), READY)
    assert isinstance(expired, CandidateExpired)
    assert expired.reason == "expired_before_send"
    assert expired.expires_at_ms == DEADLINE
    assert (expired.source_time_ms, expired.enqueued_at_ms, expired.dequeued_at_ms) == (
        T0,
        RECEIVED,
        TAKEN,
    )
    assert (expired.proposed_at_ms, expired.requested_at_ms, expired.decided_at_ms) == (
        CHECKED,
        READY,
        READY,
    )
    assert expired.current_generation == p.generation
    # The article's arithmetic, from the recorded times alone.
    assert expired.dequeued_at_ms is not None
    assert expired.dequeued_at_ms - expired.enqueued_at_ms == 3_200  # queue wait
    assert expired.expires_at_ms - expired.dequeued_at_ms == 1_600  # left at dequeue
    assert READY - expired.dequeued_at_ms == 1_700  # spent after dequeue: 0.100 s too much

    # 12:00:07.000: the job is redelivered; a naive republish even restarts the window.
    assert gate.request(request(p, REDELIVERED), REDELIVERED) == []
    republished = request(p, REDELIVERED, expires_at_ms=WRONG_DEADLINE)
    assert gate.request(republished, REDELIVERED) == []
    assert gate.propose(dataclasses.replace(p, proposed_at_ms=REDELIVERED), REDELIVERED) == []
    assert gate.timers(REDELIVERED) == []

    assert of_type(gate.events, ActionDispatched) == []
    assert len(of_type(gate.events, TERMINAL_TYPES)) == 1
    assert names(gate.events) == ["CandidateAccepted", "CandidateExpired"]
    state = gate.state()
    assert state is not None and state.pending() == () and next_due_ms(state) is None
    assert [(d.outcome, d.reason) for d in state.recent] == [
        ("accepted", None),
        ("expired", "expired_before_send"),
    ]
    assert_no_wrong_deadline(gate.events)


@pytest.mark.parametrize("restart", [False, True], ids=["in-memory", "restart-every-step"])
def test_seed_timeline_with_the_timer_firing_at_the_deadline(restart: bool) -> None:
    gate = Gate(restart_every_step=restart)
    p = seed_proposal()
    gate.propose(p, CHECKED)
    assert gate.timers(DEADLINE - 1) == []
    [expired] = gate.timers(DEADLINE)
    assert isinstance(expired, CandidateExpired)
    assert (expired.reason, expired.requested_at_ms, expired.decided_at_ms) == (
        "deadline_passed",
        None,
        DEADLINE,
    )
    assert gate.timers(DEADLINE) == []
    assert gate.request(request(p, READY), READY) == []
    republished = request(p, REDELIVERED, expires_at_ms=WRONG_DEADLINE)
    assert gate.request(republished, REDELIVERED) == []
    assert of_type(gate.events, ActionDispatched) == []
    assert len(of_type(gate.events, TERMINAL_TYPES)) == 1
    assert_no_wrong_deadline(gate.events)


# --- the injected-condition table ("Validate the deadline under deliberate delays")


@pytest.mark.parametrize(
    ("uncertainty", "at", "dispatched"),
    [
        (0, DEADLINE - 1, True),
        (0, DEADLINE, False),  # exactly at expiry: equality fails
        (250, DEADLINE - 251, True),
        (250, DEADLINE - 250, False),  # now + uncertainty == expires_at
    ],
)
def test_request_exactly_at_expiry_is_refused(uncertainty: int, at: int, dispatched: bool) -> None:
    gate = Gate()
    p = proposal(1, clock_uncertainty_ms=uncertainty, proposed_at_ms=CHECKED)
    gate.propose(p, CHECKED)
    [event] = gate.request(request(p, at), at)
    if dispatched:
        assert isinstance(event, ActionDispatched)
        assert event.dispatched_at_ms + event.clock_uncertainty_ms < event.expires_at_ms  # type: ignore[operator]
    else:
        assert isinstance(event, CandidateExpired) and event.reason == "expired_before_send"


def test_analysis_that_finishes_after_expiry_is_retained_and_submits_nothing() -> None:
    gate = Gate()
    late = T0 + 5_200
    p = proposal(1, proposed_at_ms=late)
    accepted, expired = gate.propose(p, late)
    # The result is retained (the acceptance carries the whole proposal) but cannot act.
    assert isinstance(accepted, CandidateAccepted)
    assert (accepted.quantity, accepted.params_json) == ("0.010", '{"rule":"breakout-v1"}')
    assert isinstance(expired, CandidateExpired)
    assert (expired.reason, expired.decided_at_ms) == ("deadline_passed", late)
    assert gate.request(request(p, late + 10), late + 10) == []
    assert of_type(gate.events, ActionDispatched) == []


def test_republished_request_never_stretches_the_original_deadline() -> None:
    # A copy with more time is resolved against the authority; one with less wins.
    gate = Gate(restart_every_step=True)
    p = proposal(1, proposed_at_ms=CHECKED)
    gate.propose(p, CHECKED)
    gate.restart()  # worker or gate restarts: the original deadline survives
    [expired] = gate.request(request(p, READY, expires_at_ms=WRONG_DEADLINE), READY)
    assert isinstance(expired, CandidateExpired) and expired.expires_at_ms == DEADLINE

    gate = Gate()
    q = proposal(2, proposed_at_ms=CHECKED)
    gate.propose(q, CHECKED)
    [sent] = gate.request(request(q, T0 + 4_800, expires_at_ms=WRONG_DEADLINE), T0 + 4_800)
    assert isinstance(sent, ActionDispatched) and sent.expires_at_ms == DEADLINE

    gate = Gate()
    r = proposal(3, proposed_at_ms=CHECKED)
    gate.propose(r, CHECKED)
    [short] = gate.request(request(r, T0 + 4_800, expires_at_ms=T0 + 4_700), T0 + 4_800)
    assert isinstance(short, CandidateExpired) and short.expires_at_ms == T0 + 4_700


def test_newer_generation_first_makes_the_older_record_supersession() -> None:
    gate = Gate()
    g82, g81 = proposal(82), proposal(81)
    gate.propose(g82, CHECKED)
    [event] = gate.propose(g81, CHECKED + 1)
    assert isinstance(event, CandidateSuperseded)
    assert (event.reason, event.current_candidate_id, event.current_generation) == (
        "older_than_current",
        g82.candidate_id,
        "82",
    )
    assert gate.request(request(g81, CHECKED + 2), CHECKED + 2) == []


def test_newer_generation_supersedes_the_pending_older_one() -> None:
    gate = Gate()
    g81, g82 = proposal(81), proposal(82)
    gate.propose(g81, CHECKED)
    superseded, accepted = gate.propose(g82, CHECKED + 1)
    assert isinstance(superseded, CandidateSuperseded)
    assert (superseded.candidate_id, superseded.reason) == (g81.candidate_id, "newer_generation")
    assert (superseded.current_candidate_id, superseded.current_generation) == (
        g82.candidate_id,
        "82",
    )
    assert isinstance(accepted, CandidateAccepted)
    assert (accepted.previous_candidate_id, accepted.previous_generation) == (
        g81.candidate_id,
        "81",
    )
    assert gate.request(request(g81, CHECKED + 2), CHECKED + 2) == []
    [sent] = gate.request(request(g82, CHECKED + 3), CHECKED + 3)
    assert isinstance(sent, ActionDispatched) and sent.generation == "82"


def test_older_source_event_arriving_last_cannot_win_by_arrival() -> None:
    gate = Gate()
    g82, g81 = proposal(82), proposal(81)
    gate.propose(g82, CHECKED)
    gate.propose(g81, CHECKED + 1)
    gate.request(request(g81, CHECKED + 2), CHECKED + 2)
    gate.request(request(g82, CHECKED + 3), CHECKED + 3)
    state = gate.state()
    assert state is not None
    track = state.track("entry")
    assert track is not None and (track.generation, track.candidate_id) == ("82", g82.candidate_id)
    assert [e.action_id for e in of_type(gate.events, ActionDispatched)] == [g82.candidate_id]


def test_dispatched_action_is_left_to_recovery_and_never_expired_or_sent_again() -> None:
    gate = Gate()
    p = proposal(1, proposed_at_ms=CHECKED)
    gate.propose(p, CHECKED)
    [sent] = gate.request(request(p, T0 + 4_700), T0 + 4_700)
    assert isinstance(sent, ActionDispatched)
    gate.restart()  # crash after the dispatch committed
    assert next_due_ms(gate.state()) is None
    assert gate.timers(DEADLINE) == []  # expiry handling does not touch it
    assert gate.request(request(p, REDELIVERED), REDELIVERED) == []
    assert gate.propose(p, REDELIVERED) == []
    assert len(of_type(gate.events, ActionDispatched)) == 1
    assert of_type(gate.events, CandidateExpired) == []
    assert gate.by_scope[SCOPE] == gate.events
