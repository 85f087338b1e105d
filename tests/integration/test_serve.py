"""``sluicegate serve`` keeps its components running: a SIGKILLed child comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streams.kafka.topics import ensure_topics
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port
from tests.support.serve import http_get, pids_in

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


def test_serve_pid_file_names_the_running_child_and_follows_its_restart(tmp_path: Path) -> None:
    settings = unique_settings()
    ensure_topics(settings)
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_STATE_DIR=str(settings.state_dir),
    )
    pid_file = tmp_path / "run" / "serve.pids"
    serve = subprocess.Popen(
        [
            *(sys.executable, "-m", "sluicegate.cli", "serve", "--only", "processor"),
            *("--pid-file", str(pid_file)),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: "processor" in pids_in(pid_file), timeout_s=30)
        written = pids_in(pid_file)
        assert written["serve"] == serve.pid
        assert children_of(serve.pid) == [written["processor"]]
        os.kill(written["processor"], signal.SIGKILL)
        wait_until(
            lambda: pids_in(pid_file).get("processor") not in (None, written["processor"]),
            timeout_s=30,
        )
        restarted = pids_in(pid_file)["processor"]
        assert children_of(serve.pid) == [restarted]
        time.sleep(1)  # let the new processor subscribe before asking everything to stop
    finally:
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    assert serve.returncode == 0, stderr[-2000:]
    assert not pid_file.exists()


def test_serve_starts_the_read_listener_beside_the_webhook() -> None:
    settings = unique_settings()
    ensure_topics(settings)
    webhook, read = free_port(), free_port()
    env = dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_STATE_DIR=str(settings.state_dir),
        SLUICEGATE_HTTP=f"127.0.0.1:{webhook}",
        SLUICEGATE_READ_HTTP=f"127.0.0.1:{read}",
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluicegate.cli", "serve", "--only", "ingest"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{read}/v1/stats") is not None, 60)
        answer = http_get(f"http://127.0.0.1:{read}/v1/stats")
        assert answer is not None
        # No projector ran for this prefix: the read API says so (a 503 of its own).
        assert answer[0] == 503 and b"projection_unavailable" in answer[1], answer
        hook_answer = http_get(f"http://127.0.0.1:{webhook}/v1/stats")
        assert hook_answer is not None and hook_answer[0] == 404, hook_answer
        assert b"projection" not in hook_answer[1]
    finally:
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    assert serve.returncode == 0, stderr[-2000:]
