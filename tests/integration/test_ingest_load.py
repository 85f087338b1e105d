"""2,000 concurrent posts of 500 occurrences through ``sluicegate ingest`` (a real process).

Each of 500 distinct candles is posted four times (TradingView's worst case), all 2,000
requests at once. Every post must be acknowledged (202) and land on the deliveries topic;
the deliveries carry exactly 500 admission keys; and with ``sluicegate processor`` running,
admission makes exactly 500 runs and answers the other 1,500 deliveries as duplicates.

The p50/p99 latency of a 202 is printed for the record. It is never asserted: it measures
this machine, the shared broker and a client in the same test process.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import statistics
import subprocess
import time
from pathlib import Path

import aiohttp
import orjson
import pytest

from schemas.events import DeliveryDeduplicated, RunAdmitted
from tests.support.component_process import ProcessorProcess
from tests.support.ingest import (
    REPO,
    SLUICEGATE,
    breakout,
    candle_payload,
    current_minute_ms,
    fresh_settings,
    publish_workflows,
    read_deliveries,
    read_runs,
)
from tests.support.kafka import wait_until
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

OCCURRENCES = 500
COPIES = 4
TOKEN = "load-token"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def wait_ready(base: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while True:
            assert process.poll() is None, "sluicegate ingest exited"
            try:
                async with session.get(base + "/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, "sluicegate ingest did not become ready"
            await asyncio.sleep(0.2)


async def blast(base: str, bodies: list[bytes]) -> list[tuple[int, float, dict[str, str]]]:
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = asyncio.Event()

        async def one(body: bytes) -> tuple[int, float, dict[str, str]]:
            await start.wait()
            started = time.perf_counter()
            async with session.post(
                base + "/v1/hooks/load",
                params={"token": TOKEN},
                data=body,
                headers={"Content-Type": "application/json"},
            ) as response:
                answer = await response.json()
                return response.status, time.perf_counter() - started, answer

        tasks = [asyncio.create_task(one(body)) for body in bodies]
        await asyncio.sleep(0)
        start.set()
        return await asyncio.gather(*tasks)


def test_two_thousand_concurrent_posts_of_five_hundred_occurrences(tmp_path: Path) -> None:
    settings, env = fresh_settings(partitions=6)
    publish_workflows(settings, breakout("load", token_env="LOAD_TOKEN"))
    minute = current_minute_ms()
    occurrences = [candle_payload(minute - i * 60_000) for i in range(OCCURRENCES)]
    bodies = [orjson.dumps(p) for p in occurrences for _ in range(COPIES)]
    random.Random(5).shuffle(bodies)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "ingest.log"
    with log_path.open("wb") as log:
        ingest = subprocess.Popen(
            [str(SLUICEGATE), "ingest"],
            env={**os.environ, **env, "SLUICEGATE_HTTP": f"127.0.0.1:{port}", "LOAD_TOKEN": TOKEN},
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            asyncio.run(wait_ready(base, ingest, 60))
            results = asyncio.run(blast(base, bodies))
        finally:
            ingest.send_signal(signal.SIGTERM)
            try:
                code = ingest.wait(30)
            except subprocess.TimeoutExpired:
                ingest.kill()
                code = ingest.wait(10)
    ingest_log = log_path.read_text(errors="replace")
    assert code == 0, ingest_log[-3000:]
    assert TOKEN not in ingest_log

    statuses = [status for status, _, _ in results]
    assert statuses.count(202) == len(bodies), {s: statuses.count(s) for s in set(statuses)}
    latencies_ms = [seconds * 1000 for _, seconds, _ in results]
    p50, p99 = percentile(latencies_ms, 0.50), percentile(latencies_ms, 0.99)
    report = (
        f"ingest load: {len(bodies)} concurrent posts -> 202; latency of a 202 "
        f"p50={p50:.1f} ms p99={p99:.1f} ms max={max(latencies_ms):.1f} ms "
        f"mean={statistics.fmean(latencies_ms):.1f} ms"
    )
    print("\n" + report)
    (REPO / "var").mkdir(exist_ok=True)
    (REPO / "var" / "ingest-load-latency.txt").write_text(report + "\n")

    answered = {answer["delivery_id"]: answer["admission_key"] for _, _, answer in results}
    deliveries = read_deliveries(settings)
    assert len(deliveries) == len(bodies)
    assert {d.delivery_id: d.admission_key for d in deliveries} == answered
    assert len({d.admission_key for d in deliveries}) == OCCURRENCES

    ids = set(answered)
    processor = ProcessorProcess(settings, "load", tmp_path, env=env)
    processor.start()
    try:
        wait_until(
            lambda: ids <= {getattr(r, "delivery_id", None) for r in read_runs(settings)},
            180,
            what="outcomes of all 2,000 deliveries",
        )
    except TimeoutError:
        pytest.fail(f"processor log:\n{processor.log_tail()}")
    finally:
        processor.stop()
    outcomes = [r for r in read_runs(settings) if getattr(r, "delivery_id", None) in ids]
    admitted = [r for r in outcomes if isinstance(r, RunAdmitted)]
    duplicates = [r for r in outcomes if isinstance(r, DeliveryDeduplicated)]
    assert len(admitted) == OCCURRENCES
    assert len({r.admission_key for r in admitted}) == OCCURRENCES
    assert len(duplicates) == len(bodies) - OCCURRENCES
    assert len(outcomes) == len(bodies)


KEPT_ALIVE_REQUESTS = 2_000


async def sequential(base: str, bodies: list[bytes]) -> list[tuple[int, float]]:
    # One connection, reused: what a busy sender with keep-alive sees per request.
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        results: list[tuple[int, float]] = []
        for body in bodies:
            started = time.perf_counter()
            async with session.post(
                base + "/v1/hooks/load",
                params={"token": TOKEN},
                data=body,
                headers={"Content-Type": "application/json"},
            ) as response:
                await response.read()
                results.append((response.status, time.perf_counter() - started))
        return results


def test_latency_of_a_202_on_a_kept_alive_connection(tmp_path: Path) -> None:
    """Sequential posts on one kept-alive connection: all 202, p50/p99 printed (not asserted)."""
    settings, env = fresh_settings(partitions=6)
    publish_workflows(settings, breakout("load", token_env="LOAD_TOKEN"))
    minute = current_minute_ms()
    bodies = [
        orjson.dumps(candle_payload(minute - (i % 50) * 60_000))
        for i in range(KEPT_ALIVE_REQUESTS + 200)
    ]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (tmp_path / "ingest.log").open("wb") as log:
        ingest = subprocess.Popen(
            [str(SLUICEGATE), "ingest"],
            env={**os.environ, **env, "SLUICEGATE_HTTP": f"127.0.0.1:{port}", "LOAD_TOKEN": TOKEN},
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            asyncio.run(wait_ready(base, ingest, 60))
            results = asyncio.run(sequential(base, bodies))
        finally:
            ingest.send_signal(signal.SIGTERM)
            ingest.wait(30)
    assert [status for status, _ in results] == [202] * len(bodies)
    latencies_ms = [seconds * 1000 for _, seconds in results[200:]]  # after a warm-up
    report = (
        f"ingest kept-alive: {len(latencies_ms)} sequential posts -> 202; latency of a 202 "
        f"p50={percentile(latencies_ms, 0.50):.2f} ms p99={percentile(latencies_ms, 0.99):.2f} ms"
    )
    print("\n" + report)
    assert len(read_deliveries(settings)) == len(bodies)
