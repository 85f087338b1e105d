"""Shared set-up for the ingest integration tests (this module holds no tests).

Each test gets its own topic prefix ``t-<uuid8>.`` and real topics (``ensure_topics``), its
own workflows published to the compacted topic, and, where admission is needed, a real
``sluicegate processor`` subprocess with the same settings.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from confluent_kafka import Consumer, Producer, TopicPartition

from consumers.ingest.app import create_app
from consumers.ingest.settings import IngestSettings
from schemas.codec import decode, encode
from schemas.commands import AdmitDelivery
from schemas.events import WorkflowRevised
from streams.core.workflow import WorkflowDefinition, revise, workflow_key
from streams.kafka.topics import ensure_topics
from streams.settings import Settings, load_settings
from tests.support.kafka import high_watermark, new_prefix, read_topic

REPO = Path(__file__).resolve().parents[2]
SLUICEGATE = REPO / ".venv" / "bin" / "sluicegate"

Client = TestClient[web.Request, web.Application]


def fresh_env(partitions: int = 3) -> dict[str, str]:
    """Environment variables for an isolated run: prefix ``t-<uuid8>.``, private state dir,
    and no read listener (its default port would be shared by every test's ``ingest``)."""
    prefix = new_prefix()
    return {
        "SLUICEGATE_KAFKA": os.environ.get("SLUICEGATE_KAFKA", "127.0.0.1:9092"),
        "SLUICEGATE_TOPIC_PREFIX": prefix,
        "SLUICEGATE_PARTITIONS": str(partitions),
        "SLUICEGATE_STATE_DIR": str(REPO / "var" / "test-state" / prefix),
        "SLUICEGATE_READ_HTTP": "off",
    }


def fresh_settings(partitions: int = 3) -> tuple[Settings, dict[str, str]]:
    """Settings (topics created) and the environment that describes them to subprocesses."""
    env = fresh_env(partitions)
    settings = load_settings(env)
    ensure_topics(settings)
    return settings, env


def breakout(
    subscription: str,
    environment: str = "paper",
    *,
    token_env: str | None = None,
    hmac_env: str | None = None,
) -> WorkflowRevised:
    """The README's example workflow (candle identity) for ``subscription``."""
    definition = WorkflowDefinition(
        subscription=subscription,
        environment=environment,
        slots=("analysis", "signal", "journal"),
        branch_timeout_ms=30_000,
        branch_attempts=3,
        retention_ms=7 * 86_400_000,
        identity_event_id_field="event_id",
        identity_derived_fields=("venue", "instrument", "interval", "candle_open", "rule"),
        immutable_fields=("side", "rule", "price"),
        validity_source_time="candle_close",
        validity_window_ms=5_000,
        scope_fields=("account", "instrument", "side"),
        scope_sequence_field="candle_open",
        auth_token_env=token_env,
        auth_hmac_secret_env=hmac_env,
    )
    revised = revise(None, definition, int(time.time() * 1000))
    assert revised is not None
    return revised


def publish_workflows(settings: Settings, *workflows: WorkflowRevised) -> None:
    """Write revisions to the compacted workflows topic, as ``workflows apply`` would."""
    producer = Producer(settings.kafka_config(**{"acks": "all", "enable.idempotence": True}))
    for wf in workflows:
        producer.produce(
            settings.topic_named("workflows"),
            key=workflow_key(wf.subscription, wf.environment).encode(),
            value=encode(wf),
        )
    assert producer.flush(30) == 0


def candle_payload(candle_open_ms: int, **changes: object) -> dict[str, object]:
    """A TradingView-style alert for one candle (no event id: identity is derived)."""
    payload: dict[str, object] = {
        "source": "tradingview",
        "venue": "binance",
        "instrument": "BTCUSDT",
        "interval": "1m",
        "candle_open": candle_open_ms,
        "rule": "breakout-v1",
        "side": "buy",
        "price": "97000.5",
        "account": "acc-1",
    }
    payload.update(changes)
    return payload


def current_minute_ms() -> int:
    """The open of the last closed one-minute candle: recent enough for any retention
    horizon, and closed, so its source time (the close) is not in the future."""
    return int(time.time() // 60 * 60 * 1000) - 60_000


def end_offsets(settings: Settings, short_name: str) -> dict[int, int]:
    """Partition -> high watermark of one of Sluicegate's topics."""
    topic = settings.topic_named(short_name)
    consumer = Consumer(settings.kafka_config(**{"group.id": f"ends-{uuid.uuid4().hex}"}))
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {
            p: high_watermark(consumer, TopicPartition(topic, p))
            for p in sorted(metadata.partitions)
        }
    finally:
        consumer.close()


def read_deliveries(settings: Settings) -> list[AdmitDelivery]:
    """Every delivery on the topic, checking that each is keyed by its admission key."""
    out: list[AdmitDelivery] = []
    for msg in read_topic(settings, settings.topic_named("deliveries")):
        value = msg.value()
        assert value is not None
        record = decode(value)
        assert isinstance(record, AdmitDelivery)
        assert msg.key() == record.admission_key.encode()
        out.append(record)
    return out


def read_runs(settings: Settings) -> list[object]:
    """Every committed record of the ``runs`` topic, decoded."""
    values = [m.value() for m in read_topic(settings, settings.topic_named("runs"))]
    return [decode(v) for v in values if v is not None]


@asynccontextmanager
async def ingest_client(
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], int] | None = None,
    limits: IngestSettings | None = None,
    after_ack: Callable[[AdmitDelivery], None] | None = None,
) -> AsyncIterator[Client]:
    """The real app (real producer, workflow table and outcome tail) behind a test client."""
    kwargs: dict[str, object] = {}
    if clock is not None:
        kwargs["clock"] = clock
    app = create_app(
        settings,
        environ=dict(environ or {}),
        limits=limits,
        after_ack=after_ack,
        **kwargs,  # type: ignore[arg-type]
    )
    async with TestClient(TestServer(app)) as client:
        yield client


class FakeClock:
    """A controllable epoch-millisecond clock."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms
