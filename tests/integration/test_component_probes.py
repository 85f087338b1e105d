"""The projector's and the branch worker's probes (``--health``) over real HTTP, on the real
broker and PostgreSQL: healthy while alive, ready once connected, and a stalled loop fails
liveness."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from projections.projector import Projector
from sluicegate.commands.projections import projector_probes
from sluicegate.health import HealthServer
from streams.kafka.topics import ensure_topics
from tests.integration.test_health_probes import get
from tests.support.history import cleanup
from tests.support.kafka import unique_settings, wait_until
from tests.support.ports import free_port
from tests.support.prometheus import Page

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_projector_is_ready_once_connected_and_unhealthy_once_its_loop_stalls() -> None:
    settings = unique_settings()
    ensure_topics(settings)
    projector = Projector(settings)
    served = HealthServer(projector_probes(projector), ("127.0.0.1", 0))
    try:
        code, body = get(served, "/healthz")
        assert code == 200 and body is not None and body["healthy"] is True
        code, body = get(served, "/readyz")
        assert code == 503 and body is not None and body["ready"] is False
        projector.run_until({})  # connects, migrates, assigns
        code, body = get(served, "/readyz")
        assert code == 200 and body is not None and body["waiting_for_postgresql"] is False
        projector.came_round_at = time.monotonic() - projector.STALLED_AFTER_S - 1
        code, body = get(served, "/healthz")
        assert code == 503 and body is not None
        assert body["healthy"] is False
        assert float(str(body["loop_seconds_ago"])) > projector.STALLED_AFTER_S
    finally:
        served.close()
        projector.close()
        cleanup(settings)


@pytest.mark.parametrize("command", [["projector", "--share", "1/2"], ["worker"]])
def test_the_command_serves_its_probes_until_it_stops(command: list[str]) -> None:
    settings = unique_settings()
    ensure_topics(settings)
    port = free_port()
    env = dict(os.environ, SLUICEGATE_TOPIC_PREFIX=settings.topic_prefix)
    child = subprocess.Popen(
        [sys.executable, "-m", "sluicegate.cli", *command, "--health", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def answers(path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        except OSError:
            return 0  # not listening yet
        finally:
            conn.close()

    try:
        wait_until(lambda: answers("/readyz") == 200, timeout_s=30)
        assert answers("/healthz") == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        page = Page(conn.getresponse().read().decode())
        conn.close()
        healthy = f"sluicegate_{command[0]}_healthy"
        assert page.value(healthy, app=command[0]) == 1, page.samples
    finally:
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
        cleanup(settings)
    assert child.returncode == 0, stderr[-2000:]
    assert f"health probes on http://127.0.0.1:{port}" in stderr
