"""The ingest's producer on the real broker: reports served on the event loop, busy or idle.

``AsyncDeliveryProducer`` has no thread of its own: the loop polls librdkafka, every
millisecond while a delivery waits and every 100 ms otherwise. These tests hold it to what
that must still give: every acknowledged delivery on the topic once, a connection error
reported while nothing is being sent, and a shutdown that waits for what is queued.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from consumers.ingest.errors import BrokerUnavailable
from consumers.ingest.producer import AsyncDeliveryProducer
from schemas.commands import AdmitDelivery
from streams.settings import Settings, load_settings
from tests.support.core import candle, delivery, workflow
from tests.support.ingest import fresh_settings, read_deliveries
from tests.support.kafka import set_topic_config
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def _deliveries(count: int) -> list[AdmitDelivery]:
    wf = workflow()
    return [
        delivery(wf, candle(f"2026-11-30T12:{i // 60:02d}:{i % 60:02d}Z"), f"d-{i}", 0)
        for i in range(count)
    ]


def test_concurrent_sends_are_acknowledged_once_each_without_a_thread_of_its_own() -> None:
    settings, _ = fresh_settings()
    sent = _deliveries(300)

    async def scenario() -> tuple[int, int]:
        producer = AsyncDeliveryProducer(settings)
        threads_before = threading.active_count()
        producer.start(asyncio.get_running_loop())
        started_threads = threading.active_count() - threads_before
        await asyncio.gather(*(producer.send(d, 10.0) for d in sent))
        return started_threads, await producer.close()

    started_threads, unacknowledged = asyncio.run(scenario())
    assert started_threads == 0  # Python threads; librdkafka's own are not counted here
    assert unacknowledged == 0
    on_topic = read_deliveries(settings)
    assert sorted(d.delivery_id for d in on_topic) == sorted(d.delivery_id for d in sent)


def _dead(env: dict[str, str]) -> Settings:
    """The settings of ``env`` with the broker at a port nobody serves."""
    return load_settings({**env, "SLUICEGATE_KAFKA": f"127.0.0.1:{free_port()}"})


def test_an_idle_producer_still_reports_a_broker_it_cannot_reach(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, env = fresh_settings()

    async def scenario() -> int:
        producer = AsyncDeliveryProducer(_dead(env))
        producer.start(asyncio.get_running_loop())
        with caplog.at_level(logging.WARNING, logger="sluicegate.ingest.producer"):
            for _ in range(300):  # up to 30 s of the loop's idle polling
                if any("keeps retrying" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.1)
        return await producer.close(flush_timeout_s=0.1)

    assert asyncio.run(scenario()) == 0
    assert any("keeps retrying" in r.getMessage() for r in caplog.records)


def test_an_unacknowledged_send_is_refused_and_shutdown_counts_it() -> None:
    settings, env = fresh_settings()
    (one,) = _deliveries(1)

    async def scenario() -> int:
        producer = AsyncDeliveryProducer(_dead(env))
        producer.start(asyncio.get_running_loop())
        with pytest.raises(BrokerUnavailable, match="did not acknowledge"):
            await producer.send(one, 0.3)
        return await producer.close(flush_timeout_s=0.3)

    assert asyncio.run(scenario()) == 1
    assert read_deliveries(settings) == []


def test_a_producer_that_met_a_fatal_error_is_replaced_and_sends_go_on() -> None:
    """librdkafka's fatal errors leave a producer that refuses every later message. One is
    provoked on the real broker: with ``enable.gapless.guarantee`` (any librdkafka setting
    may be given, ``SLUICEGATE_RDKAFKA_*``) a delivery the broker refuses as too large is a
    fatal error. The delivery itself is refused; the ones after it must be acknowledged."""
    settings, env = fresh_settings()
    gapless = load_settings({**env, "SLUICEGATE_RDKAFKA_ENABLE_GAPLESS_GUARANTEE": "true"})
    set_topic_config(settings, "deliveries", {"max.message.bytes": "4096"})
    wf = workflow()
    too_large = delivery(wf, candle(note="x" * 20_000), "too-large", 0)
    after = _deliveries(20)

    async def scenario() -> tuple[bool, int, int]:
        producer = AsyncDeliveryProducer(gapless)
        producer.start(asyncio.get_running_loop())
        with pytest.raises(BrokerUnavailable, match="did not accept"):
            await producer.send(too_large, 10.0)
        await asyncio.sleep(0.3)  # idle polls meet the fatal error first
        for one in after:
            await producer.send(one, 10.0)
        return producer.reachable(5.0), producer.renewals, await producer.close()

    ready, renewals, unacknowledged = asyncio.run(scenario())
    assert ready
    assert renewals == 1
    assert unacknowledged == 0
    on_topic = read_deliveries(settings)
    assert sorted(d.delivery_id for d in on_topic) == sorted(d.delivery_id for d in after)
