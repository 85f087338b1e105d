"""Ingest on the real broker: acknowledgement, readiness, unavailability, ``?wait=``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from consumers.ingest.app import create_app
from consumers.ingest.auth import sign
from consumers.ingest.workflows import WorkflowDirectory
from schemas.events import RunAdmitted
from streams.adapters.workflow_table import WorkflowTable
from streams.settings import load_settings
from tests.support.component_process import ProcessorProcess
from tests.support.ingest import (
    REPO,
    SLUICEGATE,
    Client,
    breakout,
    candle_payload,
    current_minute_ms,
    end_offsets,
    fresh_settings,
    ingest_client,
    publish_workflows,
    read_deliveries,
    read_runs,
)
from tests.support.kafka import wait_until
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

JSON = {"Content-Type": "application/json"}


async def ready(client: Client, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        async with client.get("/readyz") as response:
            if response.status == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError("ingest did not become ready")
        await asyncio.sleep(0.1)


async def post(client: Client, path: str, body: bytes, **kwargs: Any) -> tuple[int, Any]:
    headers = {**JSON, **kwargs.pop("headers", {})}
    async with client.post(path, data=body, headers=headers, **kwargs) as response:
        return response.status, await response.json()


def test_a_202_means_the_delivery_is_on_the_topic() -> None:
    settings, _ = fresh_settings()
    secret = "hmac-secret"
    publish_workflows(
        settings,
        breakout("open"),
        breakout("signed", hmac_env="HOOK_SECRET"),
        breakout("open", "live"),
    )
    body = orjson.dumps(candle_payload(current_minute_ms()))

    async def scenario() -> list[Any]:
        answers = []
        async with ingest_client(settings, environ={"HOOK_SECRET": secret}) as client:
            await ready(client)
            for path, params, headers in (
                ("/v1/hooks/open", {}, {}),
                ("/v1/hooks/open", {"env": "live"}, {}),
                (
                    "/v1/hooks/signed",
                    {},
                    {
                        "X-Sluicegate-Signature": sign(
                            secret.encode(), int(time.time()), "signed", "paper", body
                        )
                    },
                ),
            ):
                status, answer = await post(client, path, body, params=params, headers=headers)
                assert status == 202, answer
                answers.append(answer)
        return answers

    answers = asyncio.run(scenario())
    deliveries = {d.delivery_id: d for d in read_deliveries(settings)}
    assert set(deliveries) == {a["delivery_id"] for a in answers}
    for answer in answers:
        assert deliveries[answer["delivery_id"]].admission_key == answer["admission_key"]
    # paper and live, and two subscriptions: three destinations, three keys.
    assert len({a["admission_key"] for a in answers}) == 3


def test_a_workflow_applied_after_start_is_found_and_unknown_ones_produce_nothing() -> None:
    settings, _ = fresh_settings()
    body = orjson.dumps(candle_payload(current_minute_ms()))

    async def scenario() -> float:
        async with ingest_client(settings) as client:
            await ready(client)
            status, answer = await post(client, "/v1/hooks/late", body)
            assert status == 401
            assert answer["error"]["code"] == "unauthorized"
            publish_workflows(settings, breakout("late"))
            applied = time.monotonic()
            # Unknown names are answered from a snapshot at most 0.5 s old.
            while (status := (await post(client, "/v1/hooks/late", body))[0]) == 401:
                assert time.monotonic() - applied < 5, "the new workflow was not found"
                await asyncio.sleep(0.05)
            assert status == 202
            return time.monotonic() - applied

    found_after = asyncio.run(scenario())
    print(f"\nfound {found_after * 1000:.0f} ms after it was applied")
    assert len(read_deliveries(settings)) == 1


def test_kafka_down_is_503_well_inside_three_seconds() -> None:
    settings, env = fresh_settings()
    publish_workflows(settings, breakout("open"))
    # The workflow table reads the real broker; the producer points at a port nobody serves.
    dead = load_settings({**env, "SLUICEGATE_KAFKA": f"127.0.0.1:{free_port()}"})
    body = orjson.dumps(candle_payload(current_minute_ms()))
    before = end_offsets(settings, "deliveries")

    async def scenario() -> None:
        table = WorkflowTable(settings)
        directory = WorkflowDirectory(table)
        directory.start()
        try:
            app = create_app(dead, directory=directory)
            async with TestClient(TestServer(app)) as client:
                while not directory.loaded:
                    await asyncio.sleep(0.05)
                async with client.get("/readyz") as response:
                    assert response.status == 503
                    assert (await response.json())["checks"] == {
                        "kafka": False,
                        "workflows": True,
                    }
                started = time.monotonic()
                async with client.post("/v1/hooks/open", data=body, headers=JSON) as response:
                    elapsed = time.monotonic() - started
                    answer = await response.json()
                    assert response.status == 503
                    assert answer["error"]["code"] == "kafka_unavailable"
                    assert response.headers["Retry-After"]
                assert 1.5 < elapsed < 2.8, elapsed
        finally:
            await directory.close()

    asyncio.run(scenario())
    assert end_offsets(settings, "deliveries") == before


def test_wait_returns_admission_outcomes_from_the_processor(tmp_path: Path) -> None:
    settings, env = fresh_settings()
    publish_workflows(settings, breakout("waits"))
    minute = current_minute_ms()
    warmup = orjson.dumps(candle_payload(minute - 60_000))
    body = orjson.dumps(candle_payload(minute))
    conflicting = orjson.dumps(candle_payload(minute, price="1.0"))
    processor = ProcessorProcess(settings, "waits", tmp_path, env=env)
    processor.start()

    async def scenario() -> list[tuple[int, Any]]:
        async with ingest_client(settings) as client:
            await ready(client)
            # Warm up: the processor's first assignment can take a few seconds.
            status, answer = await post(client, "/v1/hooks/waits", warmup)
            assert status == 202
            warm_id = answer["delivery_id"]
            await asyncio.get_running_loop().run_in_executor(
                None,
                lambda: wait_until(
                    lambda: any(
                        isinstance(r, RunAdmitted) and r.delivery_id == warm_id
                        for r in read_runs(settings)
                    ),
                    120,
                    what="the processor to admit the warm-up delivery",
                ),
            )
            return [
                await post(client, "/v1/hooks/waits", payload, params={"wait": "10s"})
                for payload in (body, body, conflicting)
            ]

    try:
        answers = asyncio.run(scenario())
    except TimeoutError:
        pytest.fail(f"processor log:\n{processor.log_tail()}")
    finally:
        processor.stop()
    (s1, first), (s2, again), (s3, conflict) = answers
    assert (s1, s2, s3) == (200, 200, 200), answers
    assert first["outcome"] == "admitted" and first["duplicate"] is False
    assert first["run_id"].startswith("run-")
    assert again["outcome"] == "deduplicated" and again["duplicate"] is True
    assert again["run_id"] == first["run_id"]
    assert again["reason"] == "in_flight"
    assert conflict["outcome"] == "conflict"
    assert conflict["run_id"] == first["run_id"]
    assert first["admission_key"] == again["admission_key"] == conflict["admission_key"]


def test_wait_says_pending_when_no_processor_answers() -> None:
    settings, _ = fresh_settings()
    publish_workflows(settings, breakout("nobody-decides"))
    body = orjson.dumps(candle_payload(current_minute_ms()))

    async def scenario() -> tuple[int, Any, float]:
        async with ingest_client(settings) as client:
            await ready(client)
            started = time.monotonic()
            status, answer = await post(
                client, "/v1/hooks/nobody-decides", body, params={"wait": "500ms"}
            )
            return status, answer, time.monotonic() - started

    status, answer, elapsed = asyncio.run(scenario())
    assert status == 202
    assert answer["outcome"] == "pending"
    assert answer["run_id"] is None
    assert elapsed >= 0.5
    assert len(read_deliveries(settings)) == 1


def test_a_revised_workflow_changes_auth_without_a_restart() -> None:
    settings, _ = fresh_settings()
    wf = breakout("rotating")
    publish_workflows(settings, wf)
    body = orjson.dumps(candle_payload(current_minute_ms()))

    async def scenario() -> None:
        async with ingest_client(settings, environ={"ROT_TOKEN": "t1"}) as client:
            await ready(client)
            status, _ = await post(client, "/v1/hooks/rotating", body)
            assert status == 202
            closed = replace(wf, revision=2, auth_token_env="ROT_TOKEN", definition_digest="x")
            publish_workflows(settings, closed)
            deadline = time.monotonic() + 15
            while True:
                status, _ = await post(client, "/v1/hooks/rotating", body)
                if status == 401:
                    break
                assert time.monotonic() < deadline, "new revision not applied"
                await asyncio.sleep(0.2)
            status, _ = await post(client, "/v1/hooks/rotating", body, params={"token": "t1"})
            assert status == 202

    asyncio.run(scenario())


def test_sigterm_lets_a_request_in_flight_finish(tmp_path: Path) -> None:
    settings, env = fresh_settings()
    publish_workflows(settings, breakout("term"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    body = orjson.dumps(candle_payload(current_minute_ms()))
    log_path = tmp_path / "ingest.log"

    async def scenario(process: subprocess.Popen[bytes]) -> tuple[int, Any]:
        async with aiohttp.ClientSession() as session:
            deadline = time.monotonic() + 60
            while True:
                try:
                    async with session.get(base + "/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                assert time.monotonic() < deadline and process.poll() is None
                await asyncio.sleep(0.2)

            async def waiting_post() -> tuple[int, Any]:
                async with session.post(
                    base + "/v1/hooks/term", params={"wait": "2s"}, data=body, headers=JSON
                ) as response:
                    return response.status, await response.json()

            task = asyncio.create_task(waiting_post())
            await asyncio.sleep(0.5)  # the request is now waiting for an outcome
            process.send_signal(signal.SIGTERM)
            return await task

    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(SLUICEGATE), "ingest", "--http", f"127.0.0.1:{port}"],
            env={**os.environ, **env},
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            status, answer = asyncio.run(scenario(process))
            code = process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert status == 202 and answer["outcome"] == "pending", answer
    assert code == 0
    assert [d.delivery_id for d in read_deliveries(settings)] == [answer["delivery_id"]]
    raw = [line for line in log_path.read_bytes().splitlines() if line]
    assert all(line.startswith(b"{") for line in raw), [x for x in raw if not x.startswith(b"{")]
    lines = [orjson.loads(line) for line in raw]
    messages = [line["message"] for line in lines]
    assert "shutting down" in messages and messages[-1] == "stopped"
    assert any(line.get("delivery_id") == answer["delivery_id"] for line in lines)


def test_a_signed_request_cannot_be_replayed_to_another_destination() -> None:
    """A captured request for ``?env=paper`` sent to ``live``, or to another subscription
    that shares the secret, is refused: the signature names its destination."""
    settings, _ = fresh_settings()
    secret = "shared-hmac-secret"
    publish_workflows(
        settings,
        breakout("signed", hmac_env="HOOK_SECRET"),
        breakout("signed", "live", hmac_env="HOOK_SECRET"),
        breakout("other", hmac_env="HOOK_SECRET"),
    )
    body = orjson.dumps(candle_payload(current_minute_ms()))
    # What a sender following the README sends to signed/paper, captured on its way.
    signature = sign(secret.encode(), int(time.time()), "signed", "paper", body)
    captured = {"X-Sluicegate-Signature": signature}

    async def scenario() -> list[int]:
        async with ingest_client(settings, environ={"HOOK_SECRET": secret}) as client:
            await ready(client)
            statuses = []
            for path, params in (
                ("/v1/hooks/signed", {"env": "paper"}),
                ("/v1/hooks/signed", {"env": "live"}),
                ("/v1/hooks/other", {"env": "paper"}),
            ):
                status, _ = await post(client, path, body, params=params, headers=captured)
                statuses.append(status)
            return statuses

    statuses = asyncio.run(scenario())
    deliveries = read_deliveries(settings)
    print(f"\nstatuses {statuses}; deliveries on the topic: {len(deliveries)}")
    assert statuses == [202, 401, 401]
    assert [d.admission_key.split("/")[:2] for d in deliveries] == [["signed", "paper"]]


def test_a_flood_of_unknown_names_costs_a_bounded_number_of_catch_ups() -> None:
    """Made-up subscription names are answered from a recent snapshot of the real workflow
    table, not with a Kafka catch-up each; a workflow applied meanwhile is still found."""
    settings, _ = fresh_settings()
    publish_workflows(settings, breakout("known"))
    body = orjson.dumps(candle_payload(current_minute_ms()))
    catch_ups: list[float] = []

    async def scenario() -> tuple[list[int], float, int]:
        table = WorkflowTable(settings)
        real_catch_up = table.catch_up

        def counted(*args: Any, **kwargs: Any) -> None:
            catch_ups.append(time.monotonic())
            real_catch_up(*args, **kwargs)

        table.catch_up = counted  # type: ignore[method-assign]
        directory = WorkflowDirectory(table)
        directory.start()
        try:
            app = create_app(settings, directory=directory)
            async with TestClient(TestServer(app)) as client:
                await ready(client)
                before = len(catch_ups)
                started = time.monotonic()
                statuses: list[int] = []
                # At least 400 names, over several of the directory's 0.5 s freshness windows.
                while len(statuses) < 400 or time.monotonic() - started < 3:
                    name = f"made-up-{uuid.uuid4().hex[:12]}"
                    statuses.append((await post(client, f"/v1/hooks/{name}", body))[0])
                elapsed = time.monotonic() - started
                flood_catch_ups = len(catch_ups) - before
                # A destination applied now is found soon, flood or not.
                publish_workflows(settings, breakout("late"))
                applied = time.monotonic()
                while (await post(client, "/v1/hooks/late", body))[0] != 202:
                    assert time.monotonic() - applied < 10, "the new workflow was not found"
                    await asyncio.sleep(0.05)
                return statuses, elapsed, flood_catch_ups
        finally:
            await directory.close()

    statuses, elapsed, flood_catch_ups = asyncio.run(scenario())
    print(f"\n{len(statuses)} unknown names in {elapsed:.2f} s: {flood_catch_ups} catch-ups")
    assert set(statuses) == {401}
    # Two per second on demand plus the background refresh, never one per name.
    assert flood_catch_ups <= 3 + 3 * elapsed
    assert [d.admission_key.split("/")[0] for d in read_deliveries(settings)] == ["late"]
