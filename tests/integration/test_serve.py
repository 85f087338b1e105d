"""``sluicegate serve`` keeps its components running: a SIGKILLed child comes back."""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from projections.db import schema_name
from projections.projector import Projector
from projections.rebuild import rebuild
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.integration.test_projector_rebuild import wait_caught_up
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port, free_ports
from tests.support.prometheus import Page
from tests.support.serve import http_get, pids_in

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a serve for ``settings``' prefix and state directory."""
    return dict(
        os.environ,
        SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix,
        SLUICEGATE_STATE_DIR=str(settings.state_dir),
        **extra,
    )


def children_of(pid: int) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return [int(p) for p in out.split()]


def test_serve_restarts_a_killed_component_and_stops_cleanly() -> None:
    settings = unique_settings()
    ensure_topics(settings)
    env = _env(settings)
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


def _serve_with_pid_file(env: dict[str, str], pid_file: Path, only: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "sluicegate.cli", "serve", "--only", only),
            *("--pid-file", str(pid_file)),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_pid_file_names_the_running_child_and_follows_its_restart(tmp_path: Path) -> None:
    settings = unique_settings()
    ensure_topics(settings)
    env = _env(settings)
    pid_file = tmp_path / "run" / "serve.pids"
    serve = _serve_with_pid_file(env, pid_file, "processor")
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
    env = _env(
        settings,
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


def test_serve_runs_n_projectors_that_share_the_partitions(tmp_path: Path) -> None:
    settings = unique_settings(partitions=4)
    ensure_topics(settings)
    env = _env(
        settings,
        SLUICEGATE_SERVE_PROJECTORS="2",
    )
    pid_file = tmp_path / "serve.pids"
    serve = _serve_with_pid_file(env, pid_file, "projector")
    names = ["projector:0/2", "projector:1/2"]
    try:
        wait_until(lambda: all(n in pids_in(pid_file) for n in names), timeout_s=30)
        for name in names:
            with open(f"/proc/{pids_in(pid_file)[name]}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
            assert args[-3:] == [b"--share", name.partition(":")[2].encode(), b""]
        rng = random.Random(71)
        produce_history(settings, build_history(rng, 40), rng=rng)
        live = schema_name(settings.topic_prefix)
        whole = Projector(settings)  # for the ends of every partition; it never projects
        try:
            wait_caught_up(settings, whole, live)
        finally:
            whole.close()
    finally:
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    try:
        assert serve.returncode == 0, stderr[-2000:]
        verified = rebuild(settings, verify=True, stream=io.StringIO(), workers=1)
        assert [d.describe() for d in verified.differences] == []
    finally:
        cleanup(settings)


def test_serve_gives_each_engine_instance_its_probes_and_metrics(tmp_path: Path) -> None:
    settings = unique_settings(partitions=2)
    ensure_topics(settings)
    base = free_ports(5)  # processor, gate, gateway, projector, worker: stable under --only
    command = [sys.executable, "-m", "sluicegate.cli", "serve", "--only", "processor"]
    serve = subprocess.Popen(
        [*command, "--only", "gate", "--health", f"127.0.0.1:{base}"],
        cwd=ROOT,
        env=_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for port, app in ((base, "admission"), (base + 1, "gate")):

            def ready(port: int = port) -> bool:
                answer = http_get(f"http://127.0.0.1:{port}/readyz")
                return answer is not None and answer[0] == 200

            wait_until(ready, 90, what=f"{app} ready on {port}")
            answer = http_get(f"http://127.0.0.1:{port}/metrics")
            assert answer is not None and answer[0] == 200, answer
            page = Page(answer[1].decode())
            assert page.value("sluicegate_engine_ready", app=app) == 1
            assert page.value("sluicegate_engine_assigned_partitions", app=app) == 2
        assert http_get(f"http://127.0.0.1:{base + 2}/healthz") is None  # no gateway asked for
    finally:
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    assert serve.returncode == 0, stderr[-2000:]
    assert f"probes and metrics on processor 127.0.0.1:{base}, gate 127.0.0.1:{base + 1}" in stderr
