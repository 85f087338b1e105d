"""A record that can never be produced is isolated, never retried forever.

Two kinds: an output over the topic's ``max.message.bytes`` (the broker refuses it, the
commit fails), and a state over the client's ``message.max.bytes`` (``produce`` refuses it at
once). Either way the poison input gets a dead letter with the reason and its original
bytes, the app's outcome for it, and every other record of the batch is decided normally.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from schemas.codec import decode
from schemas.events import DeliveryRejected, RunAdmitted
from streams.adapters.workflow_table import WorkflowTable
from streams.apps.admission import AdmissionApp
from streams.engine.processor import Processor
from streams.settings import Settings
from tests.support.admission import AdmissionHarness, candle
from tests.support.engine_toy import (
    Running,
    ToyApp,
    ToyProcessor,
    admitted,
    out_events,
    produce_records,
)
from tests.support.kafka import read_topic, set_topic_config, unique_settings, wait_until

pytestmark = pytest.mark.integration


def toy_topics(settings: Settings, out_max_bytes: int | None = None) -> None:
    admin = AdminClient(settings.kafka_config())
    out_config = {"max.message.bytes": str(out_max_bytes)} if out_max_bytes else {}
    topics = [
        NewTopic(settings.topic_named("in"), 3, 1),
        NewTopic(settings.topic_named("changelog"), 3, 1, config={"cleanup.policy": "compact"}),
        NewTopic(settings.topic_named("out"), 3, 1, config=out_config),
        NewTopic(settings.topic_named("dead-letters"), 1, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result()


def body(key: str, record_id: str) -> tuple[str, bytes]:
    return key, json.dumps({"key": key, "id": record_id}).encode()


def run_until_decided(
    settings: Settings, app: ToyApp, expected: set[str], timeout_s: float
) -> tuple[ToyProcessor, Running]:
    processor: ToyProcessor = Processor(settings, app, instance_id="poison", batch_size=100)
    running = Running(processor)
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: set(admitted(settings)) >= expected, timeout_s=timeout_s)
    running.stop()
    return processor, running


def _bytes(value: str | bytes | None) -> bytes:
    return value.encode() if isinstance(value, str) else (value or b"")


def dead_letters(settings: Settings) -> list[tuple[bytes, dict[str, bytes]]]:
    letters = []
    for m in read_topic(settings, settings.topic_named("dead-letters")):
        headers = m.headers() or []
        pairs = headers.items() if isinstance(headers, dict) else headers
        letters.append((m.value() or b"", {k: _bytes(v) for k, v in pairs}))
    return letters


def test_an_output_the_broker_refuses_is_isolated(toy_settings: Settings) -> None:
    settings = toy_settings
    toy_topics(settings, out_max_bytes=10_000)
    app = ToyApp(settings)
    normal = [body(f"k{n % 20}", f"id-{n}") for n in range(200)]
    poison_id = "big-" + "x" * 20_000
    poison = body("k3", poison_id)
    records = [*normal[:100], poison, *normal[100:]]
    produce_records(settings, records)
    expected = {json.loads(v)["id"] for _, v in normal}

    processor, running = run_until_decided(settings, app, expected, timeout_s=40)
    counts = admitted(settings)
    letters = dead_letters(settings)
    refused = [e for e in out_events(settings) if e["kind"] == "refused"]
    stats = processor.stats
    print(
        f"\nbroker-refused output: aborts={stats.aborts} batches={stats.batches}"
        f" decided={len(set(counts) & expected)}/{len(expected)} dead_letters={len(letters)}"
        f" refused={len(refused)} error={running.error!r}"
    )
    assert running.error is None
    assert set(counts) == expected and set(counts.values()) == {1}
    ((value, headers),) = letters
    assert value == poison[1]
    assert b"MSG_SIZE_TOO_LARGE" in headers["sluicegate.reason"]
    assert headers["sluicegate.origin"].startswith(settings.topic_named("in").encode())
    assert headers["sluicegate.kind"] == b"unrecordable"
    ((answer),) = refused
    assert answer["record_id"] == poison_id[:64] and "MSG_SIZE_TOO_LARGE" in answer["reason"]


def test_a_state_the_client_refuses_is_isolated(toy_settings: Settings) -> None:
    settings = toy_settings
    toy_topics(settings)
    app = ToyApp(settings)
    # Two ids of 600 kB on one key: the first is admitted, the state after the second is
    # over the client's 1 MB message.max.bytes, so its changelog record can never be written.
    first = body("huge", "a-" + "x" * 600_000)
    second = body("huge", "b-" + "x" * 600_000)
    normal = [body(f"k{n % 20}", f"id-{n}") for n in range(100)]
    produce_records(settings, [*normal[:50], first, second, *normal[50:]])
    expected = {json.loads(v)["id"] for _, v in [*normal, first]}

    processor, running = run_until_decided(settings, app, expected, timeout_s=40)
    counts = admitted(settings)
    letters = dead_letters(settings)
    stats = processor.stats
    print(
        f"\nclient-refused state: aborts={stats.aborts} batches={stats.batches}"
        f" decided={len(set(counts) & expected)}/{len(expected)} dead_letters={len(letters)}"
        f" error={running.error!r}"
    )
    assert running.error is None
    assert set(counts) == expected and set(counts.values()) == {1}
    ((value, headers),) = letters
    assert value == second[1]
    assert b"MSG_SIZE_TOO_LARGE" in headers["sluicegate.reason"]


@pytest.fixture()
def toy_settings() -> Settings:
    return unique_settings(partitions=3)


@pytest.fixture()
def harness() -> Iterator[AdmissionHarness]:
    h = AdmissionHarness(partitions=3)
    set_topic_config(h.settings, "runs", {"max.message.bytes": "20000"})
    h.apply_workflow()
    yield h
    h.close()


def test_a_delivery_that_cannot_be_recorded_is_rejected_with_an_answer(
    harness: AdmissionHarness,
) -> None:
    settings = harness.settings
    big = harness.deliver(candle(event_id="big", note="x" * 30_000))
    normal = [harness.deliver(candle(event_id=f"evt-{n}")) for n in range(5)]
    processor: Processor[Any, Any, Any] = Processor(
        settings,
        AdmissionApp(settings, WorkflowTable(settings)),
        instance_id="p1",
        clock=harness.clock,
        batch_size=200,
    )
    running = Running(processor)
    with contextlib.suppress(TimeoutError):
        harness.wait_for_outcomes(6, timeout_s=40)
    running.stop()
    out = harness.outcomes()
    letters = dead_letters(settings)
    outcome = out.outcome_for(big.delivery_id)
    print(
        f"\nbig delivery outcome: {[type(o).__name__ for o in outcome]}; "
        f"aborts={processor.stats.aborts} dead_letters={len(letters)}; "
        f"others admitted={sum(len(out.outcome_for(d.delivery_id)) for d in normal)}/5"
    )
    assert running.error is None
    (rejected,) = outcome
    assert isinstance(rejected, DeliveryRejected)
    assert rejected.reason == "cannot_be_recorded" and "MSG_SIZE_TOO_LARGE" in rejected.detail
    for delivery in normal:
        assert [type(o) for o in out.outcome_for(delivery.delivery_id)] == [RunAdmitted]
    ((value, headers),) = letters
    assert decode(value) == big
    assert b"MSG_SIZE_TOO_LARGE" in headers["sluicegate.reason"]
