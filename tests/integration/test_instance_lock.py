"""One ``--instance-id`` runs once per state directory: a second process refuses to start.

Started while the first still runs (or is frozen), a second instance with the same id and
state directory used to initialise the same transactional id, fencing the first, and opened,
wiped and checkpointed the same store directories the first had open. It now stops before
it touches Kafka or a store, with one line naming the process that holds the directory, and
the first goes on as if nothing happened. A process killed with SIGKILL holds nothing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from schemas.events import RunAdmitted
from tests.support.admission import OUTCOMES, AdmissionHarness, candle
from tests.support.component_process import ProcessorProcess
from tests.support.kafka import wait_until

pytestmark = pytest.mark.integration


def outcomes(harness: AdmissionHarness) -> int:
    return sum(isinstance(r, OUTCOMES) for r in harness.outcomes().runs)


def test_a_second_processor_with_the_same_id_refuses_to_start_and_fences_nobody(
    tmp_path: Path,
) -> None:
    harness = AdmissionHarness(partitions=3)
    harness.apply_workflow(branch_timeout="1h")
    opened = harness.clock.to_wall_clock()  # the processors are processes on the wall clock
    first = ProcessorProcess(harness.settings, "same", tmp_path / "first")
    second = ProcessorProcess(harness.settings, "same", tmp_path / "second")
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    try:
        first.start()
        harness.deliver(candle(event_id="lock-1", candle_open=opened))
        harness.wait_for_outcomes(1, timeout_s=60)
        assert first.process is not None
        first.pause()  # frozen: it holds its stores, its sockets and the directory

        second.start()
        assert second.process is not None
        try:
            code = second.process.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail("a second instance with the same id started: " + second.log_tail())
        line = second.log_tail().strip()
        assert code == 1, line
        assert "already running" in line and f"pid {first.process.pid}" in line, line
        assert "Traceback" not in line and "kept" not in line, line

        first.resume()  # not fenced: it admits on
        harness.deliver(candle(event_id="lock-2", candle_open=opened))
        harness.wait_for_outcomes(2, timeout_s=60)
        assert first.alive(), first.log_tail()

        first.kill9()  # the kernel releases what a killed process held
        second.start()
        harness.deliver(candle(event_id="lock-3", candle_open=opened))
        # A duplicate, across all of the above:
        harness.deliver(candle(event_id="lock-1", candle_open=opened))
        wait_until(lambda: outcomes(harness) >= 4, timeout_s=60)
        assert second.alive(), second.log_tail()
        runs = harness.outcomes().runs
        assert outcomes(harness) == 4
        assert sum(isinstance(r, RunAdmitted) for r in runs) == 3
    finally:
        if first.alive() and first.stopped():
            first.resume()
        first.stop()
        second.stop()
        harness.close()
