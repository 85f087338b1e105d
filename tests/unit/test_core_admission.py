"""The admission aggregate (streams.core.admission): the seed article's acceptance cases.

"Four deliveries, three branches" (seeds/trigger-deduplication.txt): event A arrives four
times, B is the next candle, both for the same paper subscription with slots analysis,
signal and journal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from schemas.commands import (
    ReportBranchCompleted,
    ReportBranchFailed,
    ReportBranchSkipped,
    ReportBranchStarted,
)
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    BranchSkipped,
    BranchStarted,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
)
from streams.core.admission import (
    DEFAULT_BRANCH_ATTEMPTS,
    EVICTION_MARGIN_MS,
    PROCESSOR_WORKER,
    AdmissionEvent,
    Admit,
    CheckTimers,
    OccurrenceState,
    RecordBranchReport,
    Rerun,
    WorkerReport,
    accepted,
    decide,
    evolve,
    next_due_ms,
)
from streams.core.errors import IllegalTransition, InconsistentHistory
from streams.core.identity import identify, rejection_key, run_id_for
from streams.core.lifecycle import BranchStatus, RunStatus
from tests.support.core import (
    MINUTE,
    SLOTS,
    T0,
    Processor,
    candle,
    delivery,
    of_type,
    rerun_request,
    workflow,
)

NOW = T0 + MINUTE + 1_000  # one second after candle A closed
TIMEOUT = 30_000
A = candle("2026-11-30T12:00:00Z")
B = candle("2026-11-30T12:01:00Z")


def admit(
    proc: Processor, payload: dict[str, object], delivery_id: str, now: int = NOW, **wf: Any
) -> list[AdmissionEvent]:
    """Deliver ``payload`` under the contract workflow (with ``wf`` overrides) at ``now``."""
    revised = workflow(**wf)
    return proc.handle(Admit(delivery(revised, payload, delivery_id, now), revised), now)


def report(
    kind: type, run_id: str, key: str, slot: str, *, attempt: int = 1, at: int = NOW
) -> WorkerReport:
    """A worker's claim that becomes a ``kind`` fact when admission accepts it."""
    if kind is BranchStarted:
        return ReportBranchStarted(run_id, key, slot, attempt, "w1", at)
    if kind is BranchCompleted:
        return ReportBranchCompleted(run_id, key, slot, attempt, "w1", '{"ok":true}', at)
    if kind is BranchFailed:
        return ReportBranchFailed(run_id, key, slot, attempt, "w1", "boom", at)
    return ReportBranchSkipped(run_id, key, slot, attempt, "w1", "expired at dequeue", at)


def finish(
    proc: Processor,
    run_id: str,
    key: str,
    *,
    slots: tuple[str, ...] = SLOTS,
    kind: type = BranchCompleted,
    at: int = NOW,
) -> list[AdmissionEvent]:
    out: list[AdmissionEvent] = []
    for slot in slots:
        out += proc.handle(RecordBranchReport(report(kind, run_id, key, slot, at=at)), at)
    return out


def key_of(payload: dict[str, object], **wf: Any) -> str:
    return identify(workflow(**wf), payload).admission_key


# --------------------------------------------------------------- the seed article's table


def test_four_deliveries_three_branches_table() -> None:
    proc = Processor()
    key_a = key_of(A)
    run_a = run_id_for(key_a, 0)

    # First A delivery: create run R-A with its frozen context; three launches.
    first = admit(proc, A, "a-1")
    [admitted] = of_type(first, RunAdmitted)
    assert admitted.run_id == run_a
    assert admitted.workflow_revision == 1
    assert admitted.rerun_number == 0
    assert admitted.delivery_id == "a-1"
    assert admitted.slots == SLOTS
    assert [e.slot for e in of_type(first, BranchLaunched)] == list(SLOTS)
    assert len(first) == 4

    # Concurrent second A delivery: retrieve R-A; zero launches.
    second = admit(proc, A, "a-2", now=NOW + 5)
    assert second == [DeliveryDeduplicated("a-2", key_a, run_a, "in_flight", NOW + 5, NOW + 5)]

    # Third A delivery after completion: reference R-A and its recorded outcome.
    finish(proc, run_a, key_a)
    third = admit(proc, A, "a-3", now=NOW + 10_000)
    assert third == [
        DeliveryDeduplicated("a-3", key_a, run_a, "completed", NOW + 10_000, NOW + 10_000)
    ]

    # Fourth A delivery after restart: recover R-A from durable storage.
    proc.restart()
    fourth = admit(proc, A, "a-4", now=NOW + 15_000)
    [dup] = fourth
    assert isinstance(dup, DeliveryDeduplicated)
    assert (dup.run_id, dup.reason) == (run_a, "completed")

    # First B delivery: a distinct run R-B; three launches.
    b = admit(proc, B, "b-1", now=NOW + MINUTE)
    [admitted_b] = of_type(b, RunAdmitted)
    assert admitted_b.run_id != run_a
    assert admitted_b.admission_key != key_a
    assert len(of_type(b, BranchLaunched)) == 3

    # A identity with changed immutable signal fields: a conflict; R-A preserved.
    before = proc.state(key_a)
    conflict = admit(proc, candle(A["candle_open"], side="sell", price="96000"), "a-5")
    [event] = conflict
    assert isinstance(event, OccurrenceConflict)
    assert event.run_id == run_a
    assert event.differing_fields == ("side", "price")
    assert event.original_digest == admitted.content_digest
    assert event.conflicting_digest != admitted.content_digest
    assert proc.state(key_a) == before

    # Totals: 3 + 3 = 6 logical launches, not 4 x 3 + 3 = 15; two runs.
    assert len(of_type(proc.events, RunAdmitted)) == 2
    assert len(of_type(proc.events, BranchLaunched)) == 6


def test_recovery_relaunches_only_the_missing_slot_under_the_same_run() -> None:
    proc = Processor()
    key = key_of(A)
    run_id = run_id_for(key, 0)
    admit(proc, A, "a-1")
    finish(proc, run_id, key, slots=("analysis", "signal"))

    assert proc.timers(NOW + TIMEOUT - 1) == []  # not due yet
    assert next_due_ms(proc.state(key)) == NOW + TIMEOUT
    recovered = proc.timers(NOW + TIMEOUT)
    assert recovered == [
        BranchRelaunched(
            run_id=run_id,
            admission_key=key,
            slot="journal",
            attempt=2,
            workflow_revision=1,
            expires_at_ms=T0 + MINUTE + 5_000,
            timeout_at_ms=NOW + 2 * TIMEOUT,
            payload_json=recovered[0].payload_json,  # type: ignore[union-attr]
            reason="timed out after 30s",
            relaunched_at_ms=NOW + TIMEOUT,
            source_time_ms=T0 + MINUTE,
            validity_source_time="candle_close",
            validity_window_ms=5_000,
            clock_uncertainty_ms=250,
            action_role="record",
        )
    ]
    assert not of_type(proc.events, RunAdmitted)[1:]  # no new run
    # The relaunched slot completes: the set of three is complete, no fourth slot.
    events = finish(proc, run_id, key, slots=("journal",), at=NOW + TIMEOUT + 5)
    assert of_type(events, RunStatusChanged)[-1].status == "completed"
    state = proc.state(key)
    assert state is not None
    assert len(state.original.slots) == 3
    assert len(of_type(proc.events, BranchLaunched)) == 3


def test_a_replica_after_restart_mid_run_resumes_the_same_slots() -> None:
    proc = Processor(restart_every_step=True)
    key = key_of(A)
    run_id = run_id_for(key, 0)
    admit(proc, A, "a-1")
    finish(proc, run_id, key, slots=("analysis",))
    proc.restart()
    assert admit(proc, A, "a-2")[0] == DeliveryDeduplicated(
        "a-2", key, run_id, "in_flight", NOW, NOW
    )
    relaunched = of_type(proc.timers(NOW + TIMEOUT), BranchRelaunched)
    assert sorted(e.slot for e in relaunched) == ["journal", "signal"]


# --------------------------------------------------------------- admission rules


def test_redeploy_between_retries_keeps_the_original_revision() -> None:
    proc = Processor()
    key = key_of(A)
    admit(proc, A, "a-1")
    # Revision 2 changes slots, window and even the immutable-field list.
    events = admit(
        proc,
        A,
        "a-2",
        now=NOW + 5_000,
        revision=2,
        slots=("analysis", "signal", "journal", "audit"),
        validity_window_ms=60_000,
        immutable_fields=("side",),
    )
    assert [type(e) for e in events] == [DeliveryDeduplicated]
    state = proc.state(key)
    assert state is not None
    assert state.original.workflow_revision == 1
    assert state.original.slot_names == SLOTS
    assert state.original.expires_at_ms == T0 + MINUTE + 5_000


def test_new_candle_with_identical_values_is_a_new_run() -> None:
    proc = Processor()
    admit(proc, A, "a-1")
    events = admit(proc, candle("2026-11-30T12:01:00Z"), "b-1", now=NOW + MINUTE)
    assert len(of_type(events, RunAdmitted)) == 1
    assert len(of_type(events, BranchLaunched)) == 3


def test_beyond_horizon_is_rejected_explicitly() -> None:
    proc = Processor()
    week = 7 * 86_400_000
    late = T0 + MINUTE + week + 1  # source time is now older than the 7d horizon
    events = admit(proc, A, "a-late", now=late)
    [rejected] = events
    assert isinstance(rejected, DeliveryRejected)
    assert rejected.reason == "beyond_horizon"
    assert "7d" in rejected.detail
    assert rejected.decided_at_ms == late
    assert proc.states == {}
    # Exactly at the horizon is still admitted.
    assert of_type(admit(Processor(), A, "a-edge", now=T0 + MINUTE + week), RunAdmitted)


def test_two_subscriptions_make_two_runs() -> None:
    proc = Processor()
    first = admit(proc, A, "a-1")
    second = admit(proc, A, "a-1", subscription="eth-breakout")
    [run_1] = of_type(first, RunAdmitted)
    [run_2] = of_type(second, RunAdmitted)
    assert run_1.admission_key != run_2.admission_key
    assert run_1.run_id != run_2.run_id
    assert run_2.subscription == "eth-breakout"


def test_rfc3339_and_epoch_copies_are_one_occurrence() -> None:
    proc = Processor()
    admit(proc, A, "a-1")
    for i, open_time in enumerate([T0, str(T0), "2026-11-30T13:00:00+01:00"]):
        events = admit(proc, candle(open_time, price="97000.50"), f"a-{i + 2}")
        assert [type(e) for e in events] == [DeliveryDeduplicated]


def test_same_identity_different_source_time_is_a_conflict() -> None:
    overrides: dict[str, Any] = {
        "identity_derived_fields": (),
        "validity_source_time": "signal_time",
        "scope_fields": (),
        "scope_sequence_field": None,
    }
    proc = Processor()
    first = {"source": "scheduler", "event_id": "evt-9", "signal_time": NOW - 1_000, "side": "buy"}
    admit(proc, first, "d-1", **overrides)
    later = dict(first, signal_time=NOW + 59_000)  # would stretch the deadline by a minute
    [event] = admit(proc, later, "d-2", **overrides)
    assert isinstance(event, OccurrenceConflict)
    assert event.differing_fields == ("source_time",)
    state = proc.state(event.admission_key)
    assert state is not None
    assert state.original.expires_at_ms == NOW - 1_000 + 5_000


def test_unknown_subscription() -> None:
    wf = workflow()
    d = delivery(wf, A, "a-1", NOW)
    [event] = decide(None, Admit(d, None), NOW)
    assert isinstance(event, DeliveryRejected)
    assert (event.reason, event.admission_key) == ("unknown_subscription", d.admission_key)
    assert "sluicegate workflows apply" in event.detail
    # A revision of another destination is no better than none.
    [other] = decide(None, Admit(d, workflow(environment="live")), NOW)
    assert isinstance(other, DeliveryRejected)
    assert other.reason == "unknown_subscription"


def test_missing_and_invalid_identity_fields() -> None:
    wf = workflow()
    missing = delivery(wf, candle(venue=None, rule=None), "m-1", NOW)
    assert missing.admission_key == rejection_key(wf.subscription, wf.environment, "m-1")
    [event] = decide(None, Admit(missing, wf), NOW)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "missing_identity_fields"
    assert "venue, rule" in event.detail

    invalid = delivery(wf, candle(candle_open="noon-ish"), "i-1", NOW)
    [event] = decide(None, Admit(invalid, wf), NOW)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "invalid_field"
    assert "candle_open" in event.detail


def test_payload_that_is_not_an_object_is_invalid() -> None:
    wf = workflow()
    d = dataclasses.replace(delivery(wf, A, "x-1", NOW), payload_json="[1, 2]")
    [event] = decide(None, Admit(d, wf), NOW)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "invalid_field"


def test_identity_mismatch_when_the_identity_changed_after_ingest() -> None:
    old = workflow()
    new = workflow(revision=2, identity_derived_fields=("venue", "instrument", "candle_open"))
    d = delivery(old, A, "a-1", NOW)
    [event] = decide(None, Admit(d, new), NOW)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "identity_mismatch"
    assert "publish the delivery again" in event.detail


def test_deduplication_reason_follows_the_original_run_status() -> None:
    for kind, reason in [
        (BranchCompleted, "completed"),
        (BranchSkipped, "skipped"),
        (BranchFailed, "failed"),
    ]:
        proc = Processor()
        key = key_of(A)
        run_id = run_id_for(key, 0)
        admit(proc, A, "a-1")
        proc.handle(RecordBranchReport(report(BranchStarted, run_id, key, "analysis")), NOW)
        [dup] = admit(proc, A, "a-2")
        assert dup.reason == "in_flight"  # type: ignore[union-attr]
        finish(proc, run_id, key, kind=kind)
        [dup] = admit(proc, A, "a-3")
        assert dup.reason == reason  # type: ignore[union-attr]


# --------------------------------------------------------------- branch reports


def admitted_state() -> tuple[Processor, str, str]:
    proc = Processor()
    admit(proc, A, "a-1")
    key = key_of(A)
    return proc, key, run_id_for(key, 0)


def test_started_moves_the_run_to_running_once() -> None:
    proc, key, run_id = admitted_state()
    started = report(BranchStarted, run_id, key, "analysis")
    events = proc.handle(RecordBranchReport(started), NOW + 1)
    assert events == [
        accepted(started),
        RunStatusChanged(run_id, key, "pending", "running", NOW + 1),
    ]
    assert proc.handle(RecordBranchReport(started), NOW + 2) == []  # repeated: nothing
    other = report(BranchStarted, run_id, key, "signal")
    assert proc.handle(RecordBranchReport(other), NOW + 3) == [accepted(other)]


def test_completions_are_idempotent_per_run_and_slot() -> None:
    proc, key, run_id = admitted_state()
    done = report(BranchCompleted, run_id, key, "analysis")
    assert proc.handle(RecordBranchReport(done), NOW) == [
        accepted(done),
        RunStatusChanged(run_id, key, "pending", "running", NOW),
    ]
    for _ in range(3):
        assert proc.handle(RecordBranchReport(done), NOW) == []
    # A late failure for the finished slot does not change it either.
    assert proc.handle(RecordBranchReport(report(BranchFailed, run_id, key, "analysis")), NOW) == []
    events = finish(proc, run_id, key, slots=("signal", "journal"))
    assert of_type(events, RunStatusChanged) == [
        RunStatusChanged(run_id, key, "running", "completed", NOW)
    ]


def test_outcome_without_start_and_failed_run() -> None:
    proc, key, run_id = admitted_state()
    events = finish(proc, run_id, key, slots=("analysis",), kind=BranchFailed)
    events += finish(proc, run_id, key, slots=("signal", "journal"), kind=BranchCompleted)
    assert [(e.previous_status, e.status) for e in of_type(events, RunStatusChanged)] == [
        ("pending", "running"),
        ("running", "failed"),
    ]


def test_all_skipped_run_is_skipped() -> None:
    proc, key, run_id = admitted_state()
    events = finish(proc, run_id, key, kind=BranchSkipped)
    assert of_type(events, RunStatusChanged)[-1].status == "skipped"


def test_unknown_run_slot_attempt_or_key_produce_nothing() -> None:
    proc, key, run_id = admitted_state()
    cases = [
        report(BranchCompleted, "run-nope", key, "analysis"),
        report(BranchCompleted, run_id, key, "nope"),
        report(BranchCompleted, run_id, key, "analysis", attempt=2),  # never launched
        report(BranchCompleted, run_id, key, "analysis", attempt=0),
        report(BranchCompleted, run_id, "other/key", "analysis"),
    ]
    for case in cases:
        assert proc.handle(RecordBranchReport(case), NOW, key=key) == []
    assert decide(None, RecordBranchReport(cases[0]), NOW) == []


def test_report_from_an_older_attempt_still_finishes_the_slot() -> None:
    proc, key, run_id = admitted_state()
    proc.timers(NOW + TIMEOUT)  # every slot relaunched: attempt 2
    late_start = report(BranchStarted, run_id, key, "analysis", attempt=1)
    assert proc.handle(RecordBranchReport(late_start), NOW + TIMEOUT + 1) == []
    late_done = report(BranchCompleted, run_id, key, "analysis", attempt=1)
    assert proc.handle(RecordBranchReport(late_done), NOW + TIMEOUT + 2)[0] == accepted(late_done)
    state = proc.state(key)
    assert state is not None
    slot = state.original.slot("analysis")
    assert slot is not None
    assert slot.status is BranchStatus.COMPLETED


# --------------------------------------------------------------- timers and eviction


def test_slot_attempts_run_out_then_the_processor_fails_it() -> None:
    proc, key, run_id = admitted_state()
    finish(proc, run_id, key, slots=("analysis", "signal"))
    t = NOW
    attempts = []
    for _ in range(DEFAULT_BRANCH_ATTEMPTS - 1):
        t += TIMEOUT
        [relaunch] = proc.timers(t)
        assert isinstance(relaunch, BranchRelaunched)
        attempts.append(relaunch.attempt)
    assert attempts == [2, 3]
    t += TIMEOUT
    failed, changed = proc.timers(t)
    assert failed == BranchFailed(
        run_id, key, "journal", 3, PROCESSOR_WORKER, "no result after 3 attempts", t
    )
    assert changed == RunStatusChanged(run_id, key, "running", "failed", t)
    assert proc.timers(t + 10 * TIMEOUT) == []  # finished slots are never relaunched
    state = proc.state(key)
    assert state is not None
    assert state.original.status is RunStatus.FAILED


def test_started_slot_that_goes_quiet_is_relaunched() -> None:
    proc, key, run_id = admitted_state()
    proc.handle(RecordBranchReport(report(BranchStarted, run_id, key, "analysis")), NOW)
    relaunched = proc.timers(NOW + TIMEOUT)
    assert {e.slot for e in of_type(relaunched, BranchRelaunched)} == set(SLOTS)
    assert not of_type(relaunched, RunStatusChanged)  # running stays running
    state = proc.state(key)
    assert state is not None
    assert state.original.status is RunStatus.RUNNING


def test_timeouts_with_no_start_fail_the_pending_run() -> None:
    proc, _key, _run_id = admitted_state()
    for i in range(1, DEFAULT_BRANCH_ATTEMPTS):
        proc.timers(NOW + i * TIMEOUT)
    events = proc.timers(NOW + DEFAULT_BRANCH_ATTEMPTS * TIMEOUT)
    assert len(of_type(events, BranchFailed)) == 3
    [changed] = of_type(events, RunStatusChanged)
    assert (changed.previous_status, changed.status) == ("pending", "failed")


def with_evict_at(proc: Processor, key: str, evict_at: int) -> OccurrenceState:
    state = proc.state(key)
    assert state is not None
    proc.states[key] = dataclasses.replace(state, evict_at_ms=evict_at)
    return proc.states[key]


def test_eviction_waits_for_every_slot_then_removes_the_record() -> None:
    proc, key, run_id = admitted_state()
    evict_at = NOW + 10
    state = with_evict_at(proc, key, evict_at)
    assert next_due_ms(state) == NOW + TIMEOUT  # unfinished slots come first
    finish(proc, run_id, key, slots=("analysis", "signal"))
    assert proc.handle(CheckTimers(), evict_at, key=key) == []
    finish(proc, run_id, key, slots=("journal",))
    assert next_due_ms(proc.state(key)) == evict_at
    assert proc.handle(CheckTimers(), evict_at - 1, key=key) == []
    events = proc.handle(CheckTimers(), evict_at, key=key)
    assert events == [AdmissionRecordEvicted(key, (run_id,), evict_at)]
    assert proc.state(key) is None
    assert next_due_ms(None) is None


def test_evict_at_follows_the_retention_when_the_event_carries_it() -> None:
    proc, key, _ = admitted_state()
    state = proc.state(key)
    assert state is not None
    [admitted] = of_type(proc.events, RunAdmitted)
    if hasattr(admitted, "retention_ms"):
        expected = T0 + MINUTE + 7 * 86_400_000 + EVICTION_MARGIN_MS
        assert state.evict_at_ms == expected
    else:
        # Until RunAdmitted carries the retention, records are kept (never evicted).
        assert state.evict_at_ms is None
        assert next_due_ms(state) == NOW + TIMEOUT


def test_a_copy_after_eviction_is_beyond_the_horizon() -> None:
    proc, key, run_id = admitted_state()
    finish(proc, run_id, key)
    evict_at = T0 + MINUTE + 7 * 86_400_000 + EVICTION_MARGIN_MS
    with_evict_at(proc, key, evict_at)
    proc.handle(CheckTimers(), evict_at, key=key)
    [event] = admit(proc, A, "a-late", now=evict_at)
    assert isinstance(event, DeliveryRejected)
    assert event.reason == "beyond_horizon"


# --------------------------------------------------------------- reruns


def test_authorized_rerun_admits_a_linked_run_and_copies_keep_the_original() -> None:
    proc, key, run_id = admitted_state()
    finish(proc, run_id, key)
    wf2 = workflow(revision=2, slots=("analysis", "signal"))
    at = NOW + 3_600_000
    events = proc.handle(Rerun(rerun_request(key, run_id, "rr-1", "revision 2"), wf2), at)
    [rerun] = of_type(events, RunAdmitted)
    assert rerun.run_id == run_id_for(key, 1)
    assert (rerun.rerun_number, rerun.rerun_of, rerun.rerun_reason) == (1, run_id, "revision 2")
    assert rerun.workflow_revision == 2
    assert rerun.delivery_id == "rr-1"
    assert rerun.admitted_at_ms == at
    assert rerun.source_time_ms == T0 + MINUTE
    assert rerun.expires_at_ms == T0 + MINUTE + 5_000  # the deadline is never renewed
    assert [e.slot for e in of_type(events, BranchLaunched)] == ["analysis", "signal"]
    assert {e.run_id for e in of_type(events, BranchLaunched)} == {rerun.run_id}

    [dup] = admit(proc, A, "a-9", now=at + 1)
    assert isinstance(dup, DeliveryDeduplicated)
    assert (dup.run_id, dup.reason) == (run_id, "completed")

    # Re-sending the same request does not start another rerun.
    again = proc.handle(Rerun(rerun_request(key, run_id, "rr-1", "revision 2"), wf2), at + 2)
    assert again == [RerunRejected("rr-1", key, run_id, "duplicate_request", at + 2)]
    # A new request may rerun the rerun; with no workflow it keeps the frozen revision.
    third = proc.handle(Rerun(rerun_request(key, rerun.run_id, "rr-2", "again"), None), at + 3)
    [rerun2] = of_type(third, RunAdmitted)
    assert (rerun2.rerun_number, rerun2.rerun_of, rerun2.workflow_revision) == (
        2,
        rerun.run_id,
        1,
    )
    assert len(of_type(third, BranchLaunched)) == 3


def test_rerun_rejections() -> None:
    proc, key, run_id = admitted_state()
    assert proc.handle(Rerun(rerun_request(key, "run-nope"), workflow()), NOW) == [
        RerunRejected("rr-1", key, "run-nope", "unknown_run", NOW)
    ]
    assert decide(None, Rerun(rerun_request("k", "r"), None), NOW) == [
        RerunRejected("rr-1", "k", "r", "unknown_run", NOW)
    ]
    [blank] = proc.handle(Rerun(rerun_request(key, run_id, reason=" "), None), NOW)
    assert isinstance(blank, RerunRejected)
    assert blank.reason == "missing_reason"


def test_rerun_runs_have_their_own_slots_and_status() -> None:
    proc, key, run_id = admitted_state()
    proc.handle(Rerun(rerun_request(key, run_id), None), NOW)
    rerun_id = run_id_for(key, 1)
    events = finish(proc, rerun_id, key)
    assert {e.run_id for e in of_type(events, RunStatusChanged)} == {rerun_id}
    state = proc.state(key)
    assert state is not None
    assert state.original.status is RunStatus.PENDING
    assert state.runs[1].status is RunStatus.COMPLETED


# --------------------------------------------------------------- time and corruption


def test_every_decision_records_the_now_it_used() -> None:
    proc, _, _ = admitted_state()
    [admitted, *launches] = of_type(proc.events, RunAdmitted) + of_type(proc.events, BranchLaunched)
    assert admitted.admitted_at_ms == NOW
    assert {e.launched_at_ms for e in launches} == {NOW}
    assert {e.timeout_at_ms for e in launches} == {NOW + TIMEOUT}
    [dup] = admit(proc, A, "a-2", now=NOW + 7)
    assert dup.decided_at_ms == NOW + 7  # type: ignore[union-attr]
    [relaunch, *_] = proc.timers(NOW + 99_999)
    assert relaunch.relaunched_at_ms == NOW + 99_999  # type: ignore[union-attr]
    assert relaunch.timeout_at_ms == NOW + 99_999 + TIMEOUT  # type: ignore[union-attr]


def test_evolve_is_loud_about_impossible_histories() -> None:
    proc, key, run_id = admitted_state()
    finish(proc, run_id, key)
    state = proc.state(key)
    launched_again = BranchLaunched(run_id, key, "analysis", 1, 1, 0, 0, "{}", NOW)
    with pytest.raises(IllegalTransition) as info:
        evolve(state, launched_again)
    assert (info.value.machine, info.value.from_state, info.value.to_state) == (
        "branch",
        "completed",
        "launched",
    )
    with pytest.raises(IllegalTransition):
        evolve(state, BranchRelaunched(run_id, key, "analysis", 2, 1, 0, 0, "{}", "r", NOW))
    with pytest.raises(IllegalTransition):
        evolve(state, RunStatusChanged(run_id, key, "completed", "running", NOW))
    with pytest.raises(InconsistentHistory):
        evolve(state, RunStatusChanged(run_id, key, "running", "completed", NOW))
    with pytest.raises(InconsistentHistory):
        evolve(state, accepted(report(BranchStarted, "run-nope", key, "analysis")))
    with pytest.raises(InconsistentHistory):
        evolve(None, accepted(report(BranchStarted, run_id, key, "analysis")))
    with pytest.raises(InconsistentHistory):
        evolve(state, accepted(report(BranchStarted, run_id, "other", "analysis")))
    [admitted] = of_type(proc.events, RunAdmitted)
    with pytest.raises(InconsistentHistory):
        evolve(state, admitted)  # rerun 0 again
    # Outcome events never touch the record.
    dup = DeliveryDeduplicated("x", key, run_id, "completed", NOW, NOW)
    assert evolve(state, dup) is state
    assert evolve(None, dup) is None


def test_missing_launches_are_recovered_by_the_timer() -> None:
    wf = workflow()
    d = delivery(wf, A, "a-1", NOW)
    admitted, *_launches = decide(None, Admit(d, wf), NOW)
    state = evolve(None, admitted)  # the launches were lost
    assert next_due_ms(state) == NOW
    events = decide(state, CheckTimers(), NOW + 1)
    assert [e.slot for e in of_type(events, BranchLaunched)] == list(SLOTS)
    assert {e.attempt for e in of_type(events, BranchLaunched)} == {1}
