"""An engine instance's /metrics page: every counter, the phase, the gauges and the lag."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from consumers.ingest.request_metrics import RequestMetrics
from sluicegate.instance_metrics import render, render_projector, render_worker
from streams.engine.batch import ProcessorStats
from streams.engine.effects import EffectStats
from streams.engine.lag import PartitionLag
from streams.engine.status import InstanceStatus, Phase
from tests.support.clocks import ManualClock
from tests.support.prometheus import Page


def _running(clock: ManualClock) -> InstanceStatus:
    status = InstanceStatus(stalled_after_s=60.0, clock=clock)
    status.enter(Phase.RESTORING)
    status.enter(Phase.RUNNING)
    status.holding((0, 2))
    return status


def test_every_counter_and_gauge_of_a_running_instance() -> None:
    clock = ManualClock(100.0)
    status = _running(clock)
    status.lagging((PartitionLag("p.deliveries", 0, 40, 45), PartitionLag("p.deliveries", 2, 9, 9)))
    clock.now += 2.5
    stats = ProcessorStats(records=7, events=30, batches=3, aborts=1, restarts=2, expired=4)
    stats.restore_seconds = 1.25
    page = Page(
        render(
            "admission", "processor-1", stats, status.snapshot(), now=clock(), stalled_after_s=60
        )
    )
    who = {"app": "admission", "instance_id": "processor-1"}
    assert page.value("sluicegate_engine_records_total", **who) == 7
    assert page.value("sluicegate_engine_events_total", **who) == 30
    assert page.value("sluicegate_engine_transactions_total", **who) == 3
    assert page.value("sluicegate_engine_aborts_total", **who) == 1
    assert page.value("sluicegate_engine_starts_over_total", **who) == 2
    assert page.value("sluicegate_engine_expired_offsets_total", **who) == 4
    assert page.value("sluicegate_engine_restore_seconds_total", **who) == 1.25
    phases = {dict(k)["phase"]: v for k, v in page.all("sluicegate_engine_phase").items()}
    assert phases == {p.value: float(p is Phase.RUNNING) for p in Phase}
    assert page.value("sluicegate_engine_ready", **who) == 1
    assert page.value("sluicegate_engine_healthy", **who) == 1
    assert page.value("sluicegate_engine_loop_seconds_ago", **who) == 2.5
    assert page.value("sluicegate_engine_assigned_partitions", **who) == 2
    lag = page.all("sluicegate_engine_input_lag_offsets", topic="p.deliveries")
    assert {dict(k)["partition"]: v for k, v in lag.items()} == {"0": 5, "2": 0}
    assert page.types["sluicegate_engine_input_lag_offsets"] == "gauge"
    assert page.types["sluicegate_engine_records_total"] == "counter"


def test_a_stalled_instance_is_unhealthy_and_one_starting_over_has_no_lag() -> None:
    clock = ManualClock(100.0)
    status = _running(clock)
    status.lagging((PartitionLag("t", 0, 1, 5),))
    clock.now += 61
    snapshot = status.snapshot()
    page = Page(render("gate", "g", ProcessorStats(), snapshot, now=clock(), stalled_after_s=60))
    assert page.value("sluicegate_engine_healthy") == 0
    assert page.value("sluicegate_engine_ready") == 1
    status.enter(Phase.STARTING_OVER, "the broker is away")
    page = Page(
        render("gate", "g", ProcessorStats(), status.snapshot(), now=clock(), stalled_after_s=60)
    )
    assert page.value("sluicegate_engine_ready") == 0
    assert page.value("sluicegate_engine_phase", phase="starting_over") == 1
    assert page.all("sluicegate_engine_input_lag_offsets") == {}
    status.lagging((PartitionLag("t", 0, 1, 5),))  # a sample taken as the phase changed
    assert status.snapshot().lag == ()


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_app_name_or_instance_id_is_escaped(app: str, instance_id: str) -> None:
    clock = ManualClock(0.0)
    snapshot = replace(_running(clock).snapshot(), lag=(PartitionLag(app, 1, 0, 3),))
    page = Page(render(app, instance_id, ProcessorStats(), snapshot, now=0.0, stalled_after_s=1))
    assert page.value("sluicegate_engine_records_total", app=app, instance_id=instance_id) == 0
    assert page.value("sluicegate_engine_input_lag_offsets", topic=app) == 3


def test_lag_never_counts_below_zero() -> None:
    assert PartitionLag("t", 0, 12, 10).offsets == 0
    assert PartitionLag("t", 0, 10, 12).offsets == 2


def test_an_instance_with_effects_counts_them_and_one_without_has_none() -> None:
    clock = ManualClock(0.0)
    snapshot = _running(clock).snapshot()
    effects = EffectStats(submitted=4, performed=3, late=1, dropped=0, failed=0)
    page = Page(
        render(
            "gateway", "gw", ProcessorStats(), snapshot, now=0, stalled_after_s=1, effects=effects
        )
    )
    assert page.value("sluicegate_engine_effects_submitted_total") == 4
    assert page.value("sluicegate_engine_effects_performed_total") == 3
    assert page.value("sluicegate_engine_effects_late_total") == 1
    plain = Page(render("admission", "p", ProcessorStats(), snapshot, now=0, stalled_after_s=1))
    assert not any(name.startswith("sluicegate_engine_effects_") for name in plain.types)


def test_a_projectors_page() -> None:
    stats = SimpleNamespace(messages=120, parked=1, batches=12, reconnects=0, reseeks=2)
    lagged = (PartitionLag("p.runs", 0, 10, 10), PartitionLag("p.runs", 1, 3, 9))
    text = render_projector("1/2", stats, lagged, ready=True, healthy=False, loop_seconds_ago=61.25)
    page = Page(text)
    who = {"app": "projector", "share": "1/2"}
    assert page.value("sluicegate_projector_messages_total", **who) == 120
    assert page.value("sluicegate_projector_reseeks_total", **who) == 2
    assert page.value("sluicegate_projector_ready", **who) == 1
    assert page.value("sluicegate_projector_healthy", **who) == 0
    assert page.value("sluicegate_projector_loop_seconds_ago", **who) == 61.25
    found = page.all("sluicegate_projector_lag_offsets", topic="p.runs")
    assert {dict(k)["partition"]: v for k, v in found.items()} == {"0": 0, "1": 6}


def test_a_workers_page() -> None:
    reports = {"BranchStarted": 4, "BranchCompleted": 3, "BranchFailed": 1, "BranchSkipped": 0}
    text = render_worker("w-1", 4, reports, healthy=True, loop_seconds_ago=0.5)
    page = Page(text)
    assert page.value("sluicegate_worker_tasks_handled_total", app="worker", worker="w-1") == 4
    found = page.all("sluicegate_worker_reports_total")
    assert {dict(k)["report"]: v for k, v in found.items()} == reports
    assert page.value("sluicegate_worker_healthy") == 1


def test_the_webhooks_answers_and_their_latency() -> None:
    metrics = RequestMetrics()
    for status, code, seconds in (
        (202, None, 0.004),
        (202, None, 0.02),
        (401, "unauthorized", 0.001),
        (503, "kafka_unavailable", 2.0),
        (200, None, 45.0),
    ):
        metrics.observe(status, code, seconds)
    page = Page(metrics.render())
    assert page.types["sluicegate_ingest_request_seconds"] == "histogram"
    assert page.value("sluicegate_ingest_requests_total", status="202", code="") == 2
    assert page.value("sluicegate_ingest_requests_total", status="401", code="unauthorized") == 1
    buckets = {
        dict(k)["le"]: v for k, v in page.all("sluicegate_ingest_request_seconds_bucket").items()
    }
    assert buckets["0.005"] == 2 and buckets["0.025"] == 3 and buckets["2.5"] == 4
    assert buckets["30.0"] == 4 and buckets["+Inf"] == 5
    assert page.value("sluicegate_ingest_request_seconds_count") == 5
    assert page.value("sluicegate_ingest_request_seconds_sum") == 47.025
