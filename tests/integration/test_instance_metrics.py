"""``GET /metrics`` of an engine instance and of the projector, on the real broker (and
PostgreSQL): the counters match what was committed, and the lag runs from the committed (or
stored) offsets to the ends the consumer saw (``streams/engine/lag.py``)."""

from __future__ import annotations

import http.client
import random
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from projections.projector import Projector
from sluicegate.commands.projections import projector_probes
from sluicegate.health import HealthServer
from sluicegate.probes import EngineProbes
from streams.engine import lag
from streams.engine.processor import Processor
from streams.kafka.topics import ensure_topics
from tests.support.component_process import ComponentProcess
from tests.support.engine_toy import (
    Running,
    ToyApp,
    admitted,
    create_toy_topics,
    produce_records,
    record,
)
from tests.support.history import build_history, cleanup, produce_history
from tests.support.kafka import create_topics, unique_settings, wait_until
from tests.support.ports import free_port
from tests.support.prometheus import Page

pytestmark = pytest.mark.integration


def scrape(address: tuple[str, int]) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection(*address, timeout=5)
    try:
        conn.request("GET", "/metrics")
        answer = conn.getresponse()
        return answer.status, answer.getheader("Content-Type") or "", answer.read().decode()
    finally:
        conn.close()


def test_lag_runs_from_the_committed_offset_to_the_end_the_consumer_saw() -> None:
    settings = unique_settings(partitions=1)
    topic = settings.topic_named("lagged")
    create_topics(settings, [(topic, 2, False)])
    producer = Producer(settings.producer_config())
    for n in range(10):
        producer.produce(topic, value=b"%d" % n, partition=0)
    producer.produce(topic, value=b"x", partition=1)
    producer.flush(10)
    consumer = Consumer(
        settings.kafka_config(**{"group.id": f"{topic}-g", "enable.auto.commit": False})
    )
    committed = {(topic, 0): 3, (topic, 1): 0}
    try:
        assert lag.sample(consumer, committed) == ()  # nothing fetched yet
        consumer.assign([TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 0)])
        consumer.consume(1, timeout=5)  # a record of either; partition 1 may hold its own
        wait_until(
            lambda: len(lag.sample(consumer, committed)) == 2, timeout_s=10, what="both fetched"
        )
        assert lag.sample(consumer, committed) == (
            lag.PartitionLag(topic, 0, 3, 10),
            lag.PartitionLag(topic, 1, 0, 1),
        )
    finally:
        consumer.close()


def test_a_real_instances_counters_and_lag_over_a_backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = unique_settings(partitions=2)
    create_toy_topics(settings, 2)
    keys = [f"k{n}" for n in range(600)]
    produce_records(settings, [record(k, f"id-{k}") for k in keys])
    monkeypatch.setattr(lag, "SAMPLE_EVERY_S", 0.0)  # every loop: the backlog is short
    app = ToyApp(settings)
    processor = Processor(settings, app, instance_id="m-1", batch_size=5)
    probes = EngineProbes(processor.status, processor.stats, app.name, processor.instance_id)
    served = HealthServer(probes, ("127.0.0.1", 0))
    running = Running(processor)
    lags: list[float] = []
    try:

        def done() -> bool:
            status, kind, text = scrape(served.address)
            assert status == 200 and kind.startswith("text/plain; version=0.0.4"), (status, kind)
            page = Page(text)
            lags.append(sum(page.all("sluicegate_engine_input_lag_offsets").values()))
            return page.value("sluicegate_engine_records_total") == len(keys)

        wait_until(done, timeout_s=120, interval_s=0.01, what="every record decided")
        assert admitted(settings) == {f"id-{k}": 1 for k in keys}
        assert max(lags) > 0, "the backlog never showed as lag"
        wait_until(
            lambda: all(
                v <= 1
                for v in Page(scrape(served.address)[2])
                .all("sluicegate_engine_input_lag_offsets")
                .values()
            ),
            timeout_s=30,
            what="caught up: at most a commit marker per partition",
        )
        page = Page(scrape(served.address)[2])
        who = {"app": "toy", "instance_id": "m-1"}
        partitions = page.all("sluicegate_engine_input_lag_offsets", **who)
        assert {dict(k)["partition"] for k in partitions} == {"0", "1"}
        assert page.value("sluicegate_engine_transactions_total", **who) >= len(keys) / 5
        assert page.value("sluicegate_engine_events_total", **who) >= len(keys)
        assert page.value("sluicegate_engine_phase", phase="running", **who) == 1
        assert page.value("sluicegate_engine_ready", **who) == 1
        assert page.value("sluicegate_engine_assigned_partitions", **who) == 2
    finally:
        running.stop()
        served.close()
    assert running.error is None


def test_the_processor_command_serves_metrics_beside_its_probes(tmp_path: Path) -> None:
    settings = unique_settings(partitions=2)
    ensure_topics(settings)
    port = free_port()
    process = ComponentProcess(
        settings,
        "processor",
        ["--instance-id", "metrics-1", "--health", f"127.0.0.1:{port}"],
        log_path=tmp_path / "processor.log",
    )
    process.start()
    try:

        def ready() -> bool:
            try:
                return Page(scrape(("127.0.0.1", port))[2]).value("sluicegate_engine_ready") == 1
            except OSError:
                return False

        wait_until(ready, timeout_s=60, what="the processor ready")
        page = Page(scrape(("127.0.0.1", port))[2])
        who = {"app": "admission", "instance_id": "metrics-1"}
        assert page.value("sluicegate_engine_phase", phase="running", **who) == 1
        assert page.value("sluicegate_engine_assigned_partitions", **who) == 2
    finally:
        process.stop()


def test_the_projectors_metrics_show_its_lag_until_it_caught_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = unique_settings(partitions=2)
    ensure_topics(settings)
    rng = random.Random(7)
    produce_history(settings, build_history(rng, 60), rng=rng)
    monkeypatch.setattr(lag, "SAMPLE_EVERY_S", 0.0)  # every loop: the backlog is short
    projector = Projector(settings, batch_size=10)
    served = HealthServer(projector_probes(projector), ("127.0.0.1", 0))
    thread = threading.Thread(target=projector.run)
    seen: list[float] = []
    thread.start()
    try:

        def caught_up() -> bool:
            status, _, text = scrape(served.address)
            assert status == 200
            page = Page(text)
            found = page.all("sluicegate_projector_lag_offsets", app="projector", share="all")
            seen.append(sum(found.values()))
            return bool(found) and sum(found.values()) == 0

        wait_until(caught_up, timeout_s=120, interval_s=0.01, what="the projector caught up")
        page = Page(scrape(served.address)[2])
        assert max(seen) > 0, "the backlog never showed as lag"
        assert page.value("sluicegate_projector_messages_total") > 0
        assert page.value("sluicegate_projector_ready") == 1
        assert page.value("sluicegate_projector_healthy") == 1
        lagged = page.all("sluicegate_projector_lag_offsets")
        assert {dict(k)["topic"] for k in lagged} >= {settings.topic_named("runs")}
    finally:
        projector.stop.set()
        thread.join(60)
        served.close()
        projector.close()
        cleanup(settings)
