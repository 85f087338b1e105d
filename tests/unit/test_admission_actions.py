"""Admission hands a run's action to the gate (streams.core.admission.actions), end to end.

The seed article's timeline and table of injected conditions, through the real admission
core and the real gate core, with a controllable clock (no sleeps): source 12:00:00.000 UTC,
five-second window, no clock uncertainty.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import (
    ActionDispatched,
    BranchCompleted,
    BranchLaunched,
    BranchRelaunched,
    CandidateAccepted,
    CandidateExpired,
    CandidateProposed,
    CandidateRejected,
    CandidateSuperseded,
    DeliveryDeduplicated,
    DispatchRequested,
    DispatchWithdrawn,
    RunAdmitted,
)
from streams.core.admission import Admit, CheckTimers, Rerun
from streams.core.durations import format_time, parse_time
from streams.core.gate import CandidateStatus
from tests.support.core import candle, delivery, rerun_request, workflow
from tests.support.pipeline import Pipeline, entry

SOURCE = parse_time("2026-11-30T12:00:00Z")
OPEN = "2026-11-30T11:59:00Z"  # candle_close = open + 1m = the source event at 12:00:00
RECEIVED = SOURCE + 200
TAKEN = SOURCE + 3_400
CHECKED = SOURCE + 4_600
READY = SOURCE + 5_100
REDELIVERED = SOURCE + 7_000
DEADLINE = SOURCE + 5_000
WRONG = SOURCE + 12_000  # a republish at 12:00:07 that restarted the window


def seed_workflow(**overrides: Any) -> Any:
    return workflow(**{"clock_uncertainty_ms": 0, **overrides})


def of(events: list[Any], kind: type | tuple[type, ...]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def every_int(events: list[Any]) -> list[int]:
    values: list[int] = []
    for event in events:
        for field in dataclasses.fields(event):
            value = getattr(event, field.name)
            if isinstance(value, int) and not isinstance(value, bool):
                values.append(value)
    return values


@pytest.mark.parametrize("restart", [False, True], ids=["in-memory", "restart-every-step"])
def test_seed_timeline_through_admission_and_the_gate_dispatches_nothing(restart: bool) -> None:
    pipe = Pipeline(seed_workflow(), restart_every_step=restart)
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    assert (run.source_time_ms, run.expires_at_ms) == (SOURCE, DEADLINE)
    assert format_time(run.expires_at_ms) == "2026-11-30T12:00:05.000Z"
    launches = of(pipe.admission.events, BranchLaunched)
    assert {t.slot: t.action_role for t in launches} == {
        "analysis": "approve",
        "signal": "propose",
        "journal": "record",
    }
    for task in launches:
        assert (task.expires_at_ms, task.source_time_ms, task.clock_uncertainty_ms) == (
            DEADLINE,
            SOURCE,
            0,
        )
        assert task.validity_source_time == "candle_close" and task.validity_window_ms == 5_000

    # 12:00:03.400 a worker takes the signal slot: 1.600 s remain.
    pipe.started(run, "signal", TAKEN)
    assert DEADLINE - TAKEN == 1_600
    # 12:00:04.600 analysis and the signal's checks are done: the proposal reaches the gate,
    # 0.400 s left; the dispatch request waits in the gate's queue.
    pipe.completed(run, "analysis", CHECKED)
    events = pipe.completed(run, "signal", CHECKED, entry(), hold=True)
    [proposed] = of(events, CandidateProposed)
    [requested] = of(events, DispatchRequested)
    assert (proposed.enqueued_at_ms, proposed.dequeued_at_ms, proposed.proposed_at_ms) == (
        RECEIVED,
        TAKEN,
        CHECKED,
    )
    assert proposed.candidate_id == f"{run.run_id}.entry"
    assert proposed.generation == str(parse_time(OPEN)) and proposed.generation_kind == "time"
    assert (proposed.venue, proposed.instrument, proposed.account) == (
        "binance",
        "BTCUSDT",
        "acc-1",
    )
    assert proposed.expires_at_ms == requested.expires_at_ms == DEADLINE
    assert requested.approvals == ("analysis",)
    # 12:00:05.100 the request is decided: the final check fails, nothing is sent.
    [accepted] = pipe.decide(pipe.held[0], CHECKED)
    assert isinstance(accepted, CandidateAccepted)
    pipe.held = pipe.held[1:]
    [expired] = pipe.release(READY)
    assert isinstance(expired, CandidateExpired)
    assert expired.reason == "expired_before_send"
    assert (expired.expires_at_ms, expired.decided_at_ms) == (DEADLINE, READY)
    assert READY - TAKEN == 1_700  # 0.100 s more than the 1.600 s that remained

    # 12:00:07.000 the original job is redelivered: every copy is answered, nothing restarts.
    wf = pipe.wf
    copy = pipe.admission.handle(
        Admit(delivery(wf, candle(OPEN), "d-2", REDELIVERED), wf), REDELIVERED
    )
    assert [type(e) for e in copy] == [DeliveryDeduplicated]
    assert pipe.skipped(run, "signal", REDELIVERED, "expired_at_dequeue") == []
    assert pipe.decide(proposed, REDELIVERED) == []
    assert pipe.decide(requested, REDELIVERED) == []
    assert pipe.admission.handle(CheckTimers(), REDELIVERED, run.admission_key) == []
    state = pipe.gate.state(proposed.scope_key)
    assert state is not None
    assert state.settled_status(proposed.candidate_id) is CandidateStatus.EXPIRED
    assert of(pipe.gate.events, ActionDispatched) == []
    assert len(of(pipe.admission.events, RunAdmitted)) == 1
    assert len(of(pipe.admission.events, BranchLaunched)) == 3
    everything = [*pipe.admission.events, *pipe.gate.events]
    assert WRONG not in every_int(everything)
    assert all(value <= DEADLINE for value in (e.expires_at_ms for e in of(everything, _COPIES)))


_COPIES = (
    BranchLaunched,
    BranchRelaunched,
    CandidateProposed,
    DispatchRequested,
    CandidateAccepted,
    CandidateExpired,
    ActionDispatched,
)


def test_a_fresh_candidate_is_dispatched_with_the_run_deadline_and_times() -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    pipe.started(run, "signal", SOURCE + 300)
    pipe.completed(run, "signal", SOURCE + 600, entry())
    events = pipe.completed(run, "analysis", SOURCE + 900)
    [dispatched] = of(events, ActionDispatched)
    assert dispatched.action_id == f"{run.run_id}.entry"
    assert dispatched.expires_at_ms == DEADLINE
    assert dispatched.dispatched_at_ms == SOURCE + 900
    assert (dispatched.enqueued_at_ms, dispatched.dequeued_at_ms) == (RECEIVED, SOURCE + 300)
    assert dispatched.approvals == ("analysis",)


def test_a_handler_that_finishes_after_the_deadline_keeps_its_result_but_sends_nothing() -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    pipe.started(run, "signal", TAKEN)  # analysis starts before expiry ...
    events = pipe.completed(run, "signal", DEADLINE + 200, entry())  # ... and ends after it
    [kept] = of(events, BranchCompleted)
    assert "proposal" in kept.result_json  # retained for the record
    assert [type(e) for e in of(events, (CandidateAccepted, CandidateExpired))] == [
        CandidateAccepted,
        CandidateExpired,
    ]
    assert of(events, CandidateExpired)[0].reason == "deadline_passed"
    pipe.completed(run, "analysis", DEADLINE + 300)
    assert of(pipe.gate.events, ActionDispatched) == []


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [("failed", "approval_failed"), ("skipped", "approval_skipped")],
)
@pytest.mark.parametrize("approval_first", [False, True], ids=["proposal-first", "approval-first"])
def test_a_failed_or_skipped_approval_ends_the_candidate_at_once(
    outcome: str, reason: str, approval_first: bool
) -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)

    def approval() -> list[Any]:
        if outcome == "failed":
            return pipe.failed(run, "analysis", SOURCE + 800, "risk check refused")
        return pipe.skipped(run, "analysis", SOURCE + 800, "expired_at_dequeue")

    if approval_first:
        assert of(approval(), DispatchWithdrawn) == []  # nothing proposed yet
        events = pipe.completed(run, "signal", SOURCE + 900, entry())
    else:
        pipe.completed(run, "signal", SOURCE + 600, entry())
        events = approval()
    [withdrawn] = of(events, DispatchWithdrawn)
    assert (withdrawn.reason, withdrawn.slot) == (reason, "analysis")
    [rejected] = of(events, CandidateRejected)
    assert rejected.reason == reason and rejected.candidate_id == f"{run.run_id}.entry"
    assert of(pipe.handed, DispatchRequested) == []
    assert of(pipe.gate.events, ActionDispatched) == []


@pytest.mark.parametrize(
    ("proposal", "problem"),
    [
        ({"proposal": "buy now"}, "kind '' is not an action kind"),
        ({"proposal": {"kind": "entry", "side": "buy"}}, "exactly one of quantity and notional"),
        (entry(kind="Entry!"), "kind 'Entry!' is not an action kind"),
        (entry(quantity=0.01), "quantity '0.01 (a JSON number: send amounts as decimal"),
        (entry(side="long"), "side 'long' is not buy or sell"),
    ],
)
def test_an_unreadable_proposal_is_recorded_as_rejected(
    proposal: dict[str, object], problem: str
) -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    events = pipe.completed(run, "signal", SOURCE + 600, proposal)
    [proposed] = of(events, CandidateProposed)
    [rejected] = of(events, CandidateRejected)
    assert rejected.candidate_id == proposed.candidate_id
    assert problem in rejected.detail, rejected.detail
    pipe.completed(run, "analysis", SOURCE + 700)
    assert of(pipe.gate.events, ActionDispatched) == []


def test_a_result_without_a_proposal_hands_nothing_on() -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    pipe.completed(run, "signal", SOURCE + 600, {"note": "no trade"})
    pipe.completed(run, "analysis", SOURCE + 700)
    assert pipe.handed == []


def test_without_approving_slots_the_proposal_is_requested_at_once() -> None:
    pipe = Pipeline(seed_workflow(action_approve_slots=()))
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    events = pipe.completed(run, "signal", SOURCE + 600, entry())
    assert [type(e) for e in of(events, (CandidateProposed, DispatchRequested))] == [
        CandidateProposed,
        DispatchRequested,
    ]
    assert len(of(events, ActionDispatched)) == 1


def test_a_workflow_without_actions_hands_nothing_on() -> None:
    pipe = Pipeline(seed_workflow(action_propose_slot=None, action_approve_slots=()))
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    assert run.action_propose_slot is None
    pipe.completed(run, "signal", SOURCE + 600, entry())
    pipe.completed(run, "analysis", SOURCE + 700)
    assert pipe.handed == []


def test_a_relaunch_keeps_the_original_deadline_and_policy() -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    pipe.admission.restart()
    relaunched = of(
        pipe.admission.handle(CheckTimers(), RECEIVED + 30_000, run.admission_key),
        BranchRelaunched,
    )
    assert {t.slot for t in relaunched} == {"analysis", "signal", "journal"}
    for task in relaunched:
        assert (task.expires_at_ms, task.source_time_ms, task.clock_uncertainty_ms) == (
            DEADLINE,
            SOURCE,
            0,
        )
    assert {t.slot: t.action_role for t in relaunched}["signal"] == "propose"


def newer_and_older(pipe: Pipeline) -> tuple[RunAdmitted, RunAdmitted]:
    # Generation 81 opens at 11:59:00, generation 82 one minute later; both fresh enough.
    wf = dataclasses.replace(pipe.wf, validity_window_ms=180_000)
    pipe.wf = wf
    older = pipe.admit(candle(OPEN), "d-81", SOURCE + 100)
    newer = pipe.admit(candle("2026-11-30T12:00:00Z"), "d-82", SOURCE + 60_100)
    return older, newer


def test_a_newer_generation_arriving_first_supersedes_the_older_through_admission() -> None:
    pipe = Pipeline(seed_workflow())
    older, newer = newer_and_older(pipe)
    now = SOURCE + 60_500
    pipe.completed(older, "signal", now, entry(), hold=True)  # delayed on its way
    pipe.completed(newer, "signal", now + 1, entry())
    late = pipe.release(now + 2)
    [superseded] = of(late, CandidateSuperseded)
    assert superseded.candidate_id == f"{older.run_id}.entry"
    assert superseded.reason == "older_than_current"
    pipe.completed(older, "analysis", now + 3)
    pipe.completed(newer, "analysis", now + 4)
    assert [d.action_id for d in of(pipe.gate.events, ActionDispatched)] == [
        f"{newer.run_id}.entry"
    ]


def test_a_pending_older_candidate_is_superseded_when_a_newer_one_is_accepted() -> None:
    pipe = Pipeline(seed_workflow())
    older, newer = newer_and_older(pipe)
    now = SOURCE + 60_500
    pipe.completed(older, "signal", now, entry())
    events = pipe.completed(newer, "signal", now + 1, entry())
    [superseded] = of(events, CandidateSuperseded)
    assert (superseded.candidate_id, superseded.reason) == (
        f"{older.run_id}.entry",
        "newer_generation",
    )
    assert of(pipe.completed(older, "analysis", now + 2), ActionDispatched) == []


def test_an_exit_is_dispatched_although_a_newer_entry_exists_in_its_scope() -> None:
    pipe = Pipeline(seed_workflow(action_exit_window_ms=120_000))
    older, newer = newer_and_older(pipe)
    now = SOURCE + 60_500
    pipe.completed(newer, "signal", now, entry())
    pipe.completed(older, "signal", now + 1, entry(kind="exit", side="sell"))
    [dispatched] = of(pipe.completed(older, "analysis", now + 2), ActionDispatched)
    assert dispatched.action_id == f"{older.run_id}.exit"
    assert dispatched.expires_at_ms == SOURCE + 120_000  # its own window from its source time


def test_a_rerun_is_a_new_run_with_its_own_action_id_and_the_original_deadline() -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    events = pipe.admission.handle(
        Rerun(rerun_request(run.admission_key, run.run_id, at=RECEIVED + 10), pipe.wf),
        RECEIVED + 10,
    )
    [rerun] = of(events, RunAdmitted)
    assert rerun.rerun_of == run.run_id and rerun.run_id != run.run_id
    assert rerun.expires_at_ms == DEADLINE
    assert rerun.action_propose_slot == "signal"
    proposed = of(pipe.completed(rerun, "signal", RECEIVED + 20, entry()), CandidateProposed)
    assert proposed[0].candidate_id == f"{rerun.run_id}.entry"
    assert proposed[0].expires_at_ms == DEADLINE


@settings(max_examples=150, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "window": st.integers(min_value=1, max_value=20_000),
            "uncertainty": st.integers(min_value=0, max_value=1_000),
            "exit_window": st.none() | st.integers(min_value=1, max_value=20_000),
            "kind": st.sampled_from(["entry", "exit"]),
            "steps": st.lists(st.integers(min_value=0, max_value=8_000), min_size=4, max_size=4),
            "relaunch": st.booleans(),
        }
    )
)
def test_a_deadline_copy_never_grows_from_task_to_dispatch(case: dict[str, Any]) -> None:
    window, uncertainty, exit_window = case["window"], case["uncertainty"], case["exit_window"]
    kind, steps, relaunch = case["kind"], case["steps"], case["relaunch"]
    wf = seed_workflow(
        validity_window_ms=window,
        clock_uncertainty_ms=uncertainty,
        action_exit_window_ms=exit_window,
        branch_timeout_ms=1_000,
    )
    pipe = Pipeline(wf, restart_every_step=True)
    at = SOURCE + 50
    run = pipe.admit(candle(OPEN), "d-1", at)
    for step in steps[:2]:
        at += step
        if relaunch:
            pipe.admission.handle(CheckTimers(), at, run.admission_key)
    pipe.started(run, "signal", at, attempt=1)
    at += steps[2]
    pipe.completed(run, "signal", at, entry(kind=kind))
    at += steps[3]
    pipe.completed(run, "analysis", at)
    events = [*pipe.admission.events, *pipe.gate.events]
    tasks = of(events, (BranchLaunched, BranchRelaunched))
    assert tasks and all(t.expires_at_ms == run.expires_at_ms for t in tasks)
    assert all(t.clock_uncertainty_ms == run.clock_uncertainty_ms for t in tasks)
    proposals = of(events, CandidateProposed)
    requests = of(events, DispatchRequested)
    dispatches = of(events, ActionDispatched)
    for p in proposals:
        assert p.expires_at_ms <= run.expires_at_ms
    for r in requests:
        if kind == "entry":
            assert r.expires_at_ms is not None and r.expires_at_ms <= run.expires_at_ms
        assert r.clock_uncertainty_ms >= run.clock_uncertainty_ms
    for d in dispatches:
        [r] = requests
        if r.expires_at_ms is not None:
            assert d.expires_at_ms is not None and d.expires_at_ms <= r.expires_at_ms
        assert d.clock_uncertainty_ms >= r.clock_uncertainty_ms
        assert d.expires_at_ms is None or d.dispatched_at_ms + d.clock_uncertainty_ms < (
            d.expires_at_ms
        )


def test_an_approval_skipped_after_the_deadline_counts_the_candidate_as_expired() -> None:
    pipe = Pipeline(seed_workflow())
    run = pipe.admit(candle(OPEN), "d-1", RECEIVED)
    pipe.completed(run, "signal", CHECKED, entry())
    events = pipe.skipped(run, "analysis", READY, "expired_at_dequeue")
    assert len(of(events, DispatchWithdrawn)) == 1
    [expired] = of(events, CandidateExpired)
    assert (expired.reason, expired.expires_at_ms) == ("deadline_passed", DEADLINE)
    assert of(events, CandidateRejected) == []
