"""The branch-worker SDK on the real broker: it reports claims, admission writes the facts."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from consumers.branch_worker import BranchWorker, Task, demo_handler
from schemas.codec import decode
from schemas.commands import ReportBranchCompleted, ReportBranchStarted
from schemas.events import BranchCompleted, BranchStarted, RunStatusChanged
from schemas.topics import BRANCH_RESULTS
from tests.support.admission import AdmissionHarness, candle
from tests.support.kafka import read_topic

pytestmark = pytest.mark.integration


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=3)
    h.apply_workflow()
    yield h
    h.close()


def test_a_worker_claims_and_admission_accepts_each_result_once(harness: AdmissionHarness) -> None:
    seen: list[Task] = []

    def handler(task: Task) -> dict[str, object]:
        seen.append(task)
        return demo_handler(task)

    worker = BranchWorker(harness.settings, handler, deadline_slots=[], name="sdk-test")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        harness.start_processor()
        harness.deliver(candle())
        out = harness.wait_for(
            lambda o: any(
                isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs
            )
        )
    finally:
        worker.stop()
        thread.join(30)
    slots = {"analysis", "signal", "journal"}
    assert {t.slot for t in seen} == slots
    assert {e.slot for e in out.of(BranchStarted)} == slots
    completed = out.of(BranchCompleted)
    assert sorted(e.slot for e in completed) == sorted(slots)
    assert {e.worker for e in completed} == {"sdk-test"}
    claims = [
        decode(m.value() or b"")
        for m in read_topic(harness.settings, harness.settings.topic(BRANCH_RESULTS))
    ]
    assert {type(c) for c in claims} == {ReportBranchStarted, ReportBranchCompleted}
    assert len(claims) == 2 * len(slots)
