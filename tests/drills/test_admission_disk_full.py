"""A processor whose state directory fills up mid-stream: it stops with one clear error, and
the next start admits every occurrence exactly once.

The store runs without a write-ahead log, so RocksDB writes to disk only when it flushes a
memtable (here about every 45,000 deliveries with 2 partitions): the first flush onto a full
filesystem fails, and so does every write after it. By then the processor has committed
transactions whose writes it could not apply to its store. The state directory is a 1 MiB
tmpfs mounted in the processor's own mount namespace (``unshare``), so the test needs
neither a spare disk nor a mount visible outside that process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.admission import AdmissionHarness
from tests.support.admission_drill import Stream, count_outcomes, plan, verify
from tests.support.component_process import ProcessorProcess

pytestmark = pytest.mark.drill

UNSHARE = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


def _namespaces_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = [*UNSHARE, "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', "/mnt"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    harness = AdmissionHarness(partitions=2)
    harness.apply_workflow(branch_timeout="1h")  # no relaunches: the drill counts launches
    yield harness
    harness.close()


def test_a_full_state_directory_stops_the_processor_with_one_clear_error(
    harness: AdmissionHarness, tmp_path: Path
) -> None:
    if not _namespaces_available():
        pytest.skip("needs unshare and a mount namespace to give the processor a full disk")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    settings = replace(harness.settings, state_dir=state_dir)
    bodies = plan(60_000, 0.25, seed=17)
    stream = Stream(harness, bodies, rate=1_000_000)  # a backlog
    stream.thread.start()
    assert stream.done.wait(120)

    full = ProcessorProcess(settings, "full-1", tmp_path)
    mount = 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"'
    full.command = [*UNSHARE, "sh", "-c", mount, str(state_dir), *full.command]
    full.start()
    assert full.process is not None
    try:
        returncode = full.process.wait(180)
    finally:
        full.stop()
    log = full.log_tail(20_000)
    decided = count_outcomes(settings)
    print(f"\nfull disk: exit {returncode} after {decided} outcomes\n{log}", file=sys.stderr)
    assert 0 < decided < len(bodies), "the disk was to fill up mid-stream"
    assert returncode == 1, log
    assert "Traceback" not in log, "an operator gets one clear line, not a traceback"
    errors = [line for line in log.splitlines() if line.startswith("sluicegate processor: ")]
    assert len(errors) == 1, log
    assert "No space left on device" in errors[0]
    assert str(state_dir) in errors[0], "the message names the store"
    assert "SLUICEGATE_STATE_DIR" in errors[0], "and says what to do"

    # With room again (the tmpfs went with its namespace), the same instance restores what
    # it had committed from the changelog and decides the rest: once each.
    again = ProcessorProcess(settings, "full-1", tmp_path)
    again.start()
    try:
        counts = verify(harness, stream)
    finally:
        again.stop()
    print(f"after the full disk: {counts}", file=sys.stderr)
    assert counts["runs_admitted"] == len(stream.keys)
