"""``make run``'s demonstration, end to end: what a user sees first must keep working.

``scripts/demo.sh`` with ``DEMO_EXIT=1`` (it stops after showing everything instead of serving
until Ctrl-C) on its own topics, state directories and ports, then the counts it claims,
read back from the read model: four deliveries of A and one of B make two runs and six
launches, the gate dispatches, expires and supersedes, the gateway recovers its entry
without an unresolved attempt or a hold, and the hostile record is a dead letter.

It runs in the exclusive phase of ``make test``: the demonstration times its steps on the
wall clock (a signal is fresh for 5 s, the gate is paused for 7 s) and starts eight
processes, which the parallel phase's load would make slow enough to change its story.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.component_process import ROOT
from tests.support.kafka import new_prefix
from tests.support.ports import free_port

pytestmark = [pytest.mark.drill, pytest.mark.exclusive]

SLUICEGATE = str(ROOT / ".venv" / "bin" / "sluicegate")


def test_make_runs_demo_tells_its_story_and_the_counts_agree(tmp_path: Path) -> None:
    prefix = new_prefix()
    env = dict(
        os.environ,
        DEMO_EXIT="1",
        SLUICEGATE_TOPIC_PREFIX=prefix,
        SLUICEGATE_STATE_DIR=str(tmp_path / "state"),
        SLUICEGATE_VENUE_STATE_DIR=str(tmp_path / "venue"),
        SLUICEGATE_HTTP=f"127.0.0.1:{free_port()}",
        SLUICEGATE_READ_HTTP=f"127.0.0.1:{free_port()}",
    )
    # serve runs the paper venue where the gateway's URL points; the demo asks it there too.
    env["SLUICEGATE_VENUE_URL"] = f"http://127.0.0.1:{free_port()}/"
    # Its own session, so that a demo that hangs is stopped with everything it started (serve
    # and the two workers), as Ctrl-C stops `make run`, not left running after the test.
    demo = subprocess.Popen(
        ["bash", "scripts/demo.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = demo.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGTERM)
        out, err = demo.communicate(timeout=60)
        pytest.fail(f"the demo ran over 300 s; its last words: {(out + err)[-3000:]}")
    said = out + err
    (tmp_path / "demo.out").write_text(said)
    assert demo.returncode == 0, f"exit {demo.returncode}: {err[-3000:]}"
    assert "DELIVERIES (1-4 of 4: 1 admitted, 3 deduplicated)" in said, said[-4000:]
    assert 'sluicegate_dead_letters_total{kind="undecodable"} 1' in said, said[-4000:]

    stats = subprocess.run(
        [SLUICEGATE, "stats", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    counts = json.loads(stats.stdout)
    # A and B, the gate's four signals (superseded and late ones are runs too), the gateway's
    # entry: nine occurrences, three copies of A, no conflict and no rejection.
    assert counts["deliveries"] == 12
    assert counts["runs_admitted"] == 9
    assert sum(counts["duplicates"].values()) == 3
    assert counts["branch_launches"] == 9 * 3  # one per run and slot: no run launched twice
    assert counts["conflicts"] == 0
    assert sum(counts["rejected"].values()) == 0
    assert counts["actions_dispatched"] >= 1
    assert counts["expired_before_send"] >= 1
    assert counts["superseded"] >= 2
    assert counts["unresolved_attempt"] == 0
    assert counts["holds"] == 0
