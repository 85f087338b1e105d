"""kill -9 drills of the gate and of a worker: a restart keeps every deadline.

``sluicegate gate`` runs as a child process on the wall clock. Candidates with short windows
are accepted, the gate is SIGKILLed (by its pid) and restarted with the same instance id:
the restored state still holds each candidate to its original deadline (a pending one
expires at exactly that deadline, never a renewed one), a request after the restart is
dispatched with the original deadline, and copies of decided records produce nothing. A
``sluicegate worker`` SIGKILLed in the middle of an approval is restarted after the deadline:
it takes the same task again, with the same deadline, and skips it (``expired_at_dequeue``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.events import (
    BranchCompleted,
    BranchLaunched,
    BranchSkipped,
    BranchStarted,
    CandidateAccepted,
    CandidateExpired,
    RunAdmitted,
)
from streams.settings import Settings
from tests.support.admission import AdmissionHarness, candle
from tests.support.component_process import ComponentProcess
from tests.support.gate import SCOPE, proposal, request
from tests.support.gate_broker import Decisions, GateHarness
from tests.support.kafka import wait_until

pytestmark = pytest.mark.drill


def gate_process(settings: Settings, log_path: Path) -> ComponentProcess:
    """``sluicegate gate`` as a child process (one instance id, so a restart is the same
    instance)."""
    return ComponentProcess(settings, "gate", ["--instance-id", "gate-drill"], log_path=log_path)


@pytest.fixture()
def drill(tmp_path: Path) -> Iterator[tuple[GateHarness, ComponentProcess]]:
    harness = GateHarness(partitions=3)
    process = gate_process(harness.settings, tmp_path / "gate.log")
    process.start()
    yield harness, process
    process.stop()
    harness.close()


def test_a_gate_killed_with_sigkill_keeps_every_deadline(
    drill: tuple[GateHarness, ComponentProcess],
) -> None:
    harness, gate = drill
    now = time.time_ns() // 1_000_000
    # Short windows on the wall clock: one expires while the gate is down, one survives it.
    expiring = [
        proposal(i, scope_key=f"{SCOPE}|d={i}", source_time_ms=now, window_ms=6_000)
        for i in range(1, 6)
    ]
    lasting = [
        proposal(i, scope_key=f"{SCOPE}|d={i}", source_time_ms=now, window_ms=600_000)
        for i in range(6, 11)
    ]
    harness.send(*expiring, *lasting)
    harness.wait_for(lambda d: len(d.of(CandidateAccepted)) == 10)

    gate.kill9()
    time.sleep(1)  # not a speed assertion: the killed instance's transaction stays open
    gate.start()
    harness.send(*(request(p, time.time_ns() // 1_000_000) for p in lasting))
    # The copies of already-decided proposals after the restart must produce nothing.
    harness.send(*lasting)

    def done(d: Decisions) -> bool:
        return len(d.dispatched) == 5 and len(d.of(CandidateExpired)) == 5

    out = harness.wait_for(done, timeout_s=120)
    deadlines = {p.candidate_id: p.expires_at_ms for p in expiring + lasting}
    for e in out.of(CandidateExpired):
        assert e.reason == "deadline_passed"
        assert e.expires_at_ms == deadlines[e.candidate_id]  # the original, not a renewed one
        assert e.decided_at_ms >= e.expires_at_ms
    for d in out.dispatched:
        assert d.expires_at_ms == deadlines[d.action_id]
        assert d.dispatched_at_ms + d.clock_uncertainty_ms < d.expires_at_ms
    time.sleep(2)  # let anything duplicated surface before the final count
    out = harness.read()
    ends = Counter(
        [e.candidate_id for e in out.decisions if not isinstance(e, CandidateAccepted)]
        + [d.action_id for d in out.dispatched]
    )
    assert set(ends.values()) == {1} and len(ends) == 10
    assert len(out.of(CandidateAccepted)) == 10


def worker_process(settings: Settings, log_path: Path) -> ComponentProcess:
    """``sluicegate worker`` serving the approving slot, as a child process."""
    return ComponentProcess(
        settings,
        "worker",
        ["--slot", "analysis"],
        log_path=log_path,
        # The killed member holds its partitions until its session times out: the broker's
        # minimum (6 s) instead of 45 s, so the restarted worker takes over soon.
        env={
            "SLUICEGATE_RDKAFKA_SESSION_TIMEOUT_MS": "6000",
            "SLUICEGATE_RDKAFKA_HEARTBEAT_INTERVAL_MS": "1000",
        },
    )


def test_a_worker_killed_with_sigkill_mid_task_gets_no_new_window(tmp_path: Path) -> None:
    harness = AdmissionHarness(partitions=3)
    worker = worker_process(harness.settings, tmp_path / "worker.log")
    try:
        harness.apply_workflow()
        # Admission's clock is fixed at the wall clock of now; the candle closes now, so the
        # run's deadline is 5 s away on the worker's wall clock.
        now = time.time_ns() // 1_000_000
        harness.clock.now_ms = now
        harness.start_processor()
        worker.start()
        harness.deliver(candle(candle_open=now - 60_000, demo_approval_delay_ms=4_000))
        out = harness.wait_for(lambda o: o.of(BranchStarted) and o.of(RunAdmitted))
        [run] = out.of(RunAdmitted)
        worker.kill9()  # mid-approval: its offset was never committed
        wait_until(lambda: time.time_ns() // 1_000_000 > run.expires_at_ms, timeout_s=30)
        worker.start()  # takes the same task again, after the deadline
        out = harness.wait_for(lambda o: o.of(BranchSkipped), timeout_s=120)
    finally:
        worker.stop()
        harness.close()
    [skipped] = out.of(BranchSkipped)
    assert (skipped.slot, skipped.reason) == ("analysis", "expired_at_dequeue")
    assert skipped.skipped_at_ms >= run.expires_at_ms - run.clock_uncertainty_ms
    tasks = [t for t in out.of(BranchLaunched) if t.slot == "analysis"]
    assert [t.expires_at_ms for t in tasks] == [run.expires_at_ms]
    assert not out.of(BranchCompleted)
