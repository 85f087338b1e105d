"""TradingView's resend pattern on a controllable clock: four sends, one occurrence, one run.

TradingView resends an alert 5 s after a 5xx answer (except 504), up to three times. Here the
first send is acknowledged by Kafka but answered 500 (a fault injected after the ack, as if
the answer was lost), and the three resends follow 5 s apart on the injected clock. Every
send is a delivery with the same admission key; the processor admits one run and answers
the three copies with it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from schemas.commands import AdmitDelivery
from schemas.events import DeliveryDeduplicated, RunAdmitted
from tests.support.component_process import ProcessorProcess
from tests.support.ingest import (
    FakeClock,
    breakout,
    candle_payload,
    current_minute_ms,
    fresh_settings,
    ingest_client,
    publish_workflows,
    read_deliveries,
    read_runs,
)
from tests.support.kafka import wait_until

pytestmark = pytest.mark.integration

TOKEN = "tv-resend-token"


def test_tradingview_resends_after_a_500_become_one_run(tmp_path: Path) -> None:
    settings, env = fresh_settings()
    publish_workflows(settings, breakout("tv-resend", token_env="TV_TOKEN"))
    candle_open = current_minute_ms()
    body = orjson.dumps(candle_payload(candle_open))
    clock = FakeClock(candle_open + 60_000 + 250)
    first_received = clock.now_ms
    lost_answers = [RuntimeError("injected fault: the answer to this send is lost")]

    def fault_after_ack(_delivery: AdmitDelivery) -> None:
        if lost_answers:
            raise lost_answers.pop()

    statuses: list[int] = []
    answered: list[dict[str, object]] = []

    async def tradingview() -> None:
        async with ingest_client(
            settings, environ={"TV_TOKEN": TOKEN}, clock=clock, after_ack=fault_after_ack
        ) as client:
            for send in range(4):
                if send:
                    clock.advance(5_000)
                async with client.post(
                    "/v1/hooks/tv-resend",
                    params={"token": TOKEN},
                    data=body,
                    headers={"Content-Type": "application/json"},
                ) as response:
                    statuses.append(response.status)
                    answered.append(await response.json())

    asyncio.run(tradingview())
    assert statuses == [500, 202, 202, 202]
    assert answered[0]["error"]["code"] == "internal_error"  # type: ignore[index]

    deliveries = read_deliveries(settings)
    assert len(deliveries) == 4
    assert len({d.delivery_id for d in deliveries}) == 4
    assert len({d.admission_key for d in deliveries}) == 1
    assert sorted(d.received_at_ms for d in deliveries) == [
        first_received + i * 5_000 for i in range(4)
    ]
    assert {a["admission_key"] for a in answered[1:]} == {deliveries[0].admission_key}
    assert all(d.channel == "http" for d in deliveries)
    assert all(TOKEN not in d.payload_json for d in deliveries)

    ids = {d.delivery_id for d in deliveries}
    processor = ProcessorProcess(settings, "resend", tmp_path, env=env)
    processor.start()
    try:

        def decided() -> bool:
            seen = {getattr(r, "delivery_id", None) for r in read_runs(settings)}
            return ids <= seen

        wait_until(decided, 120, what="outcomes of the four deliveries")
    except TimeoutError:
        pytest.fail(f"processor did not decide in time; its log:\n{processor.log_tail()}")
    finally:
        processor.stop()

    outcomes = [r for r in read_runs(settings) if getattr(r, "delivery_id", None) in ids]
    admitted = [r for r in outcomes if isinstance(r, RunAdmitted)]
    duplicates = [r for r in outcomes if isinstance(r, DeliveryDeduplicated)]
    assert len(admitted) == 1
    assert len(duplicates) == 3
    assert len(outcomes) == 4
    run_id = admitted[0].run_id
    assert {d.run_id for d in duplicates} == {run_id}
    # The first send (answered 500) is the one that was admitted: it reached Kafka first.
    first = min(deliveries, key=lambda d: d.received_at_ms)
    assert admitted[0].delivery_id == first.delivery_id
