"""``sluicegate serve`` keeps its components running: a SIGKILLed child comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluicegate.topics import ensure_topics
from tests.kafka_helpers import unique_settings, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def children_of(pid: int) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return [int(p) for p in out.split()]


def test_serve_restarts_a_killed_component_and_stops_cleanly() -> None:
    settings = unique_settings()
    ensure_topics(settings)
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_STATE_DIR=str(settings.state_dir),
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluicegate.cli", "serve", "--only", "processor"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(children_of(serve.pid)) == 1, timeout_s=30)
        (first,) = children_of(serve.pid)
        os.kill(first, signal.SIGKILL)
        wait_until(
            lambda: bool(children_of(serve.pid)) and children_of(serve.pid) != [first],
            timeout_s=30,
        )
        time.sleep(1)  # let the new processor subscribe before asking everything to stop
    finally:
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    assert serve.returncode == 0
    assert "processor exited with -9; restart in 1 s" in stderr
