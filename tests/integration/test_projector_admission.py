"""The projection of what the real admission processor writes: the article's example.

Four deliveries of A (two concurrent, one after completion, one after a processor restart)
and one of B, run by the real processor (``tests/support/admission.py``); then an authorized
rerun through ``sluicegate runs rerun``; then ``sluicegate projections rebuild --verify``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from projections import queries
from projections.projector import Projector
from schemas.events import BranchLaunched, RunAdmitted, RunStatusChanged
from tests.support.admission import AdmissionHarness, candle
from tests.support.history import cleanup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SLUICEGATE = str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=3)
    h.apply_workflow()
    yield h
    h.close()
    cleanup(h.settings)


def _cli(harness: AdmissionHarness, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=harness.settings.topic_prefix,
        SLUICEGATE_PARTITIONS=str(harness.settings.partitions),
        USER="operator-1",
    )
    return subprocess.run(
        [SLUICEGATE, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )


def test_article_example_projects_to_two_runs_and_six_launches(
    harness: AdmissionHarness,
) -> None:
    harness.start_processor()
    first = harness.deliver(candle())
    harness.deliver(candle())
    out = harness.wait_for_outcomes(2)
    for launched in out.of(BranchLaunched):
        harness.complete(launched)
    harness.wait_for(
        lambda o: any(isinstance(r, RunStatusChanged) and r.status == "completed" for r in o.runs)
    )
    harness.deliver(candle())
    harness.wait_for_outcomes(3)
    harness.restart_processor()
    harness.deliver(candle())
    harness.deliver(candle(candle_open="2026-11-30T12:01:00Z"))
    out = harness.wait_for_outcomes(5)
    run_a = next(r for r in out.of(RunAdmitted) if r.delivery_id == first.delivery_id)

    projector = Projector(harness.settings)
    projector.run_until(timeout_s=60)
    follower = threading.Thread(target=projector.run, daemon=True)
    follower.start()
    try:
        done = _cli(harness, "runs", "rerun", run_a.run_id, "--reason", "audit", "--wait", "60")
        assert done.returncode == 0, done.stderr
        assert "new run:" in done.stdout
    finally:
        projector.stop.set()
        follower.join(30)
        projector.close()

    with queries.reader(harness.settings) as (conn, schema):
        stats = queries.get_stats(conn, schema)
        run = queries.get_run(conn, schema, run_a.run_id)
        occurrence = queries.get_occurrence(conn, schema, run_a.admission_key)
    assert stats["deliveries"] == 5
    assert stats["runs_admitted"] == 3  # A, B and the rerun of A
    assert sum(stats["duplicates"].values()) == 3
    assert stats["duplicates"] == {"in_flight": 1, "completed": 2}
    assert stats["branch_launches"] == 9
    assert run is not None and occurrence is not None
    assert run["status"] == "completed"
    assert {s["status"] for s in run["slots"]} == {"completed"}
    assert len(run["reruns"]) == 1
    assert [d["outcome"] for d in occurrence["deliveries"]] == [
        "admitted",
        "deduplicated",
        "deduplicated",
        "deduplicated",
    ]
    assert occurrence["rerun_requests"][0]["admitted_run_id"] == run["reruns"][0]
    assert occurrence["rerun_requests"][0]["requested_by"] == "operator-1"

    timeline = _cli(harness, "runs", "timeline", run_a.run_id, "--json")
    assert timeline.returncode == 0, timeline.stderr
    types = [orjson.loads(line)["type"] for line in timeline.stdout.splitlines()]
    assert types[0] == "AdmitDelivery" and "RunAdmitted" in types and "AuthorizeRerun" in types

    verify = _cli(harness, "projections", "rebuild", "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout == ""
