"""202 means durable, even for a webhook killed with SIGKILL in the middle of a flood.

``sluicegate ingest`` (a real process) takes posts from 32 concurrent senders, each post a new
occurrence, and is killed with SIGKILL while requests are in flight, three times, restarted
after each kill. Every delivery it answered 202 must be on the deliveries topic: an answer
sent before the broker's acknowledgement would lose what librdkafka still held at the kill.
Requests cut off by the kill are unknown to their sender (no answer): they may or may not be
on the topic, as "503 means not confirmed, not not written" says of a timeout.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support.component_process import ComponentProcess
from tests.support.ingest import (
    breakout,
    candle_payload,
    current_minute_ms,
    fresh_settings,
    publish_workflows,
    read_deliveries,
)
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOKEN = "kill-token"
SENDERS = 32
KILLS = 3
ANSWERED_BEFORE_KILL = 300


async def _ready(base: str, ingest: ComponentProcess) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            assert ingest.alive(), ingest.log_tail()
            try:
                async with session.get(base + "/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.1)
    pytest.fail("sluicegate ingest did not become ready:\n" + ingest.log_tail())


async def _round(
    base: str, ingest: ComponentProcess, candles: itertools.count[int]
) -> tuple[set[str], Counter[str]]:
    """Flood until ANSWERED_BEFORE_KILL posts were answered 202, kill -9 with posts in
    flight, and return the delivery ids answered 202 and what the other posts got."""
    accepted: set[str] = set()
    others: Counter[str] = Counter()
    killed = asyncio.Event()
    minute = current_minute_ms()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def sender() -> None:
            while not killed.is_set():
                body = orjson.dumps(candle_payload(minute - next(candles) * 60_000))
                try:
                    async with session.post(
                        base + "/v1/hooks/drill",
                        params={"token": TOKEN},
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ) as response:
                        answer = await response.json()
                        if response.status == 202:
                            accepted.add(answer["delivery_id"])
                        else:
                            others[str(response.status)] += 1
                except (TimeoutError, aiohttp.ClientError) as e:
                    others[type(e).__name__] += 1
                if len(accepted) >= ANSWERED_BEFORE_KILL and not killed.is_set():
                    # Kill from the sender that saw the count: the other 31 are mid-request.
                    ingest.kill9()
                    killed.set()

        await asyncio.gather(*(sender() for _ in range(SENDERS)))
    return accepted, others


def test_every_202_is_on_the_topic_after_three_kill9s_mid_flood(tmp_path: Path) -> None:
    settings, env = fresh_settings(partitions=3)
    publish_workflows(settings, breakout("drill", token_env="DRILL_TOKEN"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ingest = ComponentProcess(
        settings,
        "ingest",
        log_path=tmp_path / "ingest.log",
        env={**env, "SLUICEGATE_HTTP": f"127.0.0.1:{port}", "DRILL_TOKEN": TOKEN},
    )
    candles = itertools.count(1)
    accepted: set[str] = set()
    cut_off: Counter[str] = Counter()
    try:
        for _ in range(KILLS):
            ingest.start()
            asyncio.run(_ready(base, ingest))
            answered, others = asyncio.run(_round(base, ingest, candles))
            accepted |= answered
            cut_off += others
    finally:
        ingest.stop()
    assert ingest.kills == KILLS
    assert sum(cut_off.values()) >= KILLS, f"no post was in flight at a kill: {cut_off}"
    on_topic = {d.delivery_id for d in read_deliveries(settings)}
    lost = accepted - on_topic
    assert not lost, f"{len(lost)} of {len(accepted)} deliveries answered 202 are not on the topic"
    print(
        f"\ningest kill -9 drill: {len(accepted)} answered 202, all on the topic; "
        f"{len(on_topic) - len(accepted)} more on it from {sum(cut_off.values())} posts cut "
        f"off ({dict(cut_off)})"
    )
