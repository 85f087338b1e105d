"""The read API is served on its own listener, never on the webhook's.

A real projection (events produced to the broker, projected into PostgreSQL) and a real
``sluicegate ingest`` process: the webhook port answers a run's URL with 404 and nothing of
the run; the read port serves it, behind ``SLUICEGATE_READ_TOKEN`` when one is set.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from projections.projector import Projector
from schemas.events import RunAdmitted
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import unique_settings
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SLUICEGATE = REPO / ".venv" / "bin" / "sluicegate"
READ_TOKEN = "read-token-for-the-operator"


@dataclass
class World:
    settings: Settings
    run: RunAdmitted


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    settings = unique_settings(partitions=6)
    ensure_topics(settings)
    rng = random.Random(7)
    history = build_history(rng, 6)
    produce_history(settings, history, rng=rng)
    with Projector(settings) as projector:
        projector.run_until(timeout_s=60)
    run = next(e.record for e in history if isinstance(e.record, RunAdmitted))
    try:
        yield World(settings, run)
    finally:
        cleanup(settings)


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, await response.text()


async def wait_listening(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert process.poll() is None, "sluicegate ingest exited"
        try:
            await get(url)
            return
        except aiohttp.ClientConnectionError:
            pass
        assert time.monotonic() < deadline, f"nothing listens at {url}"
        await asyncio.sleep(0.2)


def test_the_webhook_port_serves_no_read_api_and_the_read_port_does(
    world: World, tmp_path: Path
) -> None:
    webhook, read = free_port(), free_port()
    hook_base, read_base = f"http://127.0.0.1:{webhook}", f"http://127.0.0.1:{read}"
    run = world.run
    env = {
        **os.environ,
        "SLUICEGATE_TOPIC_PREFIX": world.settings.topic_prefix,
        "SLUICEGATE_PG_DSN": world.settings.pg_dsn,
        "SLUICEGATE_HTTP": f"127.0.0.1:{webhook}",
        "SLUICEGATE_READ_HTTP": f"127.0.0.1:{read}",
        "SLUICEGATE_READ_TOKEN": READ_TOKEN,
    }
    read_paths = (
        f"/v1/runs/{run.run_id}",
        f"/v1/occurrences/{run.admission_key}",
        "/v1/stats",
        "/metrics",
    )

    async def scenario(process: subprocess.Popen[bytes]) -> None:
        await wait_listening(hook_base + "/healthz", process, 60)
        for path in read_paths:
            status, text = await get(hook_base + path)
            assert status == 404, (path, status, text[:300])
            assert run.run_id not in text and run.payload_json not in text
            assert "acc-" not in text and "price" not in text
        await wait_listening(read_base + "/v1/stats", process, 30)
        for headers in (None, {"Authorization": "Bearer wrong"}, {"Authorization": READ_TOKEN}):
            status, text = await get(read_base + f"/v1/runs/{run.run_id}", headers)
            assert status == 401, (headers, status)
            assert run.run_id not in text
        bearer = {"Authorization": f"Bearer {READ_TOKEN}"}
        status, text = await get(read_base + f"/v1/runs/{run.run_id}", bearer)
        assert status == 200, text[:300]
        assert run.run_id in text
        status, text = await get(read_base + "/metrics", bearer)
        assert status == 200 and "sluicegate_runs_admitted_total" in text
        # The read listener serves only the read API.
        status, _ = await get(read_base + "/v1/hooks/x", bearer)
        assert status in (404, 405)

    log_path = tmp_path / "ingest.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(SLUICEGATE), "ingest"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            asyncio.run(scenario(process))
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait(10)
    text = log_path.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert READ_TOKEN not in text


def test_a_read_address_in_use_stops_ingest_with_a_message_naming_it(world: World) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(SLUICEGATE), "ingest"],
            env={
                **os.environ,
                "SLUICEGATE_TOPIC_PREFIX": world.settings.topic_prefix,
                "SLUICEGATE_HTTP": f"127.0.0.1:{free_port()}",
                "SLUICEGATE_READ_HTTP": f"127.0.0.1:{port}",
            },
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode != 0
    assert f"SLUICEGATE_READ_HTTP=127.0.0.1:{port}: cannot listen there" in result.stderr
    assert "Traceback" not in result.stderr
