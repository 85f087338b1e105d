"""Admission bounds on the real broker: retention changes, identity changes, branch attempts,
deliveries that bypassed the front doors, and the size of what admission writes.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from schemas.commands import AdmitDelivery, AuthorizeRerun
from schemas.events import (
    AdmissionRecordEvicted,
    BranchCompleted,
    BranchFailed,
    BranchLaunched,
    BranchRelaunched,
    DeliveryRejected,
    RerunRejected,
    RunAdmitted,
)
from streams.core.canonical import canonical_json
from streams.core.errors import CoreError, IdentityError
from streams.core.identity import identify, rejection_key
from streams.core.limits import MAX_PAYLOAD_BYTES, MAX_RERUNS
from tests.support.admission import AdmissionHarness, candle
from tests.support.kafka import read_topic

pytestmark = pytest.mark.integration

HOUR = 3_600_000
KAFKA_MESSAGE_LIMIT = 1_048_588  # the broker's default message.max.bytes


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=1)
    yield h
    h.close()


def complete_launches(harness: AdmissionHarness, count: int) -> None:
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) >= count)
    for launched in out.of(BranchLaunched):
        harness.complete(launched)
    harness.wait_for(lambda o: len(o.of(BranchCompleted)) >= count)


def test_raising_retention_after_an_eviction_does_not_readmit(harness: AdmissionHarness) -> None:
    harness.apply_workflow(retention="1h")
    harness.start_processor()
    first = harness.deliver(candle())
    complete_launches(harness, 3)
    harness.clock.advance(2 * HOUR + 60_000)  # source time + 1 h retention + 1 h margin
    harness.wait_for(lambda o: bool(o.of(AdmissionRecordEvicted)))

    harness.apply_workflow(retention="30d")  # raised after the record was evicted
    late = harness.deliver(candle())
    out = harness.wait_for(lambda o: bool(o.outcome_for(late.delivery_id)))
    (outcome,) = out.outcome_for(late.delivery_id)
    assert isinstance(outcome, DeliveryRejected), outcome
    assert outcome.reason == "beyond_horizon"
    assert [r.delivery_id for r in out.of(RunAdmitted)] == [first.delivery_id]


def test_an_identity_change_is_refused_and_copies_keep_their_run(
    harness: AdmissionHarness,
) -> None:
    harness.apply_workflow()
    harness.start_processor()
    harness.deliver(candle())
    harness.wait_for_outcomes(1)
    reordered = ["instrument", "venue", "interval", "candle_open", "rule"]
    with pytest.raises(CoreError, match=r"identity\.derived"):
        harness.apply_workflow(identity__derived=reordered)
    copy = harness.deliver(candle())
    out = harness.wait_for(lambda o: bool(o.outcome_for(copy.delivery_id)))
    assert len(out.of(RunAdmitted)) == 1
    assert len(read_topic(harness.settings, harness.settings.topic_named("workflows"))) == 1


def test_branch_attempts_survive_a_restart_and_are_honoured(harness: AdmissionHarness) -> None:
    harness.apply_workflow(branch_attempts=2, branch_timeout="10s")
    harness.start_processor()
    harness.deliver(candle())
    out = harness.wait_for(lambda o: len(o.of(BranchLaunched)) == 3)
    for launched in out.of(BranchLaunched):
        if launched.slot != "journal":
            harness.complete(launched)
    harness.wait_for(lambda o: len(o.of(BranchCompleted)) == 2)
    harness.restart_processor()  # the limit comes back from the changelog with the run
    harness.clock.advance(11_000)
    harness.wait_for(lambda o: len(o.of(BranchRelaunched)) == 1)
    harness.clock.advance(11_000)
    out = harness.wait_for(lambda o: bool(o.of(BranchFailed)))
    (failed,) = out.of(BranchFailed)
    assert (failed.slot, failed.attempt) == ("journal", 2)
    assert failed.error == "no result after 2 attempts"
    assert len(out.of(BranchRelaunched)) == 1


def raw_delivery(harness: AdmissionHarness, delivery_id: str, **changes: object) -> AdmitDelivery:
    """A delivery as an older front door (without the new checks) would have produced it."""
    workflow = harness.table.lookup("btc-breakout", "paper")
    assert workflow is not None
    payload = candle(**changes)
    try:
        key = identify(workflow, payload).admission_key
    except IdentityError:
        key = rejection_key("btc-breakout", "paper", delivery_id)
    return AdmitDelivery(
        delivery_id=delivery_id,
        subscription="btc-breakout",
        environment="paper",
        admission_key=key,
        source="tradingview",
        event_id=None,
        payload_json=canonical_json(payload),
        received_at_ms=harness.clock(),
        channel="publish",
    )


def test_deliveries_that_bypassed_the_doors_are_still_refused(harness: AdmissionHarness) -> None:
    harness.apply_workflow()
    harness.start_processor()
    harness.send(raw_delivery(harness, "future", candle_open="2030-01-01T00:00:00Z"))
    harness.send(raw_delivery(harness, "huge", note="x" * 200_000))
    harness.send(raw_delivery(harness, "nul", instrument="BTC\u0000USDT"))
    out = harness.wait_for_outcomes(3)
    reasons = {r.delivery_id: r.reason for r in out.of(DeliveryRejected)}
    assert reasons == {
        "future": "source_time_in_future",
        "huge": "payload_too_large",
        "nul": "invalid_field",
    }
    assert not out.of(RunAdmitted)


def test_reruns_are_bounded_and_no_state_record_nears_the_message_limit(
    harness: AdmissionHarness,
) -> None:
    harness.apply_workflow()
    harness.start_processor()
    payload = candle()
    payload["note"] = "x" * (MAX_PAYLOAD_BYTES - len(canonical_json(payload)) - 20)
    first = harness.deliver(payload)
    out = harness.wait_for_outcomes(1)
    (admitted,) = out.of(RunAdmitted)
    for i in range(MAX_RERUNS + 3):
        harness.send(
            AuthorizeRerun(
                request_id=f"rerun-{i}",
                admission_key=first.admission_key,
                run_id=admitted.run_id,
                reason="load test of a large payload",
                requested_by="test",
                requested_at_ms=harness.clock(),
            )
        )
    out = harness.wait_for(
        lambda o: len(o.of(RunAdmitted)) + len(o.of(RerunRejected)) == MAX_RERUNS + 4,
        timeout_s=120,
    )
    assert len(out.of(RunAdmitted)) == MAX_RERUNS + 1
    assert {r.reason for r in out.of(RerunRejected)} == {"rerun_limit"}
    changelog = read_topic(harness.settings, harness.settings.topic_named("admission-changelog"))
    largest = max(len(m.value() or b"") + len(m.key() or b"") for m in changelog)
    assert largest < 2 * MAX_PAYLOAD_BYTES < KAFKA_MESSAGE_LIMIT, largest
    assert orjson.loads(admitted.payload_json)["note"] == payload["note"]
