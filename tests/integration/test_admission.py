"""Run admission on the real broker: the seed article's tables and failure checks.

Four deliveries of A (two concurrent, one after completion, one after a processor restart)
plus B give 2 runs and 6 branch launches, not 15; and every case of "Check the admission
record under failure".
"""

from __future__ import annotations

import pytest

from schemas.codec import decode
from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchLaunched,
    BranchRelaunched,
    DeliveryDeduplicated,
    DeliveryRejected,
    OccurrenceConflict,
    RerunRejected,
    RunAdmitted,
    RunStatusChanged,
)
from schemas.topics import BRANCH_RESULTS
from streams.core.identity import rejection_key
from tests.support.admission import T0, AdmissionHarness, Outcomes, candle
from tests.support.kafka import read_topic, wait_until

pytestmark = pytest.mark.integration

SLOTS = 3


def missing_identity(harness: AdmissionHarness) -> AdmitDelivery:
    """A delivery of btc-breakout whose payload lacks its identity fields (keyed as ingest
    keys what it cannot identify)."""
    return AdmitDelivery(
        delivery_id="d-missing",
        subscription="btc-breakout",
        environment="paper",
        admission_key=rejection_key("btc-breakout", "paper", "d-missing"),
        source="tradingview",
        event_id=None,
        payload_json='{"instrument":"BTCUSDT"}',
        received_at_ms=harness.clock(),
        channel="publish",
    )


def test_four_deliveries_of_a_and_one_of_b_give_two_runs_and_six_launches(
    harness: AdmissionHarness,
) -> None:
    harness.start_processor()
    # Two concurrent copies of A: one admission decision, the other answered with its run.
    first_a = harness.deliver(candle())
    second_a = harness.deliver(candle())
    out = harness.wait_for_outcomes(2)
    (admitted,) = out.of(RunAdmitted)
    (dedup,) = out.of(DeliveryDeduplicated)
    assert admitted.delivery_id == first_a.delivery_id
    assert (dedup.delivery_id, dedup.run_id, dedup.reason) == (
        second_a.delivery_id,
        admitted.run_id,
        "in_flight",
    )
    assert len(out.of(BranchLaunched)) == SLOTS

    # The run completes; a third copy is answered with the completed run.
    for launched in out.of(BranchLaunched):
        harness.complete(launched)
    harness.wait_for(
        lambda o: any(isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs)
    )
    third_a = harness.deliver(candle())
    out = harness.wait_for_outcomes(3)
    assert out.outcome_for(third_a.delivery_id)[0].reason == "completed"

    # A restart on another host (no local store to keep): the fourth copy finds the run in
    # state restored from the changelog. (The same instance restarted keeps its store.)
    processor = harness.restart_processor("p2")
    fourth_a = harness.deliver(candle())
    first_b = harness.deliver(candle(candle_open="2026-11-30T12:01:00Z"))
    out = harness.wait_for_outcomes(5)
    assert processor.stats.restored_records > 0
    (fourth,) = out.outcome_for(fourth_a.delivery_id)
    assert isinstance(fourth, DeliveryDeduplicated)
    assert (fourth.run_id, fourth.reason) == (admitted.run_id, "completed")
    (run_b,) = out.outcome_for(first_b.delivery_id)
    assert isinstance(run_b, RunAdmitted) and run_b.run_id != admitted.run_id

    assert len(out.of(RunAdmitted)) == 2
    assert len(out.of(BranchLaunched)) == 6
    assert set(out.launches_per_run().values()) == {SLOTS}
    # Completions are counted once each, however the worker repeats them.
    assert len(out.of(BranchCompleted)) == SLOTS


def test_repeated_branch_reports_count_once(harness: AdmissionHarness) -> None:
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == SLOTS)
    for launched in out.of(BranchLaunched):
        for _ in range(3):
            harness.complete(launched)
    out = harness.wait_for(
        lambda o: any(isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs)
    )
    harness.deliver(candle())  # a marker: once its outcome is out, every report was decided
    out = harness.wait_for_outcomes(2)
    assert len(out.of(BranchCompleted)) == SLOTS
    statuses = [r.status for r in out.of(RunStatusChanged)]
    assert statuses == ["running", "completed"]


def test_reports_written_before_0_2_0_are_accepted_like_claims(harness: AdmissionHarness) -> None:
    """Workers before 0.2.0 wrote ``BranchCompleted`` itself to ``branch-results``: such a
    record still completes its slot, and together with the new claim it counts once."""
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == SLOTS)
    first, *others = out.of(BranchLaunched)
    legacy = BranchCompleted(
        first.run_id, first.admission_key, first.slot, first.attempt, "old-worker", "{}", 1
    )
    harness.report(legacy)
    harness.complete(first)  # the same result again, as a claim
    for launched in others:
        harness.complete(launched)
    harness.wait_for(
        lambda o: any(isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs)
    )
    harness.deliver(candle())  # a marker: once its outcome is out, every report was decided
    out = harness.wait_for_outcomes(2)
    accepted = out.of(BranchCompleted)
    assert len(accepted) == SLOTS
    assert [c for c in accepted if c.slot == first.slot] == [legacy]
    claims = [
        decode(m.value() or b"")
        for m in read_topic(harness.settings, harness.settings.topic(BRANCH_RESULTS))
    ]
    assert [type(c).__name__ for c in claims].count("ReportBranchCompleted") == SLOTS


def test_a_redeploy_between_retries_keeps_the_original_revision(
    harness: AdmissionHarness,
) -> None:
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for_outcomes(1)
    (admitted,) = out.of(RunAdmitted)
    assert admitted.workflow_revision == 1

    revised = harness.apply_workflow(validity__window="9s")
    assert revised.revision == 2
    retry = harness.deliver(candle())
    out = harness.wait_for_outcomes(2)
    (dedup,) = out.outcome_for(retry.delivery_id)
    assert isinstance(dedup, DeliveryDeduplicated) and dedup.run_id == admitted.run_id
    assert len(out.of(RunAdmitted)) == 1
    # A new occurrence after the redeploy is admitted under the new revision.
    harness.deliver(candle(candle_open="2026-11-30T12:01:00Z"))
    out = harness.wait_for_outcomes(3)
    assert sorted(r.workflow_revision for r in out.of(RunAdmitted)) == [1, 2]


def test_changed_content_under_the_same_identity_is_a_conflict(harness: AdmissionHarness) -> None:
    harness.start_processor()
    harness.deliver(candle(event_id="evt-1"))
    changed = harness.deliver(candle(event_id="evt-1", side="sell", price="96000"))
    out = harness.wait_for_outcomes(2)
    (conflict,) = out.outcome_for(changed.delivery_id)
    assert isinstance(conflict, OccurrenceConflict)
    (admitted,) = out.of(RunAdmitted)
    assert conflict.run_id == admitted.run_id
    assert set(conflict.differing_fields) >= {"side", "price"}
    assert len(out.of(BranchLaunched)) == SLOTS  # the original run is untouched


def test_a_new_candle_with_identical_values_is_a_new_run(harness: AdmissionHarness) -> None:
    harness.start_processor()
    harness.deliver(candle())
    harness.deliver(candle(candle_open="2026-11-30T12:01:00Z"))
    out = harness.wait_for_outcomes(2)
    assert len({r.run_id for r in out.of(RunAdmitted)}) == 2


def test_rfc3339_and_epoch_ms_copies_are_one_occurrence(harness: AdmissionHarness) -> None:
    harness.start_processor()
    harness.deliver(candle())
    epoch_copy = harness.deliver(candle(candle_open=T0 - 60_000))
    out = harness.wait_for_outcomes(2)
    assert isinstance(out.outcome_for(epoch_copy.delivery_id)[0], DeliveryDeduplicated)


def test_a_delivery_beyond_the_horizon_is_rejected(harness: AdmissionHarness) -> None:
    harness.start_processor()
    old = harness.deliver(candle(candle_open="2026-11-20T12:00:00Z"))  # ten days old; horizon 7d
    out = harness.wait_for_outcomes(1)
    (rejected,) = out.outcome_for(old.delivery_id)
    assert isinstance(rejected, DeliveryRejected) and rejected.reason == "beyond_horizon"
    assert not out.of(RunAdmitted)


def test_one_event_for_two_subscriptions_gives_two_runs(harness: AdmissionHarness) -> None:
    harness.apply_workflow(subscription="eth-momentum")
    harness.start_processor()
    harness.deliver(candle())
    harness.deliver(candle(), subscription="eth-momentum")
    out = harness.wait_for_outcomes(2)
    runs = out.of(RunAdmitted)
    assert len({r.run_id for r in runs}) == 2
    assert {r.subscription for r in runs} == {"btc-breakout", "eth-momentum"}
    assert len(out.of(BranchLaunched)) == 2 * SLOTS


def test_paper_and_live_are_separate_destinations(harness: AdmissionHarness) -> None:
    harness.apply_workflow(environment="live")
    harness.start_processor()
    harness.deliver(candle())
    harness.deliver(candle(), environment="live")
    out = harness.wait_for_outcomes(2)
    assert {r.environment for r in out.of(RunAdmitted)} == {"paper", "live"}


def test_a_restart_right_after_admission_loses_no_launch(harness: AdmissionHarness) -> None:
    harness.start_processor()
    delivery = harness.deliver(candle())
    harness.wait_for_outcomes(1)
    harness.stop_processors()  # right after the admission transaction committed
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for_outcomes(2)
    (admitted,) = out.of(RunAdmitted)
    assert admitted.delivery_id == delivery.delivery_id
    assert out.launches_per_run() == {admitted.run_id: SLOTS}


def test_only_the_missing_slot_is_relaunched_under_the_same_run(
    harness: AdmissionHarness,
) -> None:
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == SLOTS)
    launched = sorted(out.of(BranchLaunched), key=lambda b: b.slot)
    for done in launched[:2]:
        harness.complete(done)
    harness.wait_for(lambda o: len(o.of(BranchCompleted)) == 2)
    harness.clock.advance(31_000)  # past the 30 s branch timeout
    out = harness.wait_for(lambda o: len(o.of(BranchRelaunched)) >= 1)
    (relaunch,) = out.of(BranchRelaunched)
    assert relaunch.slot == launched[2].slot
    assert relaunch.run_id == launched[2].run_id and relaunch.attempt == 2
    assert relaunch.expires_at_ms == launched[2].expires_at_ms  # the deadline never stretches
    harness.complete(relaunch)
    out = harness.wait_for(
        lambda o: any(isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs)
    )
    assert len(out.of(RunAdmitted)) == 1
    assert len(out.of(BranchLaunched)) == SLOTS


def test_an_authorized_rerun_admits_a_linked_run(harness: AdmissionHarness) -> None:
    harness.start_processor()
    first = harness.deliver(candle())
    out = harness.wait_for_outcomes(1)
    (original,) = out.of(RunAdmitted)
    harness.send(
        AuthorizeRerun(
            request_id="rerun-1",
            admission_key=first.admission_key,
            run_id=original.run_id,
            reason="research: revision 2 on historical data",
            requested_by="test",
            requested_at_ms=harness.clock(),
        )
    )
    harness.send(
        AuthorizeRerun(
            request_id="rerun-2",
            admission_key=first.admission_key,
            run_id="run-does-not-exist",
            reason="typo",
            requested_by="test",
            requested_at_ms=harness.clock(),
        )
    )
    out = harness.wait_for(lambda o: len(o.of(RunAdmitted)) == 2 and o.of(RerunRejected))
    rerun = next(r for r in out.of(RunAdmitted) if r.rerun_number == 1)
    assert rerun.rerun_of == original.run_id and rerun.run_id != original.run_id
    assert out.launches_per_run()[rerun.run_id] == SLOTS
    # Deliveries keep mapping to the original run.
    again = harness.deliver(candle())
    out = harness.wait_for(lambda o: bool(o.outcome_for(again.delivery_id)))
    assert out.outcome_for(again.delivery_id)[0].run_id == original.run_id


def test_unknown_subscription_and_missing_identity_are_rejected(
    harness: AdmissionHarness,
) -> None:
    harness.start_processor()
    unknown = AdmitDelivery(
        delivery_id="d-unknown",
        subscription="nobody",
        environment="paper",
        admission_key=rejection_key("nobody", "paper", "d-unknown"),
        source="tradingview",
        event_id=None,
        payload_json="{}",
        received_at_ms=harness.clock(),
        channel="publish",
    )
    missing = missing_identity(harness)
    harness.send(unknown)
    harness.send(missing)
    out: Outcomes = harness.wait_for_outcomes(2)
    reasons = {r.delivery_id: r.reason for r in out.of(DeliveryRejected)}
    assert reasons == {"d-unknown": "unknown_subscription", "d-missing": "missing_identity_fields"}


def test_records_are_evicted_after_the_horizon_with_a_changelog_tombstone(
    harness: AdmissionHarness,
) -> None:
    harness.apply_workflow(retention="1h")
    harness.start_processor()
    first = harness.deliver(candle())
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == SLOTS)
    for launched in out.of(BranchLaunched):
        harness.complete(launched)
    harness.wait_for(lambda o: len(o.of(BranchCompleted)) == SLOTS)

    # Not yet: within retention + margin the record stays, and a copy is a duplicate.
    harness.clock.advance(60 * 60_000)
    early = harness.deliver(candle())
    out = harness.wait_for(lambda o: bool(o.outcome_for(early.delivery_id)))
    assert isinstance(out.outcome_for(early.delivery_id)[0], DeliveryDeduplicated)

    harness.clock.advance(2 * 60 * 60_000)  # past source time + 1 h retention + 1 h margin
    out = harness.wait_for(lambda o: bool(o.of(AdmissionRecordEvicted)))
    (evicted,) = out.of(AdmissionRecordEvicted)
    assert evicted.admission_key == first.admission_key

    changelog = read_topic(harness.settings, harness.settings.topic_named("admission-changelog"))
    state_key = f"s/{first.admission_key}".encode()
    last = [m for m in changelog if m.key() == state_key][-1]
    assert last.value() is None, "eviction must leave a tombstone in the changelog"

    # A copy arriving after eviction is beyond the horizon: rejected, never a second run.
    late = harness.deliver(candle())
    out = harness.wait_for(lambda o: bool(o.outcome_for(late.delivery_id)))
    (rejected,) = out.outcome_for(late.delivery_id)
    assert isinstance(rejected, DeliveryRejected) and rejected.reason == "beyond_horizon"
    assert len(out.of(RunAdmitted)) == 1


def test_duplicates_and_rejections_write_nothing_to_the_changelog() -> None:
    """A duplicate's answer leaves the state as it was, and a rejection has none: neither
    adds a changelog record (before, each duplicate rewrote the whole state and each
    rejection wrote a tombstone for a key that never existed, and later each duplicate still
    wrote its occurrence's timer entry again, due when it was). One partition, so that once
    the last occurrence's record is visible every earlier transaction's is too."""
    harness = AdmissionHarness(partitions=1)
    try:
        harness.apply_workflow()
        harness.start_processor()
        first = harness.deliver(candle())
        harness.wait_for(lambda o: len(o.of(BranchLaunched)) == SLOTS)
        for _ in range(5):
            harness.deliver(candle())
        rejected = missing_identity(harness)
        harness.send(rejected)
        last = harness.deliver(candle(rule="breakout-v2"))
        out = harness.wait_for(lambda o: bool(o.outcome_for(last.delivery_id)))
        assert len(out.of(DeliveryDeduplicated)) == 5
        assert out.outcome_for(rejected.delivery_id)
        changelog = harness.settings.topic_named("admission-changelog")
        last_key = f"s/{last.admission_key}".encode()
        keys: list[bytes] = []

        def last_is_visible() -> bool:
            keys[:] = [m.key() or b"" for m in read_topic(harness.settings, changelog)]
            return last_key in keys

        wait_until(last_is_visible, timeout_s=30)
        first_key = f"s/{first.admission_key}".encode()
        assert keys.count(first_key) == 1
        first_timers = [k for k in keys if k.startswith(b"t/") and k.endswith(first_key[1:])]
        assert len(first_timers) == 1, first_timers
        assert not [k for k in keys if rejected.admission_key.encode() in k]
    finally:
        harness.close()
